"""Host time per call beside GPU time, per op and per layer step (issue 39): what an eager call costs a user.

For each backend (``--backends``, default hopper and triton where the GPU runs them) and decode batch (``--batches``,
default 1 and 64 requests of ``--context`` tokens, MiniMax-M3 TP4 rank geometry):
- **host**: the CPU time to issue one call, eagerly: ``--calls`` calls back to back, one sync after (the median of 5
  such loops divided by the calls); with ``check=False`` and ``check=True`` (the metadata checked by a first call, as
  every layer after the first in a step);
- **gpu**: the call captured once in a CUDA graph and replayed (median replay time; check=False);
- **syncs**: whether a layer step issues without a device sync, under ``torch.cuda.set_sync_debug_mode("error")``.
Ops: the fused write, index_topk, build_sparse_tables, pa_decode (over those tables), attend (sparse and dense) and
the layer's whole step (sparse and dense), called again and again on one metadata: from the third call on a replay of
the traced step (atom_mxfp4.replay), what every layer after the second of a batch costs. ``step_*_ordinary``: the
same step on its ordinary path (``return_topk=True`` takes it): what the first two layers of a batch cost.
``model_sparse_per_layer``: a forward batch as a model runner issues it, per layer: a new ``AttentionMetadata`` (the
same tensors and plans) and ``MODEL_LAYERS`` sparse layers, each with its own caches, the first one checked when
check=True. ``model_refilled_per_layer``: the same on one metadata refilled in place for each batch (its tensors'
versions bumped, as a runner's per-batch-size buffers; the SGLang server's decode batches): with check=False every
layer replays the last batch's trace (atom_mxfp4.replay); ``model_refilled_dense_per_layer`` the same with dense
layers. Never asserts a time.

Writes ``<label>.json``, ``<label>.md`` and ``ledger_rows_<label>.csv`` (one row per number, the ledger's columns:
atom_mxfp4.evals.ledger) into ``--out``; with ``--compare BASE.json`` (the same script run on an earlier commit, in the
same device call) the table and a plot (``host_overhead.png``) put the two side by side. ``--merge RUN.json ...``
makes one report of several runs of one tree (host times the fastest): on a noisy machine, runs of the two trees
alternated, each tree's merged, then compared.
Runs on any commit of the package that has the four ops, ``attend`` and the layer (the baseline runs it unchanged).

Usage (repo root, atom_mxfp4 importable, a CUDA GPU):
``python3 atom_mxfp4/evals/bench/host_overhead.py --out DIR --label new [--compare DIR/base.json] [--commit SHA]``
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from _timing import graph_time_ms  # noqa: E402

from atom_mxfp4 import ops  # noqa: E402
from atom_mxfp4.backends import available_backends  # noqa: E402
from atom_mxfp4.layer import AttentionMetadata, LayerCaches, LayerConfig, SparseMXFP4Attention  # noqa: E402

OPS = ("write", "index_topk", "sparse_tables", "pa_decode", "attend_sparse", "attend_dense", "step_sparse",
       "step_dense", "step_sparse_ordinary", "step_dense_ordinary", "model_sparse_per_layer",
       "model_refilled_per_layer", "model_refilled_dense_per_layer")
MODEL_LAYERS = 8  # model_sparse_per_layer: a forward batch of this many sparse layers, per layer
TARGET_US = {False: 20.0, True: 40.0}  # issue 39: per op, host time per call (check=False / True)
STEP_TARGET_US = 80.0  # a whole sparse layer step


def _fill(records: torch.Tensor, data_bytes: int, fp8: bool) -> None:
    """Random record bytes a decode can read: codes anywhere (fp8: positive finite e4m3), scales near 2**0."""
    data = records[..., :data_bytes]
    data.random_(0, 0x70 if fp8 else 256)
    records[..., data_bytes:].random_(120, 135)


def _case(backend: str, batch: int, context: int, device: torch.device):
    gen = torch.Generator(device=device).manual_seed(batch)
    sparse, dense = LayerConfig(), LayerConfig(sparse=False)
    pages_per = -(-context // 128)
    pages = batch * pages_per + 1
    caches = {True: LayerCaches.allocate(sparse, pages, device), False: LayerCaches.allocate(dense, pages, device)}
    for c in caches.values():
        for cache, fp8 in ((c.k, False), (c.v, False), (c.index_k, True)):
            if cache is not None:
                wide = cache.records.shape[-1] > 8704
                _fill(cache.records, 128 * 128 if wide else 128 * 64, wide)
    block_table = torch.arange(1, pages, dtype=torch.int32, device=device).view(batch, pages_per)
    meta = AttentionMetadata.for_requests(block_table, [context - 1] * batch, [1] * batch)
    weights = {name: torch.randn(128, generator=gen, device=device) * 0.1
               for name in ("q_norm", "k_norm", "idx_q_norm", "idx_k_norm")}
    layers = {True: SparseMXFP4Attention(sparse, weights, backend=backend),
              False: SparseMXFP4Attention(dense, {k: weights[k] for k in ("q_norm", "k_norm")}, backend=backend)}
    qkv = {s: torch.randn(batch, cfg.qkv_width, generator=gen, device=device).to(torch.bfloat16)
           for s, cfg in ((True, sparse), (False, dense))}
    return sparse, caches, meta, weights, layers, qkv


def _calls(backend: str, batch: int, context: int, device: torch.device, setup_backend: str | None = None) -> dict:
    """op name -> (call(check) -> None); every argument made once, outside the timed calls (the top-k ids and tables
    the later ops read by ``setup_backend``: None = ``backend``; "torch" where launches are only recorded)."""
    cfg, caches, meta, w, layers, qkv = _case(backend, batch, context, device)
    made_by = setup_backend or backend
    c = caches[True]
    cos_sin = layers[True].cos_sin_cache(device)
    positions32 = meta.positions.to(torch.int32)
    plan = meta.pa_decode_plan(cfg, device, backend)
    q = torch.randn(batch, cfg.group, 128, device=device).to(torch.bfloat16)
    out = torch.empty_like(q)
    idx_q = torch.randn(batch, 1, 128, device=device).to(torch.bfloat16)
    topk = ops.index_topk(idx_q, c.index_k, meta.block_table, meta.token_request, positions32, topk=cfg.topk,
                          backend=made_by)
    tables, lens = ops.build_sparse_tables(topk, meta.block_table, meta.token_request, positions32, num_kv_heads=1,
                                           backend=made_by)
    scale = cfg.softmax_scale
    model = _model(backend, cfg, caches[True], w, device)

    def batch_of_layers(check):
        step = AttentionMetadata(meta.positions, meta.slot_mapping, meta.token_request, meta.block_table,
                                 plans=meta.plans)
        for i, (layer, layer_caches) in enumerate(model):
            layer(qkv[True], step, layer_caches, check=check and i == 0)

    dense_model = _model(backend, LayerConfig(sparse=False), caches[False],
                         {k: w[k] for k in ("q_norm", "k_norm")}, device)

    def refilled_batch_of_layers(check, sparse=True):
        for tensor in (meta.positions, meta.slot_mapping, meta.token_request, meta.block_table):
            torch.autograd.graph.increment_version(tensor)  # the runner's in-place refill (kernel time not counted)
        for i, (layer, layer_caches) in enumerate(model if sparse else dense_model):
            layer(qkv[sparse], meta, layer_caches, check=check and i == 0)

    return {
        "write": lambda check: ops.fused_qknorm_rope_write(
            qkv[True], meta.positions, w["q_norm"], w["k_norm"], w["idx_q_norm"], w["idx_k_norm"], cos_sin,
            meta.slot_mapping, c.k, c.v, c.index_k, num_q_heads=16, num_kv_heads=1, num_index_heads=1,
            backend=backend, check=check),
        "index_topk": lambda check: ops.index_topk(idx_q, c.index_k, meta.block_table, meta.token_request,
                                                   positions32, topk=cfg.topk, backend=backend, check=check),
        "sparse_tables": lambda check: ops.build_sparse_tables(topk, meta.block_table, meta.token_request,
                                                               positions32, num_kv_heads=1, backend=backend,
                                                               check=check),
        "pa_decode": lambda check: ops.pa_decode(out, q, c.k, c.v, tables, lens, softmax_scale=scale, plan=plan,
                                                 backend=backend, check=check),
        "attend_sparse": lambda check: ops.attend(out, q, c.k, c.v, meta.block_table, meta.token_request,
                                                  positions32, num_kv_heads=1, topk_blocks=topk,
                                                  softmax_scale=scale, plan=plan, backend=backend, check=check),
        "attend_dense": lambda check: ops.attend(out, q, caches[False].k, caches[False].v, meta.block_table,
                                                 meta.token_request, positions32, num_kv_heads=1,
                                                 softmax_scale=scale, plan=plan, backend=backend, check=check),
        "step_sparse": lambda check: layers[True](qkv[True], meta, caches[True], check=check),
        "step_dense": lambda check: layers[False](qkv[False], meta, caches[False], check=check),
        "step_sparse_ordinary": lambda check: layers[True](qkv[True], meta, caches[True], check=check,
                                                           return_topk=True),
        "step_dense_ordinary": lambda check: layers[False](qkv[False], meta, caches[False], check=check,
                                                           return_topk=True),
        "model_sparse_per_layer": batch_of_layers,
        "model_refilled_per_layer": refilled_batch_of_layers,
        "model_refilled_dense_per_layer": lambda check: refilled_batch_of_layers(check, sparse=False),
    }


def _model(backend: str, cfg: LayerConfig, caches: LayerCaches, weights: dict, device: torch.device) -> list:
    """``MODEL_LAYERS`` layers of ``cfg``'s kind of one model: their own caches (copies of ``caches``) and norm
    weights, one RoPE table."""
    tables: dict = {}
    return [(SparseMXFP4Attention(cfg, {k: v.clone() for k, v in weights.items()}, backend=backend, rope_tables=tables),
             LayerCaches(*[None if c is None else type(c)(records=c.records.clone())
                           for c in (caches.k, caches.v, caches.index_k)]))
            for _ in range(MODEL_LAYERS)]


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def host_us(call, calls: int, best: bool = False) -> float:
    """CPU microseconds to issue one call: ``calls`` calls, then one sync; the median of 5 loops (``best``: the
    fastest of 40, for the CPU runs with launches recorded, where a shared machine's noise only ever slows a loop)."""
    for _ in range(3):
        call()
    _sync()
    loops = []
    for _ in range(40 if best else 5):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        loops.append((time.perf_counter() - start) / calls * 1e6)
        _sync()
    return min(loops) if best else statistics.median(loops)


def syncs(call) -> str | None:
    """None when ``call()`` issues without a device sync; else the error torch raised (sync debug mode "error")."""
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        call()
        return None
    except RuntimeError as error:
        return str(error).splitlines()[0][:160]
    finally:
        torch.cuda.set_sync_debug_mode("default")
        torch.cuda.synchronize()


def profile(call, calls: int, path: Path) -> None:
    """cProfile of ``calls`` eager calls (check=False), the 30 costliest functions by own time, into ``path``."""
    import cProfile
    import io
    import pstats

    call(False)
    _sync()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        call(False)
    profiler.disable()
    _sync()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(30)
    path.write_text(text.getvalue())


def measure(backend: str, batch: int, context: int, calls: int, device: torch.device,
            profile_dir: Path | None = None, recorded: bool = False) -> list[dict]:
    """Host time (and, on a GPU, graph-replay time and the sync check) of each op and step. ``recorded``: on the CPU
    inside ``atom_mxfp4.launch.recording()``: the host path up to its launches, none compiled or run."""
    rows = []
    for op, call in _calls(backend, batch, context, device, "torch" if recorded else None).items():
        if profile_dir is not None and op in ("step_sparse", "pa_decode", "write"):
            profile(call, calls, profile_dir / f"profile_{backend}_{batch}_{op}.txt")
        row = {"backend": backend, "batch": batch, "context": context, "op": op}
        per = MODEL_LAYERS if op.startswith("model_") else 1
        n = max(1, calls // per)
        for check in (False, True):
            call(True)  # the batch's values checked once, as by the first layer of a step
            row[f"host_us_check_{check}"] = round(host_us(lambda: call(check), n, best=recorded) / per, 2)
        row["gpu_us"] = None if recorded else round(graph_time_ms([lambda: call(False)], reps=20) * 1e3 / per, 2)
        if op.startswith("step") and not recorded:
            call(True)  # the batch's metadata checked once (what the first layer of a step does)
            row["sync_check_False"] = syncs(lambda: call(False))
            row["sync_check_True"] = syncs(lambda: call(True))
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.1f}"


def table(rows: list[dict], base: dict | None) -> str:
    """Markdown: host us (check False / True), GPU us, and the baseline's host us beside them where given."""
    key = lambda r: (r["backend"], r["batch"], r["op"])  # noqa: E731
    old = {key(r): r for r in base["rows"]} if base else {}
    head = "| backend | batch | op | host us, check=False | host us, check=True | GPU us (graph) | syncs (step) |"
    rule = "|---|---:|---|---:|---:|---:|---|"
    if base:
        head += f" {base['label']} host us, False / True | host speed-up (False) |"
        rule += "---:|---:|"
    lines = [head, rule]
    for r in rows:
        sync = "-" if "sync_check_False" not in r else (
            "none" if r["sync_check_False"] is None and r["sync_check_True"] is None else
            f"False: {r['sync_check_False'] or 'none'}; True: {r['sync_check_True'] or 'none'}")
        line = (f"| {r['backend']} | {r['batch']} | {r['op']} | {_fmt(r['host_us_check_False'])} | "
                f"{_fmt(r['host_us_check_True'])} | {_fmt(r['gpu_us'])} | {sync} |")
        if base:
            o = old.get(key(r))
            line += (f" {_fmt(o['host_us_check_False'])} / {_fmt(o['host_us_check_True'])} | "
                     f"{o['host_us_check_False'] / r['host_us_check_False']:.1f}x |" if o else " - | - |")
        lines.append(line)
    return "\n".join(lines)


def ledger_rows(report: dict, base: dict | None) -> list[dict]:
    old = {(r["backend"], r["batch"], r["op"]): r for r in base["rows"]} if base else {}
    out = []
    for r in report["rows"]:
        shape = f"batch {r['batch']} x {r['context']} tokens, decode"
        o = old.get((r["backend"], r["batch"], r["op"]))
        for metric, value in (("host_us_check_false", r["host_us_check_False"]),
                              ("host_us_check_true", r["host_us_check_True"]), ("gpu_us_graph", r["gpu_us"])):
            if value is None:  # no GPU time where the launches were only recorded
                continue
            peer = f"{base['label']} {base.get('commit', '')}".strip() if o and metric.startswith("host") else ""
            peer_value = (o["host_us_check_False"] if metric.endswith("false") else o["host_us_check_True"]) \
                if peer else ""
            out.append({"date": report["date"], "commit": report["commit"], "gpu": report["gpu"],
                        "op": f"host overhead: {r['op']}",
                        "shape": shape, "backend": r["backend"], "metric": metric, "value": value, "unit": "us",
                        "peer": peer, "peer_value": peer_value, "command": report["command"], "note": ""})
    return out


def plot(rows: list[dict], base: dict | None, path: Path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not importable: no plot")
        return
    groups = sorted({(r["backend"], r["batch"]) for r in rows})
    fig, axes = plt.subplots(1, len(groups), figsize=(5 * len(groups), 4.5), squeeze=False)
    old = {(r["backend"], r["batch"], r["op"]): r for r in base["rows"]} if base else {}
    for ax, (backend, batch) in zip(axes[0], groups):
        mine = [r for r in rows if (r["backend"], r["batch"]) == (backend, batch)]
        x = range(len(mine))
        series = [("check=False", [r["host_us_check_False"] for r in mine]),
                  ("check=True", [r["host_us_check_True"] for r in mine]),
                  ("GPU (graph)", [r["gpu_us"] or 0 for r in mine])]
        if base:
            series.insert(0, (f"{base['label']} check=False",
                              [old.get((backend, batch, r["op"]), {}).get("host_us_check_False", 0) for r in mine]))
        width = 0.8 / len(series)
        for i, (name, values) in enumerate(series):
            ax.bar([p + i * width for p in x], values, width, label=name)
        ax.set_xticks([p + 0.4 - width / 2 for p in x], [r["op"] for r in mine], rotation=45, ha="right")
        ax.set_yscale("log")
        ax.set_ylabel("us per call")
        ax.set_title(f"{backend}, batch {batch}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--label", default="new")
    parser.add_argument("--commit", default="")
    parser.add_argument("--backends", default="hopper,triton")
    parser.add_argument("--batches", default="1,64")
    parser.add_argument("--context", type=int, default=8192)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--compare", type=Path, help="a baseline's <label>.json (same script, earlier commit)")
    parser.add_argument("--profile", type=Path, help="a folder: cProfile of the step, pa_decode and the write at the "
                        "largest batch of each backend (profile_<backend>_<batch>_<op>.txt)")
    parser.add_argument("--recorded", action="store_true", help="no GPU: the host path on the CPU up to its "
                        "launches, recorded, none compiled or run (atom_mxfp4.launch.recording); the best of 40 loops")
    parser.add_argument("--merge", type=Path, nargs="+", metavar="RUN.json",
                        help="no run: one report from runs of one tree (alternated with a baseline's runs on a noisy "
                             "machine): each host time the fastest of the runs, GPU time their median")
    args = parser.parse_args(argv)
    if args.merge:
        return _write(args, merge([json.loads(path.read_text()) for path in args.merge], args, argv))
    if args.recorded:
        return _recorded(args, argv)
    device = torch.device("cuda", torch.cuda.current_device())
    here = set(available_backends(device))
    report = {"label": args.label, "commit": args.commit, "gpu": torch.cuda.get_device_name(device),
              "date": time.strftime("%Y-%m-%d"), "command": "python3 atom_mxfp4/evals/bench/host_overhead.py " +
              " ".join(argv if argv is not None else sys.argv[1:]), "rows": [], "op_replay_guard": _guard_kind()}
    print(f"op replay's tensor check: {report['op_replay_guard']}")
    for backend in args.backends.split(","):
        if backend not in here:
            print(f"backend {backend} does not run here ({sorted(here)}): skipped")
            continue
        for batch in (int(b) for b in args.batches.split(",")):
            report["rows"] += measure(backend, batch, args.context, args.calls, device,
                                      args.profile if batch == max(int(b) for b in args.batches.split(",")) else None)
    return _write(args, report)


def _guard_kind() -> str | None:
    """Which tensor check op replay uses in this process (None: a tree without op replay or without the report)."""
    try:
        from atom_mxfp4 import op_replay
    except ImportError:
        return None
    return getattr(op_replay, "GUARD", None)


def _recorded(args, argv) -> int:
    """``--recorded``: the Hopper and Triton host paths on the CPU, every launch recorded (as tests/test_host_path.py
    runs them: the backends made resolvable without their GPU)."""
    from atom_mxfp4 import backends, launch
    from atom_mxfp4.kernels.hopper import HopperBackend
    from atom_mxfp4.kernels.triton import TritonBackend

    for backend in (HopperBackend, TritonBackend):
        backend.unavailable = classmethod(lambda cls, device: None)
    backends._resolve.cache_clear()
    report = {"label": args.label, "commit": args.commit, "gpu": "cpu (launches recorded)",
              "date": time.strftime("%Y-%m-%d"), "command": "python3 atom_mxfp4/evals/bench/host_overhead.py " +
              " ".join(argv if argv is not None else sys.argv[1:]), "rows": []}
    with launch.recording() as launches:
        for backend in args.backends.split(","):
            for batch in (int(b) for b in args.batches.split(",")):
                report["rows"] += measure(backend, batch, args.context, args.calls, torch.device("cpu"),
                                          recorded=True)
                launches.clear()
    return _write(args, report)


def merge(runs: list[dict], args, argv) -> dict:
    """One report from ``runs`` (the same rows, one tree): host times the fastest of the runs (noise on a shared
    machine only ever slows a run), GPU times the median, the sync answers of the first run. Refuses runs of other
    commits or rows, naming them."""
    first = runs[0]
    for run in runs[1:]:
        if run["commit"] != first["commit"] or [_key(r) for r in run["rows"]] != [_key(r) for r in first["rows"]]:
            raise SystemExit(f"--merge: runs must be of one commit with the same rows, got {first['commit']} and "
                             f"{run['commit']} ({len(first['rows'])} / {len(run['rows'])} rows)")
    rows = []
    for i, row in enumerate(first["rows"]):
        same = [run["rows"][i] for run in runs]
        merged = dict(row)
        for metric in ("host_us_check_False", "host_us_check_True"):
            merged[metric] = min(r[metric] for r in same)
        gpu = [r["gpu_us"] for r in same if r["gpu_us"] is not None]
        merged["gpu_us"] = statistics.median(gpu) if gpu else None
        rows.append(merged)
    command = " ".join(argv if argv is not None else sys.argv[1:])
    return {**first, "label": args.label, "rows": rows,
            "command": f"{first['command']} x {len(runs)} runs merged, host times the fastest "
                       f"(host_overhead.py {command})"}


def _key(row: dict) -> tuple:
    return row["backend"], row["batch"], row["context"], row["op"]


def _write(args, report: dict) -> int:
    base = json.loads(args.compare.read_text()) if args.compare else None
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.label}.json").write_text(json.dumps(report, indent=1))
    text = table(report["rows"], base)
    (args.out / f"{args.label}.md").write_text(f"{report['gpu']}, commit {args.commit}\n\n{text}\n")
    print(text)
    rows = ledger_rows(report, base)
    with open(args.out / f"ledger_rows_{args.label}.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["date"])
        writer.writeheader()
        writer.writerows(rows)
    if base:
        plot(report["rows"], base, args.out / "host_overhead.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
