"""Prefill (extend) cost of one long prompt, chunk by chunk: where the mxfp4 server's TTFT goes.

SGLang prefills a long prompt in chunks (``--chunked-prefill-size``, 8192 by default on an H100) and runs our
attention eagerly in each. The H100 serving benchmark of 2026-12-07 (docs/sglang.md) measured a 32K prompt's TTFT
1.33x bf16's while decode was faster; this bench splits a chunk's layer step into its ops, on the backend the server
resolves, at every prefix of the prompt:

- ``write``: ``fused_qknorm_rope_write`` of the chunk (K, V and index-K quantized into the pool);
- ``index``: ``index_topk`` of the chunk's rows over their prefix as the layer runs it (a prefill batch: the tiled
  scorer, ``LayerConfig.index_tile_rows``); ``index_rows``: the layer's backend's row scorer; ``index_triton``:
  Triton's; ``index_tiled16`` / ``32``: Triton's prefill-shaped scorer (``tile_rows``), each
  index-K page decoded once per tile of the request's rows; ``index_tiled_same_ids``: its ids equal the row
  scorer's);
- ``attend_sparse`` / ``attend_dense``: ``ops.attend`` of the chunk's rows over their top-k blocks / whole prefix;
- ``layer_sparse`` / ``layer_dense``: the layer's whole step (``SparseMXFP4Attention.forward``, ``check=False``);
  ``layer_sparse_rows``: the sparse step with the row scorer (``index_tile_rows=0``);
  ``layer_dense_flash``: the dense step with ``flash_prefill_rows`` (atom_mxfp4.prefill: SDPA over the dequantized
  prefix), ``dense_flash_rel_l2`` its output against ``layer_dense``'s.

Peers in the same run (torch, bf16, the same work done as dense tensor-core math, not SGLang's kernels):
``peer_attend_dense``: ``scaled_dot_product_attention`` of the chunk against prefix + chunk, causal from the bottom
right; ``peer_index``: the index scores as one GEMM, the per-block max and ``topk``. The FLOPs of each (causal: the
chunk's rows see prefix + their own position) give TFLOP/s. Every row of ours does one query token's work over its
whole prefix (decode-shaped programs: docs/sglang.md); the peers tile queries.

    python3 -m atom_mxfp4.evals.bench.prefill_bench --out DIR [--context 32768 --chunk 8192 --index-k fp8,mxfp4]

writes ``DIR/prefill.json`` and ``DIR/prefill.md``. On the CPU (``--device cpu``) it runs the torch backend at small
sizes (tests/test_prefill_bench.py): the same code path, times meaningless.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

from atom_mxfp4 import ops
from atom_mxfp4.backends import resolve_backend
from atom_mxfp4.layer import AttentionMetadata, LayerCaches, LayerConfig, SparseMXFP4Attention
from atom_mxfp4.evals.bench._timing import eager_time_ms
from atom_mxfp4.layout import HEAD_DIM, PAGE_SIZE

NORMS = ("q_norm", "k_norm", "idx_q_norm", "idx_k_norm")
FLASH_ROWS = 128  # layer_dense_flash: LayerConfig.flash_prefill_rows (a chunk's rows are one segment)


def time_ms(call, reps: int, device: torch.device) -> float:
    """Median time of ``call``: on CUDA event-timed eager calls (``_timing.eager_time_ms``, eager as SGLang's prefill
    runs them), elsewhere wall time."""
    if device.type == "cuda":
        return eager_time_ms(call, reps)
    call()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def _error(error: Exception) -> str:
    return f"{type(error).__name__}: {error}"[:300]


def causal_pairs(prefix: int, chunk: int) -> int:
    """(query, key) pairs of a chunk of ``chunk`` rows after ``prefix`` tokens, each row seeing itself too."""
    return chunk * prefix + chunk * (chunk + 1) // 2


class Prompt:
    """One request's pool and layers (sparse and dense), filled chunk by chunk as the server would."""

    def __init__(self, context: int, heads: int, index_k: str, backend: str | None, device: torch.device):
        gen = torch.Generator().manual_seed(0)
        self.profile: dict | None = None  # run(profile=): prefix -> the flash dense step's profile table
        self.weights = {n: (torch.randn(HEAD_DIM, generator=gen) * 0.1).to(device) for n in NORMS}
        self.sparse_cfg = LayerConfig(num_q_heads=heads, sparse=True, index_k_dtype=index_k)
        self.dense_cfg = LayerConfig(num_q_heads=heads, sparse=False, index_k_dtype=index_k)
        self.sparse = SparseMXFP4Attention(self.sparse_cfg, self.weights, backend=backend)
        self.dense = SparseMXFP4Attention(self.dense_cfg, {n: self.weights[n] for n in NORMS[:2]}, backend=backend)
        self.sparse_rows = SparseMXFP4Attention(replace(self.sparse_cfg, index_tile_rows=0), self.weights,
                                                backend=backend)
        self.dense_flash = SparseMXFP4Attention(replace(self.dense_cfg, flash_prefill_rows=FLASH_ROWS),
                                                {n: self.weights[n] for n in NORMS[:2]}, backend=backend)
        pages = context // PAGE_SIZE
        self.sparse_caches = LayerCaches.allocate(self.sparse_cfg, pages + 1, device)
        self.dense_caches = LayerCaches.allocate(self.dense_cfg, pages + 1, device)
        self.block_table = (torch.arange(pages, dtype=torch.int32) + 1)[None].to(device)  # page 0 never owned
        self.heads, self.index_k, self.device, self.gen = heads, index_k, device, gen

    def chunk(self, prefix: int, chunk: int):
        meta = AttentionMetadata.for_requests(self.block_table, [prefix], [chunk])
        qkv = (torch.randn(chunk, self.sparse_cfg.qkv_width, generator=self.gen)).to(self.device, torch.bfloat16)
        return meta, qkv, qkv[:, :self.dense_cfg.qkv_width].contiguous()


