"""Time pa_decode configs at the two target shapes (512 x 8192, 4096 x 2048) next to the copy bandwidth.

``python3 -P evals/bench/sweep_decode.py`` (scripts/h200.sh's package shim on PYTHONPATH). Each config's output is
first checked against the default config's on random data; prints one line per (config, shape).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _timing import copy_bandwidth_tbs  # noqa: E402
from run_bench import agrees_with_default, bench_dense  # noqa: E402

from atom_mxfp4.kernels.triton.pa_decode import DecodeConfig  # noqa: E402

CONFIGS = [DecodeConfig(), DecodeConfig(dot_scaled=False)] + [
    DecodeConfig(block_n=bn, num_warps=w, dot_scaled=False, prefetch=True) for bn in (64, 128) for w in (4, 8)]


def main():
    print(f"copy {copy_bandwidth_tbs()['best']:.3f} TB/s", flush=True)
    for cfg in CONFIGS:
        try:
            ok = agrees_with_default(cfg)
            rows = bench_dense([512], [8192], lambda *_: None, config=cfg)
            rows += bench_dense([4096], [2048], lambda *_: None, config=cfg)
        except Exception as error:
            print(f"{cfg}: {type(error).__name__}: {str(error)[:200]}", flush=True)
            continue
        for r in rows:
            print(f"{cfg} agrees={ok} rows={r['rows']} ctx={r['context']}: {r['TBs']:.3f} TB/s", flush=True)


if __name__ == "__main__":
    main()
