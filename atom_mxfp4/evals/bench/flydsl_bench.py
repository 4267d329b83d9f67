"""Time pa_decode per backend on a gfx950 device (prints; asserts nothing). Never run here: no AMD GPU.

    python -m atom_mxfp4.evals.bench.flydsl_bench --rows 64 --group 16 --context 2048

Effective bandwidth counts the K/V bytes the op must read (136 B per token) plus q and out.
"""

from __future__ import annotations

import argparse

import torch

from atom_mxfp4.kernels.flydsl import cases as C
from atom_mxfp4.kernels.flydsl import layout as L


def _time(fn, iters: int) -> float:
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / iters  # microseconds


def main(argv=None) -> None:
    from atom_mxfp4 import ops

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--group", type=int, default=16)
    parser.add_argument("--context", type=int, default=2048)
    parser.add_argument("--e4m3", action="store_true", help="e4m3 query (default bf16)")
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--backends", default="flydsl,triton,torch")
    args = parser.parse_args(argv)
    device = torch.device("cuda", 0)
    case = C.make_case("bench", group=args.group, context_lens=[args.context] * args.rows, device=device,
                       q_dtype=torch.float8_e4m3fn if args.e4m3 else torch.bfloat16)
    rows, width = case.tables.shape
    nbytes = args.rows * args.context * 2 * (L.DATA_BYTES + L.SCALE_BYTES) + 2 * case.q.numel() * case.q.element_size()
    for name in args.backends.split(","):
        try:
            plan = ops.plan_pa_decode(rows, width, args.group, device, backend=name)
            out = case.out.clone()
            run = lambda: ops.pa_decode(out, case.q, case.k_cache, case.v_cache, case.tables,  # noqa: E731
                                        case.context_lens, softmax_scale=case.softmax_scale, plan=plan,
                                        backend=name, check=False)
            us = _time(run, args.iters if name != "torch" else 3)
        except Exception as error:  # report and go on to the next backend
            print(f"{name:7s} unavailable: {type(error).__name__}: {error}")
            continue
        splits = plan.splits_for(rows, width)[0] if hasattr(plan, "splits_for") else "-"  # torch: no split
        print(f"{name:7s} {us:9.1f} us  {nbytes / us / 1e3:7.1f} GB/s  splits={splits}")


if __name__ == "__main__":
    main()
