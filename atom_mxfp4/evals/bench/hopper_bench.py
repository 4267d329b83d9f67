"""H200 benchmark of the Hopper (Gluon) pa_decode next to the Triton backend's, dense rows x context (issue 14).

Usage (repo root, atom_mxfp4 importable, an sm_90 GPU):
``python3 atom_mxfp4/evals/bench/hopper_bench.py --out DIR [--quick]``.
Writes DIR/hopper_bench.md and DIR/hopper_bench.json. Never asserts a time. ``--overlap``: also the in-warp page
overlap (HopperConfig.overlap) on the same plans, its speed over the default's in the same run, sequential and
alternating, and whether its bits equal the default's (issue 42 item 3: kept only if faster).

Per shape (16 q heads / 1 KV head, every row its own pages, context = the whole table): both kernels run on the same
inputs first and their outputs are compared (relative L2 difference; an error is reported in the table, not
hidden); then each is captured in a CUDA graph over several input sets (``_timing.sets_for``: enough distinct records
to pass ~8x the L2 on small shapes) and replayed. TB/s = the bytes the kernel must move (rows x context x 136 B of K +
V records) / time, next to the device-to-device copy bandwidth measured in the same run (``_timing.copy_bandwidth_tbs``,
before and after the kernels).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
import traceback
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from _timing import copy_bandwidth_tbs, graph_time_ms, sets_for  # noqa: E402
from run_bench import DEV, MX_TOKEN, random_records, table  # noqa: E402

import atom_mxfp4.kernels.hopper as hopper  # noqa: E402
hopper_pa = importlib.import_module("atom_mxfp4.kernels.hopper.pa_decode")  # the module (the package exports the op)
import atom_mxfp4.kernels.triton as tb  # noqa: E402
from atom_mxfp4.layout import PAGE_SIZE  # noqa: E402

SHAPES = [(512, 8192), (4096, 2048), (64, 32768), (8, 131072), (1, 8192)]  # (rows, context): issue 14
GROUP = 16
SOFTMAX_SCALE = 128 ** -0.5
SET_BUDGET = 4 * 2**30  # bytes of records per shape across the rotated input sets
OVERLAP_AB_ROUNDS = 3  # --overlap: alternating (default, overlap) timings per shape after the table's own


def make_inputs(rows: int, width: int, context: int, num_sets: int):
    """(q, context_lens, sets): bf16 q, every row ``context`` tokens long, and ``num_sets`` input sets (K records, V
    records, tables: every row its own ``width`` pages, in random order) to rotate through memory."""
    q = torch.randn(rows, GROUP, 128, device=DEV).bfloat16()
    lens = torch.full((rows,), context, dtype=torch.int32, device=DEV)
    sets = [(random_records(rows * width), random_records(rows * width),
             torch.randperm(rows * width, device=DEV).int().view(rows, width).contiguous()) for _ in range(num_sets)]
    return q, lens, sets


def parse_variant(text: str) -> dict:
    """``--variant`` text -> HopperConfig overrides: ``warps=8,maxnreg=128`` -> {"warps": 8, "maxnreg": 128}; values
    are ints, ``none`` / ``true`` / ``false``; an unknown field or value is refused naming it."""
    fields = {f.name for f in hopper_pa.HopperConfig.__dataclass_fields__.values()}
    words = {"none": None, "true": True, "false": False}
    overrides = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or key not in fields:
            raise ValueError(f"--variant: expected FIELD=VALUE with FIELD one of {sorted(fields)}, got {item!r}")
        if value.lower() in words:
            overrides[key] = words[value.lower()]
        elif value.lstrip("-").isdigit():
            overrides[key] = int(value)
        else:
            raise ValueError(f"--variant {key}: expected an int, none, true or false, got {value!r}")
    replace(hopper_pa.DEFAULT_CONFIG, **overrides)  # HopperConfig's own checks (e.g. warps in 4 / 8)
    return overrides


def _variant_arg(text: str) -> dict:
    try:
        return parse_variant(text)
    except ValueError as error:  # argparse shows an ArgumentTypeError's own message
        raise argparse.ArgumentTypeError(str(error)) from error


def variant_name(overrides: dict) -> str:
    """The kernel's name in the results: hopper_v_warps8_maxnreg128."""
    return "hopper_v_" + "_".join(f"{k}{v}" for k, v in overrides.items())


