"""Dense pa_decode launches per DecodeConfig variant, to run under Nsight Compute on the H200 (by hand; the
reports of 2026-12-02 are in docs/bench/2026-12-02-h200-ptx/ncu/):

    ncu --clock-control none -k regex:_pa_decode_kernel --set full --page details \
        python3 atom_mxfp4/evals/bench/profile_decode.py --variants ptx-decode triton-decode

Each variant is launched twice (the first compiles and warms up; ncu's ``--launch-skip`` is not needed because
compilation launches nothing). Prints the variant order so the report's launches can be matched to the names.
"""

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from run_bench import DEV, random_records  # noqa: E402

import atom_mxfp4.kernels.triton as tb  # noqa: E402
from atom_mxfp4.kernels.triton.pa_decode import DecodeConfig  # noqa: E402

VARIANTS = {  # the 2026-12-02 reports also profiled variants removed since (docs/triton.md "Removed experiments")
    "ptx-decode": DecodeConfig(),  # the default
    "triton-decode": DecodeConfig(asm=False),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=512)
    parser.add_argument("--context", type=int, default=8192)
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS))
    args = parser.parse_args()
    width = args.context // 128
    torch.manual_seed(0)
    q = torch.randn(args.rows, 16, 128, device=DEV).bfloat16()
    lens = torch.full((args.rows,), args.context, dtype=torch.int32, device=DEV)
    out = torch.empty(args.rows, 16, 128, dtype=torch.bfloat16, device=DEV)
    k, v = random_records(args.rows * width), random_records(args.rows * width)
    tables = torch.randperm(args.rows * width, device=DEV).int().view(args.rows, width).contiguous()
    for name in args.variants:
        plan = tb.make_plan(args.rows, width, 16, DEV, config=VARIANTS[name])
        for launch in range(2):
            tb.pa_decode(out, q, k, v, tables, lens, softmax_scale=0.088, query_scale=None, plan=plan)
            torch.cuda.synchronize()
            splits = plan.splits_for(args.rows, width)[0]
            print(f"launch {name} #{launch} rows={args.rows} ctx={args.context} splits={splits}", flush=True)


if __name__ == "__main__":
    main()
