"""Small-batch latency of the Hopper pa_decode: forced split counts at 1-64 rows x 1-64 pages (H200, issue 14).

Usage (repo root, atom_mxfp4 importable, an sm_90 GPU): ``python3 -P evals/bench/hopper_latency.py OUT.json``.
Each case is captured in a CUDA graph over rotated input sets (``_timing.graph_time_ms``) and reported in us per call,
next to a trivial kernel timed the same way (the launch floor). Run it on two trees in one device call (PYTHONPATH
selects the package) for a same-run A/B: docs/hopper.md "Once per program" came from this loop (2026-12-03 evening,
then a scratch script; this file is that script with its output path as the one argument). Never asserts a time.
"""

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from _timing import graph_time_ms, sets_for  # noqa: E402
from hopper_bench import GROUP, SOFTMAX_SCALE, make_inputs  # noqa: E402
from run_bench import DEV, MX_TOKEN  # noqa: E402

import atom_mxfp4.kernels.hopper as hopper  # noqa: E402

# (rows, table pages, context, split counts: None = the plan's policy)
CASES = [(1, 1, 128, [1]), (1, 2, 256, [2]), (1, 4, 512, [4]), (1, 16, 1998, [1, 8, 16, None]),
         (8, 16, 1998, [16, None]), (16, 16, 1998, [None]), (64, 16, 1998, [None]), (1, 64, 8192, [32, 64, None])]


def main() -> None:
    out_path = Path(sys.argv[1])
    res = {}

    def put(key, value):
        res[key] = round(value, 2)
        print(key, res[key], flush=True)

    x = torch.zeros(16, device=DEV)
    put("floor_1_kernel_us", 1e3 * graph_time_ms([lambda: x.add_(1)] * 32, reps=50))
    for rows, width, ctx, splits_list in CASES:
        n = sets_for(rows * ctx * 2 * MX_TOKEN, budget=2 * 2**30)
        q, lens, sets = make_inputs(rows, width, ctx, n)
        out = torch.empty(rows, GROUP, 128, dtype=torch.bfloat16, device=DEV)

        def timed(plan):
            return 1e3 * graph_time_ms([(lambda s=s: hopper.pa_decode(out, q, s[0], s[1], s[2], lens,
                                                                      softmax_scale=SOFTMAX_SCALE, query_scale=None,
                                                                      plan=plan)) for s in sets], reps=50)
        for splits in splits_list:
            plan = hopper.make_plan(rows, width, GROUP, DEV, num_splits=splits)
            put(f"{rows}x{width}_s{splits if splits else 'policy' + str(plan.num_splits)}", timed(plan))
        del sets
        torch.cuda.empty_cache()
    out_path.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
