"""Availability and the once-per-process-and-device self-check of the FlyDSL backend.

``atom_mxfp4.backends`` calls ``self_check(device)`` before the backend's first use on a device: a mismatch
against the torch backend raises (an explicit ``backend='flydsl'`` then fails loudly; ``backend=None`` falls
back to Triton with one warning).
"""

from __future__ import annotations

import functools

import torch

from . import cases as C
from .pa_decode import FlyDSLDecodePlan, device_arch, make_plan, pa_decode


def is_available(device) -> bool:
    """True on a ROCm gfx950 device with flydsl importable (the self-check is separate)."""
    device = torch.device(device)
    if device.type != "cuda" or getattr(torch.version, "hip", None) is None or not torch.cuda.is_available():
        return False
    if device_arch(device.index) != "gfx950":
        return False
    try:
        import flydsl.compiler  # noqa: F401
    except ImportError:
        return False
    return True


def direct_plan(rows: int, width: int, group: int, device) -> FlyDSLDecodePlan:
    """A one-split plan: forces the direct path whatever the batch."""
    return make_plan(rows, width, group, device, num_splits=1)


def run_case(case: C.DecodeCase, plan) -> tuple[float, str]:
    """Run the kernel on one case; (worst error / tolerance, description). <= 1 passes."""
    out = case.out.clone()
    pa_decode(out, case.q, case.k_cache, case.v_cache, case.tables, case.context_lens,
              softmax_scale=case.softmax_scale, query_scale=case.query_scale, plan=plan)
    torch.cuda.synchronize(out.device)
    ref = C.reference(case)
    got = out.float()
    if torch.isnan(got).any():
        bad = torch.isnan(got).nonzero()[0].tolist()
        return float("inf"), f"NaN in out at [row, head, dim] {bad}"
    ratio = ((got - ref).abs() / C.tolerance(case, ref)).amax()
    where = ((got - ref).abs() / C.tolerance(case, ref)).flatten().argmax().item()
    return float(ratio), f"worst at flat index {where}: got {got.flatten()[where].item():.6g}, " \
                         f"torch {ref.flatten()[where].item():.6g}"


@functools.cache
def _self_check(device_index: int) -> None:
    device = torch.device("cuda", device_index)
    if not is_available(device):
        raise RuntimeError(f"FlyDSL backend unavailable on {device} (needs ROCm gfx950 and flydsl importable)")
    failures = []
    for case in C.standard_cases(device):
        rows, width = case.tables.shape
        group = case.q.shape[1]
        plans = {"split": make_plan(rows, width, group, device), "direct": direct_plan(rows, width, group, device),
                 "forced split": make_plan(rows, width, group, device, num_splits=C.FORCED_SPLITS)}
        for path, plan in plans.items():
            ratio, where = run_case(case, plan)
            if not ratio <= 1.0:
                failures.append(f"{case.name} [{path}, {plan.splits_for(rows, width)[0]} splits]: error "
                                f"{ratio:.3g}x the tolerance; {where}")
    if failures:
        raise RuntimeError("FlyDSL pa_decode disagrees with the torch backend on " + str(device) + ":\n  "
                           + "\n  ".join(failures))


def self_check(device) -> None:
    """Run the standard cases against the torch backend once per process and device; raise on mismatch."""
    device = torch.device(device)
    if not is_available(device):
        raise RuntimeError(f"FlyDSL backend unavailable on {device} (needs a ROCm gfx950 device and flydsl "
                           f"importable); nothing to self-check")
    _self_check(device.index if device.index is not None else torch.cuda.current_device())
