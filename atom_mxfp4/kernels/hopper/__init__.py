"""The Hopper backend (NVIDIA sm_90, Gluon): ``pa_decode`` over MXFP4 K/V with explicit layouts (issue 14).

``pa_decode`` / ``make_plan`` live here, ``attend`` (registry.FUSED_OPS: a layer's attention step in one launch, the
kernel reading the block table and the top-k ids itself; it declines sparse launches of more programs than SMs, where
atom_mxfp4.ops composes instead) and ``index_topk`` (its own scorer for bf16 idx_q with <= 8 index heads over either
index-K dtype, the Triton scorer for other calls, the Triton select kernel for both: index_topk.py). pa_decode.py:
kernel and launchers, over _pages.py (where a program's pages come from), _loop.py (the main loop) and _merge.py (the
epilogue, the split merge); policy.py: the tuning config, split policy and plan; _decode.py: the MXFP4 decode into
MMA operand registers; layout.py: every index map as host-evaluable data. The other two ops (build_sparse_tables, the
fused write) are the Triton backend's (``borrows = "triton"``: an explicit, documented composition, as for FlyDSL).
``backend=None`` picks it on an sm_90 CUDA device (rank 0, before the Triton backend, which stays the portable path
and the reference it is tested against: tests/gpu/test_hopper_gpu.py, run on an H200); ``backend="hopper"`` runs it
on an sm_90 device and refuses anything else, never falling back. See docs/hopper.md.
Gluon is experimental and its API moves between triton releases (3.7 renamed ``gl.thread_barrier`` to ``gl.barrier``,
3.9 removed ``async_copy_global_to_shared`` for ``async_load``: _gluon.py takes either), so the kernels are only
imported and used with a triton series whose build ran their GPU tests on the H200 (``TRITON_SERIES``): 3.6 (the lent
machine's), 3.8 (torch 2.14's pin, hence SGLang 0.5.23's) and 3.9 (torch 2.15's pin). 3.7 compiles on the
CPU with the same instruction mix but has not run on a GPU; ``ATOM_MXFP4_HOPPER_TRITON_SERIES=3.7`` (comma-separated
"major.minor" series) makes the backend take such a series anyway: for running its GPU tests under a new release.
Without that triton (or without Gluon) the package still imports and registers: an explicit request says why, and
``backend=None`` on an sm_90 device warns once and uses the Triton backend.
"""

import importlib.util
import os
import re

import torch

from atom_mxfp4.registry import Backend, register_backend

NAME = "hopper"  # the registered name; pa_decode's plans carry it (defined before the op modules import it)
TRITON_SERIES = ("3.6.", "3.8.", "3.9.")  # the triton series whose builds ran the kernels' GPU tests (docs/hopper.md)
SERIES_ENV = "ATOM_MXFP4_HOPPER_TRITON_SERIES"  # other series to take, untested: "3.10" or "3.7,3.10"
CAPABILITY = (9, 0)  # sm_90: the layouts, mma.sync m16n8k16 and cp.async the kernel is written for


def _triton_version() -> str | None:
    """The installed triton's version (None: no triton with Gluon)."""
    if importlib.util.find_spec("triton") is None or importlib.util.find_spec("triton.experimental.gluon") is None:
        return None
    import triton
    return triton.__version__


def _extra_series() -> tuple[str, ...]:
    """The series ``SERIES_ENV`` adds ("3.10" -> "3.10."); a value that is not "major.minor[,...]" raises, naming it."""
    value = os.environ.get(SERIES_ENV, "")
    series = tuple(item.strip() for item in value.split(",") if item.strip())
    for item in series:
        if re.fullmatch(r"\d+\.\d+\.?", item) is None:
            raise ValueError(f"{SERIES_ENV} must be comma-separated triton series such as 3.10 or 3.7,3.10, got "
                             f"{value!r}")
    return tuple(item.rstrip(".") + "." for item in series)


ACCEPTED_SERIES = TRITON_SERIES + _extra_series()  # read once, at import: the kernels are imported under it below


def _series() -> str:
    names = [f"{series}x" for series in TRITON_SERIES]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _triton_problem() -> str | None:
    """Why the installed triton cannot build the kernel (None: it can)."""
    version = _triton_version()
    if version is None:
        return f"triton {_series()} with triton.experimental.gluon is not importable"
    if not version.startswith(ACCEPTED_SERIES):
        return (f"needs triton {_series()}, the triton its GPU tests ran on (Gluon's API moves between "
                f"releases), got triton {version} ({SERIES_ENV}={version.rsplit('.', 1)[0]} takes it untested)")
    return None


if _triton_problem() is None:
    from .index_topk import IndexConfig, index_topk
    from .pa_decode import HopperConfig, HopperDecodePlan, attend, fuses_sparse, make_plan, pa_decode

__all__ = ["pa_decode", "make_plan", "attend", "index_topk", "fuses_sparse", "HopperConfig", "HopperDecodePlan",
           "IndexConfig"]


def _device_problem(device: torch.device) -> str | None:
    """Why ``device`` (or the interpreter mode) cannot run the kernel, whatever triton is installed (None: it can)."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        return "Gluon kernels do not run under TRITON_INTERPRET=1"
    if device.type != "cuda" or getattr(torch.version, "hip", None) is not None:
        return f"needs an NVIDIA CUDA device of compute capability {CAPABILITY}, got device {device}"
    if not torch.cuda.is_available():
        return f"needs an NVIDIA CUDA device of compute capability {CAPABILITY}: torch.cuda.is_available() is False"
    capability = torch.cuda.get_device_capability(device)
    if capability != CAPABILITY:
        return f"needs compute capability {CAPABILITY} (sm_90), got {capability} on {device}"
    return None


def usable(device: torch.device) -> str | None:
    """Why the Gluon kernel cannot run on ``device`` (None: it can): the installed triton first, then the device."""
    return _triton_problem() or _device_problem(device)


@register_backend(NAME, rank=0)
class HopperBackend(Backend):
    """``backend=None``'s choice on sm_90 (its GPU tests pass on the H200: docs/hopper.md); Triton elsewhere."""

    ships = ("pa_decode", "make_plan", "attend", "index_topk")
    borrows = "triton"

    @classmethod
    def unavailable(cls, device):
        return usable(torch.device(device))

    @classmethod
    def auto(cls, device):
        """Yes on an sm_90 CUDA device with a triton of TRITON_SERIES; on an sm_90 device with another triton: no,
        with a warning (that user expected this backend)."""
        if device.type != "cuda":
            return False, None
        if usable(device) is None:
            return True, None
        problem = _triton_problem()
        if problem is not None and _device_problem(device) is None:  # the device would run it: say why it does not
            return False, f"the Hopper pa_decode is not used on {device}: {problem}; using the Triton backend"
        return False, None