def bench_shape(rows: int, context: int, reps: int, log, stages=(), warps=(), variants=(), overlap=False) -> dict:
    width = context // PAGE_SIZE
    per_call = rows * context * 2 * MX_TOKEN
    n = sets_for(per_call, budget=SET_BUDGET)
    q, lens, sets = make_inputs(rows, width, context, n)
    kernels = {"triton": (tb, tb.make_plan(rows, width, GROUP, DEV)),
               "hopper": (hopper, hopper.make_plan(rows, width, GROUP, DEV))}
    # the same plan with the exact decode only (the one-multiply pass's fallback, docs/hopper.md), and with other
    # ring depths: neither changes an output bit
    kernels["hopper_exact"] = (hopper, hopper_pa.with_config(kernels["hopper"][1], replace(
        hopper_pa.DEFAULT_CONFIG, fast_decode=False)))
    for depth in stages:
        kernels[f"hopper_s{depth}"] = (hopper, hopper_pa.with_config(kernels["hopper"][1], replace(
            hopper_pa.DEFAULT_CONFIG, stages=depth)))
    if overlap:  # the in-warp page overlap (HopperConfig.overlap) on the same plan: the same split, the same bits
        kernels["hopper_overlap"] = (hopper, hopper_pa.with_config(kernels["hopper"][1], replace(
            hopper_pa.DEFAULT_CONFIG, overlap=True)))
    for count in warps:  # a forced program warp count (HopperConfig.warps; the policy picks per launch)
        kernels[f"hopper_w{count}"] = (hopper, hopper_pa.with_config(kernels["hopper"][1], replace(
            hopper_pa.DEFAULT_CONFIG, warps=count)))
    for overrides in variants:  # any HopperConfig (--variant), on a plan made with it: its split policy and its
        # workspace (the split tail's partials); warps / stages / maxnreg variants split as the default does
        kernels[variant_name(overrides)] = (hopper, hopper.make_plan(
            rows, width, GROUP, DEV, config=replace(hopper_pa.DEFAULT_CONFIG, **overrides)))
    outs = {name: torch.empty(rows, GROUP, 128, dtype=torch.bfloat16, device=DEV) for name in kernels}

    def call(name, s):
        backend, plan = kernels[name]
        return lambda: backend.pa_decode(outs[name], q, s[0], s[1], s[2], lens, softmax_scale=SOFTMAX_SCALE,
                                         query_scale=None, plan=plan)

    rec = dict(rows=rows, context=context, sets=n, MB=per_call / 1e6)
    for name in kernels:
        rec[f"{name}_splits"] = kernels[name][1].splits_for(rows, width)[0]  # what this launch runs with
        try:
            call(name, sets[0])()
            torch.cuda.synchronize()
        except Exception as error:  # reported in the table, never hidden
            rec[f"{name}_error"] = f"{type(error).__name__}: {str(error)[:200]}"
            log(f"{name} rows={rows} ctx={context}: FAILED {rec[f'{name}_error']}")
            traceback.print_exc()
    if "hopper_error" not in rec and "triton_error" not in rec:
        a, b = outs["hopper"].float(), outs["triton"].float()
        rec["rel_diff"] = float((a - b).norm() / b.norm())
        rec["hopper_finite"] = bool(torch.isfinite(a).all())
        # another ring depth or the exact-only decode: the same bits; another warp count splits the softmax over the
        # warps otherwise, so its difference to the Triton kernel is recorded too
        for name in kernels:
            if name.startswith("hopper_") and f"{name}_error" not in rec:
                rec[f"{name}_equal"] = bool(torch.equal(outs[name], outs["hopper"]))
                rec[f"{name}_rel_diff"] = float((outs[name].float() - b).norm() / b.norm())
    for name in kernels:
        if f"{name}_error" in rec:
            continue
        ms = graph_time_ms([call(name, s) for s in sets], reps=reps)
        rec[f"{name}_us"] = ms * 1e3
        rec[f"{name}_TBs"] = per_call / (ms * 1e-3) / 1e12
    if "hopper_us" in rec and "hopper_overlap_us" in rec:  # > 1: the overlap faster than the default, same run
        rec["overlap_speedup"] = rec["hopper_us"] / rec["hopper_overlap_us"]
        # and timed alternately (default, overlap) OVERLAP_AB_ROUNDS more times: a drift of the clocks over the run
        # cannot favour the one timed later (the run-to-run spread is 2-3%, the effect looked for 5-10%)
        ratios = []
        for _ in range(OVERLAP_AB_ROUNDS):
            default_ms = graph_time_ms([call("hopper", s) for s in sets], reps=reps)
            ratios.append(default_ms / graph_time_ms([call("hopper_overlap", s) for s in sets], reps=reps))
        rec["overlap_ab_ratios"] = ratios
        rec["overlap_speedup_ab"] = sorted(ratios)[len(ratios) // 2]
    log(f"rows={rows} ctx={context} sets={n}: " + ", ".join(
        f"{name} {rec.get(f'{name}_us', float('nan')):.1f} us {rec.get(f'{name}_TBs', float('nan')):.3f} TB/s "
        f"(splits {rec[f'{name}_splits']})" for name in kernels)
        + f", rel diff {rec.get('rel_diff', float('nan')):.2e}"
        + (f", overlap / default speed {rec['overlap_speedup']:.3f}x, alternating "
           + " ".join(f"{x:.3f}" for x in rec["overlap_ab_ratios"]) + f" (median {rec['overlap_speedup_ab']:.3f}x), "
           f"same bits: {rec.get('hopper_overlap_equal')}" if "overlap_speedup" in rec else ""))
    del sets
    torch.cuda.empty_cache()
    return rec


SWEEP_SHAPES = ([(r, 16, 1998) for r in (1, 4, 16, 32, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 2048)]
                + [(r, 64, 8192) for r in (16, 64, 128, 256, 512)] + [(r, 256, 32768) for r in (4, 16, 64)]
                + [(8, 1024, 131072), (1, 1024, 131072)])  # (rows, table pages, context): docs/hopper.md "Split policy"
SWEEP_SPLITS = (1, 2, 3, 4, 6, 8, 12, 16, 32, 64)


def split_sweep(out: Path, reps: int, shapes=SWEEP_SHAPES, one_page: bool = False, warps=(),
                clusters: bool = False) -> None:
    """Every forced split count per shape (``make_plan(num_splits=s)``), the policy's own pick and the Triton kernel,
    same run: the data ``num_splits_for`` is fitted to. ``warps``: each split count also at these forced program warp
    counts (keys ``"<splits>w<warps>"``; the plain keys run the policy's warp count). ``clusters``: each split count
    a cluster can take also with the split merge forced over a cluster and forced through L2 (keys ``"<splits>c1"`` /
    ``"<splits>c0"``: ``HopperConfig.cluster``; cluster_ab.png), and at each of ``warps`` (``"<splits>w<warps>c1"``).
    Writes out/split_sweep.json, and
    out/launch_floor.json: a trivial kernel timed the same way (us per call), the floor under the small shapes'
    times."""
    x = torch.zeros(16, device=DEV)
    floor = {"launch_floor_us": round(1e3 * graph_time_ms([lambda: x.add_(1)] * 32, reps=reps), 2)}
    print(json.dumps(floor), flush=True)
    (out / "launch_floor.json").write_text(json.dumps(floor))
    records = []
    for rows, width, context in shapes:
        q, lens, sets = make_inputs(rows, width, context, sets_for(rows * context * 2 * MX_TOKEN, budget=2 * 2**30))
        out_buf = torch.empty(rows, GROUP, 128, dtype=torch.bfloat16, device=DEV)

        def timed(backend, plan, sets=sets):
            return round(1e3 * graph_time_ms([
                (lambda s=s: backend.pa_decode(out_buf, q, s[0], s[1], s[2], lens, softmax_scale=SOFTMAX_SCALE,
                                               query_scale=None, plan=plan)) for s in sets], reps=reps), 2)

        rec = {"rows": rows, "pages": width, "ctx": context}
        policy = hopper.make_plan(rows, width, GROUP, DEV)
        rec["policy"], rec["policy_splits"] = timed(hopper, policy), policy.splits_for(rows, width)[0]
        for splits in SWEEP_SPLITS:
            if splits == 1 or splits <= width // (1 if one_page else hopper_pa.MIN_PAGES_PER_SPLIT):
                plan = hopper.make_plan(rows, width, GROUP, DEV, num_splits=splits)
                rec[str(splits)] = timed(hopper, plan)
                for count in warps:
                    rec[f"{splits}w{count}"] = timed(hopper, hopper_pa.with_config(plan, replace(
                        hopper_pa.DEFAULT_CONFIG, warps=count)))
                if clusters and hopper_pa.cluster_for(replace(hopper_pa.DEFAULT_CONFIG, cluster=True), rows,
                                                      plan.num_splits, DEV) > 1:
                    for count in (None, *warps):
                        for on in (True, False):
                            rec[f"{splits}{'' if count is None else f'w{count}'}c{int(on)}"] = timed(
                                hopper, hopper_pa.with_config(plan, replace(hopper_pa.DEFAULT_CONFIG, warps=count,
                                                                            cluster=on)))
        rec["triton"] = timed(tb, tb.make_plan(rows, width, GROUP, DEV))
        rec["best"] = min((k for k in rec if k.isdigit()), key=lambda k: rec[k])
        if warps:
            rec["best_any_warps"] = min((k for k in rec if k[:1].isdigit()), key=lambda k: rec[k])
        print(json.dumps(rec), flush=True)
        records.append(rec)
        del sets, timed
        torch.cuda.empty_cache()
    (out / "split_sweep.json").write_text(json.dumps(records, indent=1))
    if warps:
        plot_warps(records, out)
    if clusters:
        plot_clusters(records, out)


def _ratio_plot(records: list, out: Path, name: str, series, xlabel: str, ylabel: str, title: str) -> None:
    """out/name: one line per shape of ``series(rec)`` = (x values, time ratios), against a ratio of 1 (same run)."""
    try:
        import matplotlib
    except ImportError:
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4))
    for rec in records:
        xs, ratios = series(rec)
        ax.plot(xs, ratios, marker="o", label=f"{rec['rows']} x {rec['pages']} pages")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(out / name, dpi=120)
    plt.close(fig)


