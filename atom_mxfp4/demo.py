"""``atom-mxfp4 demo``: ragged requests prefilled (chunked) then decoded through the layer, scored vs the oracle.

Default: MiniMax-M3 TP4-rank geometry (16 q heads, 1 KV head, top-16 blocks of 128), four ragged requests
with a sink and a needle each, sized to run in about a minute on a 2-core CPU. ``--contexts``,
``--decode-steps`` and ``--chunk`` make it bigger.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field

import torch
from tqdm import tqdm

from . import argtypes
from .cache import kv_bytes_per_token, tokens_that_fit
from .layout import PAGE_SIZE
from .commands import HelpFormatter, add_backend_option, check_backend, command, resolved_device
from .commands import run as run_command
from .format import ScaleMode
from .index_k import DEFAULT_INDEX_K_DTYPE, IndexKDtype
from .layer import AttentionMetadata, LayerCaches, LayerConfig, SparseMXFP4Attention
from .reference import attention_oracle
from .synthetic import make_request, make_weights

LAYERS, DENSE_LAYERS = 60, 3  # MiniMax-M3: the first 3 layers dense, the rest sparse


@dataclass
class RunResult:
    outputs: list[torch.Tensor]  # per request [prompt + decode, nq*D] bf16 (cpu)
    topk: list[torch.Tensor | None]  # per request [nkv, rows, topk] i32 (sparse) or None
    prefill_seconds: float = 0.0
    decode_seconds: list[float] = field(default_factory=list)


def run_requests(layer: SparseMXFP4Attention, requests, prompt_lens: list[int], decode_steps: int, chunk: int,
                 device, progress: bool = True) -> RunResult:
    """Prefill every request in chunks of ``chunk`` tokens (all requests batched per step), then decode."""
    config = layer.config
    totals = [len(r.qkv) for r in requests]
    pages_per_request = [-(-n // PAGE_SIZE) for n in totals]
    num_pages = sum(pages_per_request) + 1
    permutation = torch.randperm(num_pages, generator=torch.Generator().manual_seed(1))  # ragged page ids
    block_table = torch.zeros(len(requests), max(pages_per_request), dtype=torch.int32)
    start = 0
    for b, n in enumerate(pages_per_request):
        block_table[b, :n] = permutation[start : start + n].int()
        start += n
    block_table = block_table.to(device)
    caches = LayerCaches.allocate(config, num_pages, device)
    outputs = [[] for _ in requests]
    topks = [[] for _ in requests]
    result = RunResult([], [])

    def step(prefix, new):
        meta = AttentionMetadata.for_requests(block_table, prefix, new)
        qkv = torch.cat([r.qkv[p : p + n] for r, p, n in zip(requests, prefix, new)]).to(device)
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out, topk = layer(qkv, meta, caches, return_topk=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
        row = 0
        for b, n in enumerate(new):
            outputs[b].append(out[row : row + n].cpu())
            if topk is not None:
                topks[b].append(topk[:, row : row + n].cpu())
            row += n
        return seconds

    prefill_steps = max(-(-p // chunk) for p in prompt_lens)
    bar = tqdm(total=prefill_steps + decode_steps, desc=f"{'sparse' if config.sparse else 'dense'} "
               f"{config.scale_mode.value}", disable=not progress, leave=False)
    done = [0] * len(requests)
    for _ in range(prefill_steps):
        new = [min(chunk, p - d) for p, d in zip(prompt_lens, done)]
        result.prefill_seconds += step(list(done), new)
        done = [d + n for d, n in zip(done, new)]
        bar.update()
    for _ in range(decode_steps):
        result.decode_seconds.append(step(list(done), [1] * len(requests)))
        done = [d + 1 for d in done]
        bar.update()
    bar.close()
    result.outputs = [torch.cat(o) for o in outputs]
    result.topk = [torch.cat(t, dim=1) if t else None for t in topks]
    return result


def rel_l2(ours: torch.Tensor, reference: torch.Tensor) -> float:
    return float((ours.double() - reference).norm() / reference.norm().clamp_min(1e-30))


def topk_hits(ours: torch.Tensor, oracle: torch.Tensor) -> tuple[int, int]:
    """(kept, wanted): the oracle's selected blocks that we selected too, over rows and heads."""
    hits = total = 0
    for mine, theirs in zip(ours.reshape(-1, ours.shape[-1]).tolist(), oracle.reshape(-1, oracle.shape[-1]).tolist()):
        wanted = {b for b in theirs if b >= 0}
        hits += len(wanted & set(mine))
        total += len(wanted)
    return hits, total


