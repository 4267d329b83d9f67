"""`atom-mxfp4 eval accuracy`: the layer over MXFP4 caches vs the fp64 oracle, per ScaleMode and data family.

For each family (atom_mxfp4/evals/accuracy_data.py) and context length N, one request's first N - Q tokens are written
to the caches (`ops.fused_qknorm_rope_write`, chunked) and its last Q tokens run through
`SparseMXFP4Attention` as a chunked prefill (rows = query tokens, sparse top-k on the MXFP4 index-K).
Against `reference.attention_oracle` (fp64, unquantized K/V/index-K, exact top-k) at the same Q positions:

- rel-L2: ||out - oracle|| / ||oracle|| over the Q rows (all heads);
- top-k agreement: share of the oracle's selected blocks (init/local forcing included) that were selected;
- needle recall: share of (query row, needle) pairs whose block every index head selected; and "kept": the
  share of the pairs the exact oracle found that this cache found too (the generator's needles are not all
  findable at every depth and length, so the absolute recall mixes the data's difficulty with the cache's).

Reference caches: `fp8` (float8_e4m3fn, unit scale, saturating at 448) and `bf16` run through the oracle itself
with K, V and index-K rounded through that dtype (`kv_round`), so they carry no kernel error at all; the
`mxfp4-<mode> (emulated)` rows do the same with the MXFP4 codec, separating codec error from kernel error.

Index-K dtype (`--index-k-dtypes`): `mxfp4-<mode>` rows store the index-K as MXFP4 (as K / V), `mxfp4-<mode>
idx-fp8` rows as fp8 (e4m3 + per-32 e8m0 scales, atom_mxfp4.index_k); with `--emulate` the oracle also runs with
K / V through MXFP4 and the index-K through each fp8 layout candidate: `idx-fp8` (per-32 e8m0, the shipped one) and
`idx-fp8-token` (one fp32 scale per token, amax / 448), which is how the layout was chosen.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import shlex
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from atom_mxfp4 import argtypes, ops
from atom_mxfp4.backends import resolve_backend
from atom_mxfp4.layout import PAGE_SIZE
from atom_mxfp4.commands import add_backend_option, changed_options, check_backend, refuse_others, resolved_device
from atom_mxfp4.errors import expect, fail
from atom_mxfp4.demo import rel_l2, topk_agreement
from atom_mxfp4.format import ScaleMode, dequantize_mxfp4, quantize_mxfp4
from atom_mxfp4.index_k import IndexKDtype, dequantize_fp8, quantize_fp8
from atom_mxfp4.layer import AttentionMetadata, LayerCaches, LayerConfig, SparseMXFP4Attention
from atom_mxfp4.reference import attention_oracle
from atom_mxfp4.synthetic import make_weights

from .accuracy_data import FAMILIES, make_family

WRITE_CHUNK = 8192  # tokens per cache-write call (bounds the fp32 temporaries of the torch backend)
FP8_MAX = 448.0  # float8_e4m3fn largest finite value


@dataclass
class Row:
    family: str
    tokens: int
    cache: str  # "mxfp4-ceil" ... (the layer), "mxfp4-ceil (emulated)", "fp8", "bf16", "exact"
    seed: int
    rel_l2: float
    topk_agreement: float
    needle_hits: int
    needle_asked: int
    per_needle: dict  # needle position -> recall in [0, 1]
    seconds: float
    needle_kept: int = 0  # pairs found by both this cache and the exact oracle
    needle_exact: int = 0  # pairs found by the exact oracle
    layer: str = "sparse"  # "dense": full attention over the whole context (no selection; agreement n/a = 1)


def _round_fp8(t: torch.Tensor) -> torch.Tensor:
    return t.float().clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).double()


def _round_bf16(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.bfloat16).double()


REFERENCE_CACHES = {"fp8": _round_fp8, "bf16": _round_bf16}  # the oracle with K, V and index-K in that dtype


def _round_mxfp4(mode: ScaleMode):
    def apply(t: torch.Tensor) -> torch.Tensor:
        data, scale = quantize_mxfp4(t.float(), mode)
        return dequantize_mxfp4(data, scale, torch.float64)

    return apply


def _round_fp8_e8m0(t: torch.Tensor) -> torch.Tensor:
    """The fp8 index-K codec (atom_mxfp4.index_k): e4m3 elements, one e8m0 scale per 32."""
    data, scale = quantize_fp8(t.float())
    return dequantize_fp8(data, scale, torch.float64)


def _round_fp8_token(t: torch.Tensor) -> torch.Tensor:
    """The candidate that lost: e4m3 elements, one fp32 scale ``amax / 448`` per token row."""
    x = t.float()
    scale = x.abs().amax(-1, keepdim=True) / FP8_MAX
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    return ((x / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).float() * scale).double()


INDEX_FP8_LAYOUTS = {"idx-fp8": _round_fp8_e8m0, "idx-fp8-token": _round_fp8_token}  # emulated index-K rounding


def cache_name(mode: ScaleMode, index_k_dtype: IndexKDtype) -> str:
    """Row label of the layer over MXFP4 K / V with ``mode`` and this index-K dtype."""
    return f"mxfp4-{mode.value}" + ("" if index_k_dtype is IndexKDtype.MXFP4 else f" idx-{index_k_dtype.value}")


def needle_masks(topk: torch.Tensor, needles: list[int], positions: torch.Tensor) -> dict[int, torch.Tensor]:
    """topk [niq, R, topk] block ids (-1 padded), positions [R] -> needle -> found [R] bool: the row is at or
    after the needle and every index head selected the needle's block."""
    return {p: (topk == p // PAGE_SIZE).any(-1).all(0) & (positions >= p) for p in needles}


def needle_recall(topk: torch.Tensor, needles: list[int], positions: torch.Tensor) -> dict[int, tuple[int, int]]:
    """needle -> (rows that found it, rows at or after it)."""
    masks = needle_masks(topk, needles, positions)
    return {p: (int(masks[p].sum()), int((positions >= p).sum())) for p in needles}


def run_layer(request, weights, config: LayerConfig, num_queries: int, device, backend):
    """Write the prompt to fresh MXFP4 caches, run the last `num_queries` tokens through the layer.

    Returns (out [Q, nq*D] bf16 on cpu, topk [niq, Q, topk] i32 on cpu, None on dense layers).
    """
    n = request.qkv.shape[0]
    prompt = n - num_queries
    pages = -(-n // PAGE_SIZE)
    # pages in a shuffled order (page ids are not token order in a real pool), one spare page
    block_table = (torch.randperm(pages + 1, generator=torch.Generator().manual_seed(pages))[:pages]
                   .int()[None].to(device))
    caches = LayerCaches.allocate(config, pages + 1, device)
    w = {k: v.to(device) for k, v in weights.items()}
    layer = SparseMXFP4Attention(config, w, backend=backend)
    qkv = request.qkv.to(device)
    for start in range(0, prompt, WRITE_CHUNK):
        count = min(WRITE_CHUNK, prompt - start)
        meta = AttentionMetadata.for_requests(block_table, [start], [count])
        ops.fused_qknorm_rope_write(
            qkv[start : start + count], meta.positions, w["q_norm"], w["k_norm"], w.get("idx_q_norm"),
            w.get("idx_k_norm"), layer.cos_sin_cache(device), meta.slot_mapping, caches.k, caches.v,
            caches.index_k, num_q_heads=config.num_q_heads, num_kv_heads=config.num_kv_heads,
            num_index_heads=config.index_heads, rotary_dim=config.rotary_dim, eps=config.eps,
            scale_mode=config.scale_mode, q_dtype=config.q_dtype, index_k_dtype=config.index_k_dtype,
            backend=backend)
    meta = AttentionMetadata.for_requests(block_table, [prompt], [num_queries])
    out, topk = layer(qkv[prompt:], meta, caches, return_topk=True)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return out.cpu(), (None if topk is None else topk.cpu())


def _row(family, tokens, cache, seed, out, selected, exact, needles, positions, seconds) -> Row:
    if selected is None:  # dense layer: no selection
        return Row(family=family, tokens=tokens, cache=cache, seed=seed, rel_l2=rel_l2(out, exact.out),
                   topk_agreement=1.0, needle_hits=0, needle_asked=0, per_needle={}, seconds=round(seconds, 3),
                   layer="dense")
    recall = needle_recall(selected, needles, positions) if needles else {}
    mine, truth = needle_masks(selected, needles, positions), needle_masks(exact.selected, needles, positions)
    return Row(family=family, tokens=tokens, cache=cache, seed=seed, rel_l2=rel_l2(out, exact.out),
               needle_kept=sum(int((mine[p] & truth[p]).sum()) for p in needles),
               needle_exact=sum(int(truth[p].sum()) for p in needles),
               topk_agreement=topk_agreement(selected, exact.selected),
               needle_hits=sum(h for h, _ in recall.values()), needle_asked=sum(a for _, a in recall.values()),
               per_needle={str(p): (h / a if a else float("nan")) for p, (h, a) in recall.items()},
               seconds=round(seconds, 3))


def evaluate_case(family: str, tokens: int, seed: int, args, device) -> list[Row]:
    """All cache variants of one (family, context length, seed); with args.dense also the dense layer."""
    modes = [ScaleMode.parse(m) for m in args.scale_modes]
    sparse = LayerConfig(topk=args.topk, max_position=tokens + 1)
    weights = make_weights(sparse, seed)
    depths = args.needle_depths
    request = make_family(family, sparse, tokens, args.queries, depths, seed, args.needle_strength)
    positions = torch.arange(tokens - args.queries, tokens)
    rows = []
    for base in [sparse] + ([LayerConfig(sparse=False, max_position=tokens + 1)] if args.dense else []):
        # dense layers have no indexer: the same tokens without the idx_q / idx_k heads
        req = type(request)(request.qkv[:, : base.qkv_width].contiguous(), request.needles, request.seek_from)
        w = {k: v for k, v in weights.items() if base.sparse or not k.startswith("idx")}
        rows += _variants(family, tokens, seed, args, device, base, req, w, positions, modes)
    return rows


def _variants(family, tokens, seed, args, device, base, request, weights, positions, modes) -> list[Row]:
    needles = request.needles if base.sparse else []

    def oracle(kv_round=None):
        t0 = time.perf_counter()
        result = attention_oracle(request.qkv, weights, base, query_positions=positions, kv_round=kv_round)
        return result, time.perf_counter() - t0

    def row(cache, out, selected, seconds):
        return _row(family, tokens, cache, seed, out, selected, exact, needles, positions, seconds)

    exact, seconds = oracle()
    rows = [row("exact", exact.out, exact.selected, seconds)]
    for name, fn in REFERENCE_CACHES.items():
        if name in args.caches:
            ref, seconds = oracle(fn)
            rows.append(row(name, ref.out, ref.selected, seconds))
    # dense layers have no index-K: one run per mode
    index_dtypes = [IndexKDtype.parse(d) for d in args.index_k_dtypes] if base.sparse else [IndexKDtype.MXFP4]
    for mode in modes:
        if args.emulate:
            ref, seconds = oracle(_round_mxfp4(mode))
            rows.append(row(f"mxfp4-{mode.value} (emulated)", ref.out, ref.selected, seconds))
            if IndexKDtype.FP8 in index_dtypes:
                for label, fn in INDEX_FP8_LAYOUTS.items():
                    t0 = time.perf_counter()
                    ref = attention_oracle(request.qkv, weights, base, query_positions=positions,
                                           kv_round=_round_mxfp4(mode), index_k_round=fn)
                    rows.append(row(f"mxfp4-{mode.value} {label} (emulated)", ref.out, ref.selected,
                                    time.perf_counter() - t0))
        for index_dtype in index_dtypes:
            config = dataclasses.replace(base, scale_mode=mode, index_k_dtype=index_dtype.value)
            t0 = time.perf_counter()
            out, topk = run_layer(request, weights, config, args.queries, device, args.backend)
            rows.append(row(cache_name(mode, index_dtype), out, topk, time.perf_counter() - t0))
    return rows


def _command_line(args: argparse.Namespace) -> str:
    """An `atom-mxfp4 eval accuracy ...` line equivalent to `args` (the options that differ from the defaults)."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    words = ["atom-mxfp4", "eval", "accuracy"]
    for action, value in changed_options(parser, args):
        flag = action.option_strings[0]
        if isinstance(action, (argparse._StoreFalseAction, argparse._StoreTrueAction)):
            words.append(flag)
        else:
            words += [flag, ",".join(map(str, value)) if isinstance(value, list) else str(value)]
    return shlex.join(words)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--families", metavar="NAME,...", type=argtypes.comma_list(argtypes.one_of(FAMILIES),
                                                                                    "family names"),
                        default=",".join(FAMILIES), help=f"comma list of {list(FAMILIES)} (default: all)")
    parser.add_argument("--tokens", metavar="TOKENS", type=argtypes.positive_int, default=4096,
                        help="context length in tokens of every family but 'long' (default: %(default)s)")
    parser.add_argument("--long-tokens", metavar="TOKENS,...", type=argtypes.positive_ints, default="16384",
                        help="context lengths in tokens of the 'long' family, comma list (default: %(default)s)")
    parser.add_argument("--queries", metavar="ROWS", type=argtypes.positive_int, default=32,
                        help="query rows per request (its last tokens), fewer than the shortest context "
                        "(default: %(default)s)")
    parser.add_argument("--needle-depths", metavar="FRACTION,...", type=argtypes.fractions,
                        default="0.05,0.25,0.5,0.75,0.95",
                        help="needle positions as fractions in [0, 1] of the prompt (default: %(default)s)")
    parser.add_argument("--needle-strength", metavar="X", type=argtypes.non_negative_float, default=1.0,
                        help="how hard the queries seek the needles, a multiple of the query RMS "
                        "(synthetic.make_request's needle_strength; default: %(default)s)")
    parser.add_argument("--topk", metavar="BLOCKS", type=argtypes.positive_int, default=16,
                        help=f"top-k blocks of {PAGE_SIZE} tokens each (default: %(default)s)")
    parser.add_argument("--scale-modes", metavar="MODE,...", type=argtypes.scale_modes, default="ceil,floor,mse",
                        help=f"ScaleModes of the MXFP4 cache, comma list of {[m.value for m in ScaleMode]} "
                        "(default: %(default)s)")
    parser.add_argument("--index-k-dtypes", metavar="DTYPE,...", type=argtypes.comma_list(
                        argtypes.one_of(m.value for m in IndexKDtype), "index-K dtypes"), default="mxfp4,fp8",
                        help="index-K cache dtypes of the sparse layer, comma list of "
                        f"{[m.value for m in IndexKDtype]} "
                        "(default: %(default)s)")
    parser.add_argument("--caches", metavar="DTYPE,...", type=argtypes.comma_list(
                        argtypes.one_of(REFERENCE_CACHES), "reference caches", allow_empty=True), default="fp8,bf16",
                        help=f"reference caches through the oracle, comma list of {list(REFERENCE_CACHES)}, '' for "
                        "none (default: %(default)s)")
    parser.add_argument("--no-emulate", dest="emulate", action="store_false",
                        help="skip the oracle-with-MXFP4-rounding rows (default: run them)")
    parser.add_argument("--dense", action="store_true",
                        help="also run the dense layer (full attention, no selection): codec error alone "
                        "(default: off)")
    parser.add_argument("--seeds", metavar="SEED,...", type=argtypes.seeds, default="0",
                        help="seeds, comma list (one request per family and seed) (default: %(default)s)")
    parser.add_argument("--device", type=argtypes.device, default=None,
                        help="cpu | cuda | cuda:N (default: cuda when available, else cpu)")
    add_backend_option(parser)
    parser.add_argument("--out-dir", metavar="DIR", type=argtypes.output_dir, default=None,
                        help="write results.json, results.md and plots into this folder (default: print only)")
    parser.add_argument("--no-plots", dest="plots", action="store_false",
                        help="skip the matplotlib plots (default: write them with --out-dir)")
    parser.add_argument("--from-results", metavar="JSON", type=argtypes.existing_file, default=None,
                        help="run nothing: re-render results.md and the plots from this results.json into --out-dir "
                        "(default: run the study)")


def check_arguments(args: argparse.Namespace) -> None:
    """What no single flag can check: --queries against the shortest context of the families asked for."""
    unknown = sorted(set(args.families) - set(FAMILIES))
    expect(not unknown, "--families", f"a subset of {list(FAMILIES)}", f"unknown {unknown}")
    shortest = min([args.tokens] + (list(args.long_tokens) if "long" in args.families else []))
    expect(args.queries < shortest, "--queries", f"fewer than {shortest} (the shortest context, --tokens / "
           "--long-tokens)", args.queries)


def check(args: argparse.Namespace) -> None:
    """The CLI's check (atom_mxfp4.commands.command): --from-results runs nothing else; the flag combinations."""
    if args.from_results:
        refuse_others(args, "--from-results", ("--out-dir", "--no-plots"))
        return
    check_arguments(args)
    check_backend(args)


def _read_results(path: str | Path) -> dict:
    try:
        results = json.loads(Path(path).read_text())
        expect(isinstance(results, dict) and "rows" in results, str(path), "a results.json with 'rows'",
               "other JSON")
        return results
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        fail(str(path), "a results.json written by eval accuracy", f"{type(error).__name__}: {error}")


def run_study(args: argparse.Namespace) -> dict:
    """Run every case, print the table, write results (json, md, png) to args.out_dir; return the results dict."""
    if args.from_results:  # re-render a finished (or cut-short) run, e.g. one that came back from the H200
        return write_report(_read_results(args.from_results), Path(args.out_dir or "."), args.plots)
    check_arguments(args)
    device = resolved_device(args)
    cases = [(f, n, s) for f in args.families for n in (args.long_tokens if f == "long" else [args.tokens])
             for s in args.seeds]
    started = time.time()
    out = Path(args.out_dir) if args.out_dir else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    results = {
        "command": _command_line(args),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda"
        else f"cpu ({platform.processor() or platform.machine()})",
        "backend": args.backend or f"default ({resolve_backend(None, device).name})",
        "torch": torch.__version__,
        "queries": args.queries,
        "topk": args.topk,
        "seconds": 0.0,
        "rows": [],
    }
    for i, (family, tokens, seed) in enumerate(cases):
        t0 = time.perf_counter()
        case_rows = evaluate_case(family, tokens, seed, args, device)
        results["rows"] += [asdict(r) for r in case_rows]
        results["seconds"] = round(time.time() - started, 1)
        if out:  # after every case, so that a run cut short still leaves its finished cases
            (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
        summary = ", ".join(f"{r.cache}{'' if r.layer == 'sparse' else ' dense'} {r.rel_l2:.4f}" for r in case_rows
                            if r.cache.startswith("mxfp4-") and "emulated" not in r.cache)
        print(f"[accuracy {i + 1}/{len(cases)}] {family} N={tokens} seed={seed} "
              f"({time.perf_counter() - t0:.1f}s): rel-L2 {summary}", file=sys.stderr, flush=True)
    return write_report(results, out, args.plots)


def write_report(results: dict, out: Path | None, plots: bool = True) -> dict:
    """Print the markdown report; with `out`, write results.json, results.md and (with `plots`) the PNGs."""
    from .accuracy_report import markdown_report, write_plots

    report = markdown_report(results)
    print(report)
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
        pngs = write_plots(results, out) if plots else []
        (out / "results.md").write_text(markdown_report(results, pngs) + "\n")
        print(f"wrote {out}/results.json, results.md" + "".join(f", {p.name}" for p in pngs), file=sys.stderr)
    return results