def measure_chunk(p: Prompt, prefix: int, chunk: int, reps: int, peers: bool) -> dict:
    meta, qkv, qkv_dense = p.chunk(prefix, chunk)
    layer, caches, cfg, dev = p.sparse, p.sparse_caches, p.sparse_cfg, p.device
    # the chunk's own writes first (the server's order), so every op below reads a filled prefix + chunk
    layer.forward(qkv, meta, caches, check=True)
    p.dense.forward(qkv_dense, meta, p.dense_caches, check=True)
    w = layer.weights_on(dev)

    def write():
        return ops.fused_qknorm_rope_write(
            qkv, meta.positions, w["q_norm"], w["k_norm"], w["idx_q_norm"], w["idx_k_norm"], layer.cos_sin_cache(dev),
            meta.slot_mapping, caches.k, caches.v, caches.index_k, num_q_heads=cfg.num_q_heads,
            num_kv_heads=cfg.num_kv_heads, num_index_heads=cfg.num_index_heads, rotary_dim=cfg.rotary_dim,
            eps=cfg.eps, index_k_dtype=cfg.index_k_dtype, backend=layer.backend, check=False)

    q, idx_q = write()
    topk = layer.select(idx_q, meta, caches, check=False)
    plan = meta.pa_decode_plan(cfg, dev, backend=layer.backend)
    out = torch.empty(chunk, cfg.num_q_heads, HEAD_DIM, device=dev, dtype=torch.bfloat16)
    q = q.view(chunk, cfg.num_q_heads, HEAD_DIM)

    def attend(blocks):
        return ops.attend(out, q, caches.k, caches.v, meta.block_table, meta.token_request, meta.row_position,
                          num_kv_heads=cfg.num_kv_heads, topk_blocks=blocks, softmax_scale=cfg.softmax_scale,
                          plan=plan, backend=layer.backend, check=False)

    calls = {
        "write": write,
        "index": lambda: layer.select(idx_q, meta, caches, check=False),
        "index_rows": lambda: ops.index_topk(  # the row scorer (one program per row), as decode batches run it
            idx_q, caches.index_k, meta.block_table, meta.token_request, meta.row_position, topk=cfg.topk,
            init_blocks=cfg.init_blocks, local_blocks=cfg.local_blocks, index_k_dtype=cfg.index_k_dtype,
            backend=layer.backend, check=False),
        "attend_sparse": lambda: attend(topk),
        "attend_dense": lambda: attend(None),
        "layer_sparse": lambda: layer.forward(qkv, meta, caches, check=False),
        "layer_sparse_rows": lambda: p.sparse_rows.forward(qkv, meta, caches, check=False),
        "layer_dense": lambda: p.dense.forward(qkv_dense, meta, p.dense_caches, check=False),
        "layer_dense_flash": lambda: p.dense_flash.forward(qkv_dense, meta, p.dense_caches, check=False),
    }
    if dev.type == "cuda" and layer.backend != "triton":
        calls["index_triton"] = lambda: ops.index_topk(
            idx_q, caches.index_k, meta.block_table, meta.token_request, meta.row_position, topk=cfg.topk,
            local_blocks=cfg.local_blocks, index_k_dtype=cfg.index_k_dtype, backend="triton", check=False)
    if dev.type == "cuda" or os.environ.get("TRITON_INTERPRET") == "1":
        # Triton's prefill-shaped scorer (ops.index_topk tile_rows), 16 and 32 lanes a tile
        for lanes in (16, 32):
            calls[f"index_tiled{lanes}"] = lambda lanes=lanes: ops.index_topk(
                idx_q, caches.index_k, meta.block_table, meta.token_request, meta.row_position, topk=cfg.topk,
                init_blocks=cfg.init_blocks, local_blocks=cfg.local_blocks, index_k_dtype=cfg.index_k_dtype,
                tile_rows=lanes, backend="triton", check=False)
    record = {"prefix": prefix, "chunk": chunk, "pairs": causal_pairs(prefix, chunk)}
    for name, call in calls.items():
        try:
            record[name] = round(time_ms(call, reps, dev), 4)
        except Exception as error:  # noqa: BLE001 (one op's failure is reported; the others still run)
            record[name] = None
            record.setdefault("errors", {})[name] = _error(error)
    if "index_tiled32" in calls:  # the tiled scorer's ids equal the row scorer's
        try:
            record["index_tiled_same_ids"] = bool(torch.equal(calls["index_tiled32"](), calls["index_rows"]()))
        except Exception as error:  # noqa: BLE001
            record.setdefault("errors", {})["index_tiled_same_ids"] = _error(error)
    try:  # the flash path's output against the decode kernel's, same step (rel-L2)
        want = p.dense.forward(qkv_dense, meta, p.dense_caches, check=False).double()
        got = p.dense_flash.forward(qkv_dense, meta, p.dense_caches, check=False).double()
        record["dense_flash_rel_l2"] = float((got - want).norm() / want.norm().clamp_min(1e-300))
    except Exception as error:  # noqa: BLE001
        record.setdefault("errors", {})["dense_flash_rel_l2"] = _error(error)
    if peers:
        record.update(measure_peers(prefix, chunk, cfg.num_q_heads, reps, dev))
    if p.profile is not None and dev.type == "cuda":  # where the flash step's time goes (the kernels, by GPU time)
        p.profile[prefix] = profile_table(calls["layer_dense_flash"])
    return record