def topk_agreement(ours: torch.Tensor, oracle: torch.Tensor) -> float:
    """Fraction of the oracle's selected blocks that we selected too (over rows and heads)."""
    hits, total = topk_hits(ours, oracle)
    return hits / max(total, 1)


def needles_found(topk: torch.Tensor, request, prompt_len: int) -> tuple[int, int]:
    """(found, asked): decode rows x needles whose block is among the selected blocks of every head."""
    found = asked = 0
    for needle in request.needles:
        block = needle // PAGE_SIZE
        rows = topk[:, prompt_len:]  # [nkv, decode rows, topk]
        found += int((rows == block).any(-1).all(0).sum())
        asked += rows.shape[1]
    return found, asked


def capacity_table() -> list[str]:
    """Bytes per token for each cache dtype; the whole-model column adds the index-K of the sparse layers (bf16 /
    fp8: the dtype's own; mxfp4: one row per index-K dtype, the default one marked)."""
    gib = 1 << 30
    bf16_model = LAYERS * kv_bytes_per_token("bf16") + (LAYERS - DENSE_LAYERS) * kv_bytes_per_token("bf16") // 2
    lines = ["| KV cache | K+V bytes/token/layer/KV head | tokens per GiB (1 layer, 1 KV head) | x bf16 | "
             "bytes/token, whole model per TP4 rank | x bf16, whole model |", "|---|---:|---:|---:|---:|---:|"]
    rows = [("bf16", "bf16", None), ("fp8", "fp8", None)]
    rows += [(f"mxfp4 + {d.value} index-K" + (" (default)" if d.value == DEFAULT_INDEX_K_DTYPE else ""), "mxfp4", d)
             for d in (IndexKDtype.FP8, IndexKDtype.MXFP4)]
    for label, dtype, index_dtype in rows:
        per = kv_bytes_per_token(dtype)
        index = per // 2 if index_dtype is None else index_dtype.bytes_per_token  # one head of the index-K
        model = LAYERS * per + (LAYERS - DENSE_LAYERS) * index  # K+V of every layer + index-K of sparse ones
        lines.append(f"| {label} | {per} | {tokens_that_fit(gib, dtype):,} | "
                     f"{kv_bytes_per_token('bf16') / per:.2f} | {model:,} | {bf16_model / model:.2f} |")
    return lines


def evaluate(config: LayerConfig, weights, requests, prompt_lens, decode_steps, chunk, device, backend,
             oracle_outputs) -> dict:
    layer = SparseMXFP4Attention(config, weights, backend=backend)
    run = run_requests(layer, requests, prompt_lens, decode_steps, chunk, device)
    ours_prefill, ref_prefill, ours_decode, ref_decode = [], [], [], []
    hits = wanted = found = asked = 0
    for b, request in enumerate(requests):
        ref, p = oracle_outputs[b], prompt_lens[b]
        ours_prefill.append(run.outputs[b][:p])
        ref_prefill.append(ref.out[:p])
        ours_decode.append(run.outputs[b][p:])
        ref_decode.append(ref.out[p:])
        if config.sparse:
            h, w = topk_hits(run.topk[b], ref.selected)
            f, a = needles_found(run.topk[b], request, p)
            hits, wanted, found, asked = hits + h, wanted + w, found + f, asked + a
    decode = sorted(run.decode_seconds)
    return {
        "prefill_rel_l2": rel_l2(torch.cat(ours_prefill), torch.cat(ref_prefill)),
        "decode_rel_l2": rel_l2(torch.cat(ours_decode), torch.cat(ref_decode)),
        "topk_agreement": hits / max(wanted, 1) if config.sparse else None,
        "needles": (found, asked) if config.sparse else None,
        "prefill_s": run.prefill_seconds, "decode_step_ms": 1e3 * decode[len(decode) // 2],
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="atom-mxfp4 demo", description=__doc__, formatter_class=HelpFormatter)
    add_arguments(parser)
    command(parser, run, check)
    return run_command(parser, argv)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--contexts", metavar="N,N,...", type=argtypes.positive_ints, default="2300,1100,700,130",
                        help="prompt length of each request in tokens, comma separated (default: %(default)s)")
    parser.add_argument("--decode-steps", metavar="STEPS", type=argtypes.positive_int, default=8,
                        help="decode steps (one token per request each) after the prefill (default: %(default)s)")
    parser.add_argument("--chunk", metavar="TOKENS", type=argtypes.positive_int, default=1024,
                        help="prefill chunk in tokens per request and step (default: %(default)s)")
    parser.add_argument("--topk", metavar="BLOCKS", type=argtypes.positive_int, default=16,
                        help=f"top-k blocks of {PAGE_SIZE} tokens each (default: %(default)s)")
    parser.add_argument("--scale-modes", metavar="MODE,...", type=argtypes.scale_modes, default="mse,ceil,floor",
                        help=f"ScaleModes to compare, comma separated, of {[m.value for m in ScaleMode]}; the first "
                        "also runs the dense layer (default: %(default)s)")
    parser.add_argument("--device", type=argtypes.device, default=None,
                        help="cpu | cuda | cuda:N (default: cuda when available, else cpu)")
    add_backend_option(parser)
    parser.add_argument("--seed", metavar="SEED", type=argtypes.seed, default=0,
                        help="seed of the weights and requests (default: %(default)s)")


