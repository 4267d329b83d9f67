"""Time pa_decode configs and split counts next to the copy bandwidth (H200 tuning runs; docs/triton.md).

    python3 atom_mxfp4/evals/bench/sweep_decode.py [--configs] [--index] [--splits] [--occupancy] [--json FILE]

``--configs``: each DecodeConfig of CONFIGS at the two target shapes (512 x 8192, 4096 x 2048), its output first
checked against the default config's on random data. ``--index``: IndexConfig variants at 32K context.
``--splits``: split counts x tile sizes on the shapes the benchmarks use (dense targets, and rows x 16 pages = the
sparse attend's shape at batch = rows), to set the split policy of ``num_splits_for``. ``--occupancy``: stages x
register cap x split counts for the PTX-decode kernel. Prints one line per measurement.
"""

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _timing import copy_bandwidth_tbs  # noqa: E402
from run_bench import agrees_with_default, bench_dense, bench_indexer  # noqa: E402

from atom_mxfp4.kernels.triton.index_topk import IndexConfig  # noqa: E402
from atom_mxfp4.kernels.triton.pa_decode import DecodeConfig  # noqa: E402

CONFIGS = [DecodeConfig(asm=False)] + [
    DecodeConfig(block_n=bn, num_warps=w, num_stages=s, maxnreg=m) for bn, w, s, m in
    ((128, 4, 1, 128), (128, 4, 2, None), (64, 4, 1, 128), (128, 8, 1, None))]
INDEX_CONFIGS = [IndexConfig(asm=False), IndexConfig()]
# (rows, context, split counts): the two dense targets, then the sparse attend's shape (16 pages per row)
SPLIT_GRID = [(512, 8192, (1, 2, 3, 4, 6, 8)), (4096, 2048, (1, 2)),
              (1, 2048, (4, 8, 16)), (8, 2048, (4, 8, 16)), (64, 2048, (2, 4, 8, 16)),
              (128, 2048, (1, 2, 3, 4, 8)), (256, 2048, (1, 2, 3, 4, 8)), (512, 2048, (1, 2, 3, 4))]


def sweep_configs(log):
    for cfg in CONFIGS:
        try:
            ok = agrees_with_default(cfg)
            rows = bench_dense([512], [8192], lambda *_: None, config=cfg)
            rows += bench_dense([4096], [2048], lambda *_: None, config=cfg)
        except Exception as error:
            log(dict(config=str(cfg), error=f"{type(error).__name__}: {str(error)[:200]}"))
            continue
        for r in rows:
            log(dict(config=str(cfg), agrees=ok, rows=r["rows"], context=r["context"], TBs=r["TBs"]))


# occupancy: the PTX-decode kernel at 2 stages holds 58 KB of shared memory and 136 registers (3 programs per SM);
# 1 stage drops the cp.async buffers (40 KB) and, at <= 128 registers, fits 4 programs per SM
OCCUPANCY_CONFIGS = [DecodeConfig(num_stages=s, maxnreg=m, programs_per_sm=p)
                     for s, m, p in ((2, None, 3), (1, None, 4), (1, 128, 4), (2, 128, 3))]
OCCUPANCY_GRID = [(512, 8192, (1, 2, 3)), (4096, 2048, (1,)), (512, 2048, (1, 2, 3)), (256, 2048, (1, 2, 3)),
                  (64, 2048, (4,))]


def sweep_occupancy(log):
    for cfg in OCCUPANCY_CONFIGS:
        try:
            ok = agrees_with_default(cfg)
            for rows, ctx, split_counts in OCCUPANCY_GRID:
                for splits in split_counts:
                    (r,) = bench_dense([rows], [ctx], lambda *_: None, config=cfg, num_splits=splits)
                    log(dict(config=str(cfg), agrees=ok, rows=rows, context=ctx, splits=r["splits"], us=r["ms"] * 1e3,
                             TBs=r["TBs"]))
        except Exception as error:
            log(dict(config=str(cfg), error=f"{type(error).__name__}: {str(error)[:200]}"))


def sweep_index(log):
    for cfg in INDEX_CONFIGS:
        for r in bench_indexer(None, [32768], [1, 16, 64, 256], lambda *_: None, config=cfg, with_peer=False):
            log(dict(index_config=str(cfg), context=r["context"], batch=r["batch"], us=r["ours_ms"] * 1e3,
                     TBs=r["ours_TBs"]))


def sweep_splits(log):
    for rows, ctx, split_counts in SPLIT_GRID:
        for block_n in (64, 128):
            cfg = DecodeConfig(block_n=block_n)
            for splits in split_counts:
                (r,) = bench_dense([rows], [ctx], lambda *_: None, config=cfg, num_splits=splits)
                log(dict(rows=rows, context=ctx, block_n=block_n, splits=r["splits"], us=r["ms"] * 1e3,
                         TBs=r["TBs"]))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--configs", action="store_true")
    parser.add_argument("--splits", action="store_true")
    parser.add_argument("--index", action="store_true", help="IndexConfig variants at 32K context")
    parser.add_argument("--occupancy", action="store_true", help="PTX-decode kernel: stages x register cap x splits")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    records = [dict(copy_TBs=copy_bandwidth_tbs()["best"])]

    def log(rec):
        records.append(rec)
        print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in rec.items()), flush=True)
        if args.json:
            args.json.write_text(json.dumps(records, indent=1))

    log(records.pop())
    if args.configs:
        sweep_configs(log)
    if args.occupancy:
        sweep_occupancy(log)
    if args.index:
        sweep_index(log)
    if args.splits:
        sweep_splits(log)


if __name__ == "__main__":
    main()