def profile_table(call, rows: int = 25) -> str:
    """torch.profiler of one warm call: its kernels and ops by GPU time (the table torch prints)."""
    from torch.profiler import ProfilerActivity, profile

    call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    return prof.key_averages().table(sort_by="cuda_time_total", row_limit=rows)


def measure_peers(prefix: int, chunk: int, heads: int, reps: int, dev: torch.device) -> dict:
    """The same chunk's dense attention and index scores as bf16 tensor-core math (torch), timed in this run."""
    from torch.nn.attention.bias import causal_lower_right

    keys = prefix + chunk
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(1, heads, chunk, HEAD_DIM, generator=gen).to(dev, torch.bfloat16)
    kv = torch.randn(1, 1, keys, HEAD_DIM, generator=gen).to(dev, torch.bfloat16).repeat(1, heads, 1, 1)  # GQA 16
    mask = causal_lower_right(chunk, keys)
    found = {"peer_attend_dense": round(time_ms(
        lambda: torch.nn.functional.scaled_dot_product_attention(q, kv, kv, attn_mask=mask), reps, dev), 4)}
    idx_q = torch.randn(chunk, HEAD_DIM, generator=gen).to(dev, torch.bfloat16)
    idx_k = torch.randn(keys, HEAD_DIM, generator=gen).to(dev, torch.bfloat16)
    blocks = -(-keys // PAGE_SIZE)
    padded = torch.zeros(blocks * PAGE_SIZE, HEAD_DIM, device=dev, dtype=torch.bfloat16)
    padded[:keys] = idx_k

    def index():
        scores = (idx_q @ padded.T).view(chunk, blocks, PAGE_SIZE).amax(-1)
        return torch.topk(scores, min(16, blocks), dim=-1)

    found["peer_index"] = round(time_ms(index, reps, dev), 4)
    return found


def run(context: int, chunk: int, heads: int, index_ks: list[str], backend: str | None, reps: int,
        device: torch.device, peers: bool = True, profile: dict | None = None) -> dict:
    """``profile``: a dict to fill with the flash dense step's profile per prefix (first index-K dtype only)."""
    resolved = resolve_backend(backend, device).name
    report = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
              "date": time.strftime("%Y-%m-%d"),
              "backend": resolved, "context": context, "chunk": chunk, "heads": heads, "rows": []}
    for index_k in index_ks:
        prompt = Prompt(context, heads, index_k, backend, device)
        prompt.profile = profile if index_k == index_ks[0] else None
        for prefix in range(0, context, chunk):
            record = {"index_k": index_k, **measure_chunk(prompt, prefix, min(chunk, context - prefix), reps,
                                                          peers and index_k == index_ks[0])}
            report["rows"].append(record)
            print(f"[prefill] {json.dumps(record)}", flush=True)
    return report