def plot_clusters(records: list, out: Path) -> None:
    """cluster_ab.png: per shape and split count, the time with the split merge over a cluster over the time with the
    row's last split merging from L2 (same run); below 1: the cluster faster."""
    def series(rec):
        splits = sorted(int(k[:-2]) for k in rec if k[:-2].isdigit() and k.endswith("c1") and f"{k[:-2]}c0" in rec)
        return splits, [rec[f"{s}c1"] / rec[f"{s}c0"] for s in splits]

    _ratio_plot(records, out, "cluster_ab.png", series, "splits = CTAs per cluster", "time, cluster merge / L2 merge",
                "Hopper pa_decode: split merge over a cluster vs through L2, same run (CUDA-graph replay)")


def plot_warps(records: list, out: Path) -> None:
    """warps_ab.png: per shape and split count, the time at 8 warps over the time at 4 (same run); below 1: 8 faster."""
    def series(rec):
        splits = sorted(int(k[:-2]) for k in rec if k.endswith("w4") and f"{k[:-2]}w8" in rec)
        pages = [-(-rec["pages"] // s) for s in splits]  # pages per split (split_pages rounds up)
        return pages, [rec[f"{s}w8"] / rec[f"{s}w4"] for s in splits]

    _ratio_plot(records, out, "warps_ab.png", series, "pages per split (program)", "time at 8 warps / time at 4 warps",
                "Hopper pa_decode: 8 vs 4 warps per program, same run (CUDA-graph replay)")


def profile(shapes) -> None:
    """One launch of each kernel per shape, for Nsight Compute."""
    for rows, context in shapes:
        width = context // PAGE_SIZE
        q, lens, [(k, v, tables)] = make_inputs(rows, width, context, 1)
        out = torch.empty(rows, GROUP, 128, dtype=torch.bfloat16, device=DEV)
        for backend in (tb, hopper):
            plan = backend.make_plan(rows, width, GROUP, DEV)
            backend.pa_decode(out, q, k, v, tables, lens, softmax_scale=SOFTMAX_SCALE, query_scale=None, plan=plan)
            torch.cuda.synchronize()
            print(f"profiled {backend.NAME} rows={rows} context={context} splits={plan.splits_for(rows, width)}",
                  flush=True)


ATTEND_SHAPES = [(1, 64), (8, 64), (64, 64), (256, 64), (1, 16), (64, 16)]  # (tokens, block-table pages)


def attend_bench(out: Path, reps: int) -> None:
    """A dense layer's attention step, decode batches (one token per request at the end of a 128 x pages context,
    16 q heads / 1 KV head): the composition (``ops.dense_tables``, torch ops, then the Hopper pa_decode: the layer's
    path before the fused attend) against the Hopper ``attend`` (one launch reading the block table), same inputs
    and plan, CUDA-graph replay; outputs compared bit for bit. Writes attend_bench.json / attend_bench.md."""
    from atom_mxfp4 import ops

    rows_out = []
    for tokens, pages in ATTEND_SHAPES:
        context = pages * PAGE_SIZE
        n = sets_for(tokens * context * 2 * MX_TOKEN, budget=SET_BUDGET)
        q, lens, sets = make_inputs(tokens, pages, context, n)  # each set's table: the block table, a row per token
        request = torch.arange(tokens, dtype=torch.int32, device=DEV)
        position = lens - 1
        plan = hopper.make_plan(tokens, pages, GROUP, DEV)
        outs = [torch.empty_like(q) for _ in range(2)]

        def composition(s):
            def call():
                tables, lens = ops.dense_tables(s[2], request, position, num_kv_heads=1)
                hopper.pa_decode(outs[0], q, s[0], s[1], tables, lens, softmax_scale=SOFTMAX_SCALE, query_scale=None,
                                 plan=plan)
            return call

        def fused(s):
            return lambda: hopper.attend(outs[1], q, s[0], s[1], s[2], request, position, num_kv_heads=1,
                                         topk_blocks=None, pages_per_block=1, softmax_scale=SOFTMAX_SCALE,
                                         query_scale=None, plan=plan)

        composition(sets[0])()
        fused(sets[0])()
        torch.cuda.synchronize()
        rec = dict(tokens=tokens, context=context, sets=n, same_bits=bool(torch.equal(outs[0], outs[1])),
                   splits=plan.splits_for(tokens, pages)[0])
        rec["composition_us"] = graph_time_ms([composition(s) for s in sets], reps=reps) * 1e3
        rec["fused_us"] = graph_time_ms([fused(s) for s in sets], reps=reps) * 1e3
        print(f"dense attend T={tokens} ctx={context}: {rec}", flush=True)
        rows_out.append(rec)
        del sets
        torch.cuda.empty_cache()
    (out / "attend_bench.json").write_text(json.dumps(rows_out, indent=1))
    (out / "attend_bench.md").write_text(
        "# Dense layer attention step: dense_tables + Hopper pa_decode vs the fused Hopper attend\n\n"
        f"`python3 {' '.join(sys.argv)}`, {torch.cuda.get_device_name()}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; CUDA-graph replay, median of {reps}.\n\n"
        + table(rows_out, [("tokens", lambda r: str(r["tokens"])), ("context", lambda r: str(r["context"])),
                           ("splits", lambda r: str(r["splits"])),
                           ("tables + pa_decode us", lambda r: f"{r['composition_us']:.1f}"),
                           ("fused attend us", lambda r: f"{r['fused_us']:.1f}"),
                           ("speed-up", lambda r: f"{r['composition_us'] / r['fused_us']:.2f}x"),
                           ("same bits", lambda r: "yes" if r["same_bits"] else "NO")]))


def report(results: dict) -> str:
    copy = results["copy_TBs"]

    def tbs(name):
        return lambda r: f"{r[name + '_TBs']:.3f} ({100 * r[name + '_TBs'] / copy:.0f}%)" if name + "_TBs" in r \
            else r.get(name + "_error", "-")

    def us(name):
        return lambda r: f"{r[name + '_us']:.1f}" if name + "_us" in r else "-"

    cols = [("rows", lambda r: str(r["rows"])), ("context", lambda r: str(r["context"])),
            ("MB moved", lambda r: f"{r['MB']:.1f}"),
            ("floor at copy (us)", lambda r: f"{r['MB'] / copy:.1f}"),
            ("triton us", us("triton")), ("triton TB/s (% copy)", tbs("triton")),
            ("hopper us", us("hopper")), ("hopper TB/s (% copy)", tbs("hopper")),
            ("hopper / triton speed", lambda r: f"{r['triton_us'] / r['hopper_us']:.2f}x"
             if "hopper_us" in r and "triton_us" in r else "-"),
            ("hopper exact-decode-only TB/s (% copy)", tbs("hopper_exact")),
            ("one-multiply / exact-only speed", lambda r: f"{r['hopper_exact_us'] / r['hopper_us']:.2f}x"
             if "hopper_us" in r and "hopper_exact_us" in r else "-"),
            ("same bits", lambda r: "yes" if all(r.get(f"{n}_equal") for n in ["hopper_exact"] + [
                f"hopper_s{d}" for d in results.get("stages", [])] + (["hopper_overlap"] if results.get("overlap")
                                                                      else [])) else "NO"),
            ("splits (triton / hopper)", lambda r: f"{r['triton_splits']} / {r['hopper_splits']}"),
            ("rel diff vs triton", lambda r: f"{r['rel_diff']:.1e}" if "rel_diff" in r else "-")]
    for depth in results.get("stages", []):
        cols.append((f"hopper {depth} stages TB/s (% copy)", tbs(f"hopper_s{depth}")))
    if results.get("overlap"):
        cols.append(("hopper overlap TB/s (% copy)", tbs("hopper_overlap")))
        cols.append(("overlap / default speed", lambda r: f"{r['overlap_speedup']:.3f}x" if "overlap_speedup" in r
                     else "-"))
        cols.append((f"overlap / default, alternating (median of {OVERLAP_AB_ROUNDS})",
                     lambda r: f"{r['overlap_speedup_ab']:.3f}x" if "overlap_speedup_ab" in r else "-"))
    for overrides in results.get("variants", []):
        name = variant_name(overrides)
        label = ", ".join(f"{k}={v}" for k, v in overrides.items())
        cols.append((f"hopper ({label}) TB/s (% copy)", tbs(name)))
        cols.append((f"hopper ({label}) same bits", lambda r, n=name: "-" if f"{n}_equal" not in r else
                     ("yes" if r[f"{n}_equal"] else f"no ({r[f'{n}_rel_diff']:.1e} vs triton)")))
    for count in results.get("warps", []):
        cols.append((f"hopper {count} warps us", us(f"hopper_w{count}")))
        cols.append((f"hopper {count} warps rel diff", lambda r, n=f"hopper_w{count}_rel_diff": f"{r[n]:.1e}"
                     if n in r else "-"))
    head = (f"# Hopper (Gluon) pa_decode vs Triton, {results['device']}, {results['date']}\n\n"
            f"`{results['command']}`; torch {results['torch']}, triton {results['triton']}. "
            f"Copy bandwidth in this run: "
            f"{copy:.2f} TB/s (before {results['copy_start']['best']:.2f}, after {results['copy_end']['best']:.2f}). "
            f"TB/s = rows x context x {2 * MX_TOKEN} B / time (CUDA-graph replay, median of {results['reps']}; "
            f"16 q heads, 1 KV head, bf16 q).\n\n")
    return head + table(results["shapes"], cols)


def plot(results: dict, out: Path) -> None:
    """hopper_bench.png: TB/s of both kernels per shape next to the same run's copy bandwidth and 80% of it."""
    try:
        import matplotlib
    except ImportError:
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows, copy = results["shapes"], results["copy_TBs"]
    x = range(len(rows))
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.bar([i - 0.2 for i in x], [r["triton_TBs"] for r in rows], 0.4, label="Triton (PTX decode)")
    ax.bar([i + 0.2 for i in x], [r["hopper_TBs"] for r in rows], 0.4, label="Hopper (Gluon)")
    ax.axhline(copy, color="k", ls="--", label=f"copy {copy:.2f} TB/s (same run)")
    ax.axhline(0.8 * copy, color="gray", ls=":", label="80% of copy (issue 14 target)")
    ax.set_xticks(list(x))
    ax.set_xticklabels([f"{r['rows']} x {r['context']}" for r in rows], fontsize=8)
    ax.set(xlabel="rows x context", ylabel="nominal TB/s (136 B/token)", title=f"pa_decode, {results['date']}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "hopper_bench.png", dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="folder for hopper_bench.md / hopper_bench.json")
    parser.add_argument("--quick", action="store_true", help="fewer replays per measurement (10 instead of 30)")
    parser.add_argument("--profile", metavar="RxC,...",
                        help="for a profiler (ncu -k regex:_pa_decode_kernel): run each kernel once per shape "
                             "ROWSxCONTEXT, no timing, no files")
    parser.add_argument("--split-sweep", action="store_true",
                        help="instead of the table: time every forced split count per shape (split_sweep.json)")
    parser.add_argument("--sweep-shapes", metavar="RxPxC,...",
                        help="--split-sweep over these (rows x table pages x context) instead of the policy's shapes")
    parser.add_argument("--one-page-splits", action="store_true",
                        help="--split-sweep also tries splits of one page (the policy keeps >= MIN_PAGES_PER_SPLIT)")
    parser.add_argument("--clusters", action="store_true",
                        help="--split-sweep also times each split count with the merge over a cluster forced on / off")
    parser.add_argument("--attend", action="store_true",
                        help="instead of the table: a dense layer's step, dense_tables + pa_decode vs the fused attend")
    parser.add_argument("--warps", type=int, nargs="*", default=[],
                        help="also time the Hopper kernel at these forced program warp counts (HopperConfig.warps: "
                             "4, 8); with --split-sweep, every split count at each")
    parser.add_argument("--variant", type=_variant_arg, action="append", default=[], metavar="FIELD=VALUE,...",
                        help="also time the Hopper kernel under these HopperConfig overrides (repeatable), e.g. "
                             "warps=8,maxnreg=128, tail_splits=0 (a plan made with it: its split and workspace)")
    parser.add_argument("--shapes", metavar="RxC,...",
                        help="the table over these (rows x context tokens) instead of issue 14's rows, e.g. "
                             "512x2048 (the sparse decode's 16 pages at batch 512),450x8192")
    parser.add_argument("--stages", type=int, nargs="*", default=[],
                        help="also time the Hopper kernel with these ring depths (HopperConfig.stages)")
    parser.add_argument("--overlap", action="store_true",
                        help="also time the Hopper kernel with the in-warp page overlap (HopperConfig.overlap) on the "
                             "same plan: its TB/s, its speed over the default's (same run) and whether its bits equal")
    args = parser.parse_args()
    import triton

    if args.profile:
        profile([tuple(int(x) for x in shape.split("x")) for shape in args.profile.split(",")])
        return

    if args.out is None:
        parser.error("--out is required (except with --profile)")
    args.out.mkdir(parents=True, exist_ok=True)
    reps = 10 if args.quick else 30
    if args.attend:
        attend_bench(args.out, reps)
        return
    if args.split_sweep:
        shapes = ([tuple(int(x) for x in shape.split("x")) for shape in args.sweep_shapes.split(",")]
                  if args.sweep_shapes else SWEEP_SHAPES)
        split_sweep(args.out, 15, shapes, args.one_page_splits, args.warps, args.clusters)
        return
    results = dict(device=torch.cuda.get_device_name(), date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                   command="python3 " + " ".join(sys.argv), torch=torch.__version__, triton=triton.__version__,
                   reps=reps, stages=args.stages, warps=args.warps, variants=args.variant, overlap=args.overlap,
                   shapes=[])
    results["copy_start"] = copy_bandwidth_tbs()
    print(f"copy bandwidth {results['copy_start']}", flush=True)
    shapes = [tuple(int(x) for x in shape.split("x")) for shape in args.shapes.split(",")] if args.shapes else SHAPES
    for rows, context in shapes:
        results["shapes"].append(bench_shape(rows, context, reps, lambda m: print(m, flush=True), args.stages,
                                             args.warps, args.variant, args.overlap))
    results["copy_end"] = copy_bandwidth_tbs()
    results["copy_TBs"] = max(results["copy_start"]["best"], results["copy_end"]["best"])
    text = report(results)
    (args.out / "hopper_bench.md").write_text(text)
    (args.out / "hopper_bench.json").write_text(json.dumps(results, indent=1))
    plot(results, args.out)
    print(text)


if __name__ == "__main__":
    main()