def check(args) -> None:
    check_backend(args)


def run(args) -> int:
    device = resolved_device(args)
    prompt_lens = args.contexts
    modes = [ScaleMode.parse(m) for m in args.scale_modes]
    sparse_config = LayerConfig(topk=args.topk, max_position=max(prompt_lens) + args.decode_steps + 1)
    dense_config = LayerConfig(sparse=False, max_position=sparse_config.max_position)
    torch.manual_seed(args.seed)
    weights = make_weights(sparse_config, args.seed)
    requests = []
    for b, p in enumerate(prompt_lens):
        needle = (p * (b + 1)) // (len(prompt_lens) + 2)  # a needle at a different depth in each request
        requests.append(make_request(sparse_config, p + args.decode_steps, [needle], seek_from=p, seed=args.seed + b))
    # dense layers have no indexer: the same tokens without the idx_q / idx_k heads
    dense_requests = [type(r)(r.qkv[:, : dense_config.qkv_width], r.needles, r.seek_from) for r in requests]

    print(f"atom-mxfp4 demo on {device}: MiniMax-M3 TP4 rank (16 q heads, 1 KV head, head_dim 128), "
          f"{len(prompt_lens)} requests {prompt_lens} + {args.decode_steps} decode steps, chunked prefill "
          f"{args.chunk}, top-{args.topk} blocks of {PAGE_SIZE}")
    print("\n".join(capacity_table()))

    oracle_sparse = [attention_oracle(r.qkv, weights, sparse_config)
                     for r in tqdm(requests, desc="oracle (sparse, fp64)", leave=False)]
    oracle_dense = [attention_oracle(r.qkv, weights, dense_config)
                    for r in tqdm(dense_requests, desc="oracle (dense, fp64)", leave=False)]
    # warm-up (lazy initialisation, kernel compilation) so that the first timed configuration is not penalised
    run_requests(SparseMXFP4Attention(sparse_config, weights, backend=args.backend), requests[-1:],
                 [min(prompt_lens[-1], 64)], 1, args.chunk, device, progress=False)
    rows = []
    for mode in modes:
        config = LayerConfig(topk=args.topk, max_position=sparse_config.max_position, scale_mode=mode)
        rows.append(("sparse", mode, evaluate(config, weights, requests, prompt_lens, args.decode_steps, args.chunk,
                                              device, args.backend, oracle_sparse)))
    dense = LayerConfig(sparse=False, max_position=sparse_config.max_position, scale_mode=modes[0])
    rows.append(("dense", modes[0], evaluate(dense, weights, dense_requests, prompt_lens, args.decode_steps,
                                             args.chunk, device, args.backend, oracle_dense)))
    print("\n| layer | ScaleMode | rel-L2 prefill | rel-L2 decode | top-k agreement | needles found | "
          "prefill s | decode ms/step |\n|---|---|---:|---:|---:|---:|---:|---:|")
    for kind, mode, r in rows:
        agree = "-" if r["topk_agreement"] is None else f"{100 * r['topk_agreement']:.1f}%"
        needles = "-" if r["needles"] is None else f"{r['needles'][0]}/{r['needles'][1]}"
        print(f"| {kind} | {mode.value} | {r['prefill_rel_l2']:.4f} | {r['decode_rel_l2']:.4f} | {agree} | "
              f"{needles} | {r['prefill_s']:.2f} | {r['decode_step_ms']:.1f} |")
    print(f"\nrel-L2: all rows of all requests, layer output (MXFP4 K/V, selection on the "
          f"{LayerConfig().index_k_dtype.value} index-K) vs the fp64 "
          "oracle (unquantized K/V, exact top-k); top-k agreement: share of the oracle's selected blocks we kept; "
          "needles: decode rows whose selection holds the needle's block on every KV head.")
    return 0