def table(report: dict) -> str:
    shown = [o for o in TIMED if any(r.get(o) is not None for r in report["rows"])]
    lines = [f"{report['device']}, backend {report['backend']}, {report['heads']} q heads, 1 KV head, chunks of "
             f"{report['chunk']} tokens of one {report['context']}-token prompt; ms per chunk (median)", "",
             "| index-K | prefix | " + " | ".join(shown) + " | dense attend / peer | dense TFLOP/s (ours, peer) | "
             "flash vs decode rel-L2 |", "|---|---:|" + "---:|" * len(shown) + "---:|---:|---:|"]
    for r in report["rows"]:
        flops = 4 * r["pairs"] * HEAD_DIM * report["heads"]  # QK^T and PV
        ours, peer = r.get("attend_dense"), r.get("peer_attend_dense")
        ratio = f"{ours / peer:.2f}x" if ours and peer else "-"
        rate = ", ".join(f"{flops / (t * 1e-3) / 1e12:.1f}" if t else "-" for t in (ours, peer))
        cells = " | ".join("-" if r.get(o) is None else f"{r[o]:.3f}" for o in shown)
        flash = "-" if r.get("dense_flash_rel_l2") is None else f"{r['dense_flash_rel_l2']:.1e}"
        lines.append(f"| {r['index_k']} | {r['prefix']:,} | {cells} | {ratio} | {rate} | {flash} |")
    return "\n".join(lines) + "\n"


TIMED = ("write", "index", "index_rows", "index_triton", "index_tiled16", "index_tiled32", "attend_sparse",
         "attend_dense", "layer_sparse", "layer_sparse_rows", "layer_dense", "layer_dense_flash", "peer_index",
         "peer_attend_dense")
# each number's same-run comparison
PEERS = {"layer_sparse": "layer_sparse_rows", "attend_dense": "peer_attend_dense", "layer_dense_flash": "layer_dense",
         "index_tiled16": "index_rows", "index_tiled32": "index_rows", "index": "index_rows",
         "index_rows": "peer_index"}


def ledger_rows(report: dict, commit: str, command: str) -> list[dict]:
    """One ledger row per number (atom_mxfp4.evals.ledger): ms per chunk of each op, and the flash path's rel-L2."""
    out = []
    for r in report["rows"]:
        shape = (f"prefix {r['prefix']} + chunk {r['chunk']} of one {report['context']}-token prompt, "
                 f"{report['heads']} q heads, {r['index_k']} index-K")
        for name in TIMED:
            if r.get(name) is None:
                continue
            peer = PEERS.get(name)
            backend = ("torch" if name.startswith("peer") else "triton" if name.startswith("index_t")
                       else report["backend"])
            out.append({"date": report["date"], "commit": commit, "gpu": report["device"],
                        "op": f"prefill chunk: {name}", "shape": shape, "backend": backend, "metric": "time_ms",
                        "value": r[name], "unit": "ms", "peer": peer if r.get(peer) is not None else "",
                        "peer_value": r.get(peer) if r.get(peer) is not None else "", "command": command,
                        "note": ("ids equal the row scorer's: " + str(r["index_tiled_same_ids"]))
                        if name.startswith("index_tiled") and "index_tiled_same_ids" in r else ""})
        if r.get("dense_flash_rel_l2") is not None:
            out.append({"date": report["date"], "commit": commit, "gpu": report["device"],
                        "op": "prefill chunk: layer_dense_flash", "shape": shape, "backend": report["backend"],
                        "metric": "rel_l2", "value": round(r["dense_flash_rel_l2"], 6), "unit": "",
                        "peer": "layer_dense", "peer_value": "", "command": command,
                        "note": "the flash path's output against the decode kernel's, same step"})
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--context", type=int, default=32768)
    parser.add_argument("--chunk", type=int, default=8192)
    parser.add_argument("--heads", type=int, default=16, help="q heads per KV head (one TP4 rank of M3: 16)")
    parser.add_argument("--index-k", default="fp8,mxfp4")
    parser.add_argument("--backend", help="default: what the device resolves (as the server)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--commit", default="", help="the commit measured (ledger rows: ledger_rows.csv)")
    parser.add_argument("--profile", action="store_true", help="torch.profiler of the flash dense step per chunk "
                        "(profile_flash.txt)")
    args = parser.parse_args(argv)
    for name, value in (("--context", args.context), ("--chunk", args.chunk)):
        if value <= 0 or value % PAGE_SIZE:
            parser.error(f"{name} must be a positive multiple of {PAGE_SIZE}, got {value}")
    profiles = {} if args.profile else None
    report = run(args.context, args.chunk, args.heads, args.index_k.split(","), args.backend, args.reps,
                 torch.device(args.device), peers=not args.no_peers, profile=profiles)
    args.out.mkdir(parents=True, exist_ok=True)
    if profiles:
        (args.out / "profile_flash.txt").write_text("".join(f"== layer_dense_flash, prefix {prefix}\n{text}\n"
                                                            for prefix, text in profiles.items()))
    (args.out / "prefill.json").write_text(json.dumps(report, indent=1))
    (args.out / "prefill.md").write_text(table(report))
    if args.commit:
        import csv

        from atom_mxfp4.evals.ledger import COLUMNS
        command = "python3 -m atom_mxfp4.evals.bench.prefill_bench " + " ".join(
            a for a in (argv if argv is not None else sys.argv[1:]))
        with open(args.out / "ledger_rows.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
            writer.writeheader()
            writer.writerows(ledger_rows(report, args.commit, command))
    print(table(report))
    return 1 if any(r.get("errors") for r in report["rows"]) else 0


if __name__ == "__main__":
    sys.exit(main())
