"""The Hopper backend (NVIDIA sm_90, Gluon): ``pa_decode`` over MXFP4 K/V with explicit layouts (issue 14).

Only ``pa_decode`` / ``make_plan`` live here (pa_decode.py: kernel, plan, launcher; _decode.py: the MXFP4 decode into
MMA operand registers; layout.py: every index map as host-evaluable data). The other three ops are the Triton
backend's (``borrows = "triton"``: an explicit, documented composition, as for FlyDSL).
``backend=None`` picks it on an sm_90 CUDA device (rank 0, before the Triton backend, which stays the portable path
and the reference it is tested against: tests/gpu/test_hopper_gpu.py, run on an H200); ``backend="hopper"`` runs it
on an sm_90 device and refuses anything else, never falling back. See docs/hopper.md.
Without triton (or without Gluon) the package still imports and registers: an explicit request then says why.
"""

import importlib.util
import os

import torch

from atom_mxfp4.registry import Backend, register_backend

NAME = "hopper"  # the registered name; pa_decode's plans carry it (defined before the op modules import it)

if importlib.util.find_spec("triton") is not None and importlib.util.find_spec("triton.experimental.gluon") is not None:
    from .pa_decode import HopperConfig, HopperDecodePlan, make_plan, pa_decode

__all__ = ["pa_decode", "make_plan", "HopperConfig", "HopperDecodePlan"]

CAPABILITY = (9, 0)  # sm_90: the layouts, mma.sync m16n8k16 and cp.async the kernel is written for
TESTED_TRITON = "3.6."  # Gluon is experimental and its API moves between minor releases: backend=None picks this
# backend only with the triton its GPU tests ran on (an explicit backend="hopper" runs with any triton that has Gluon)


def _triton_version() -> str:
    import triton
    return triton.__version__


def usable(device: torch.device) -> str | None:
    """Why the Gluon kernel cannot run on ``device`` (None: it can)."""
    if importlib.util.find_spec("triton") is None or importlib.util.find_spec("triton.experimental.gluon") is None:
        return "triton with triton.experimental.gluon (triton >= 3.6) is not importable"
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


@register_backend(NAME, rank=0)
class HopperBackend(Backend):
    """``backend=None``'s choice on sm_90 (its GPU tests pass on the H200: docs/hopper.md); Triton elsewhere."""

    ships = ("pa_decode", "make_plan")
    borrows = "triton"

    @classmethod
    def unavailable(cls, device):
        return usable(torch.device(device))

    @classmethod
    def auto(cls, device):
        if device.type != "cuda" or usable(device) is not None:
            return False, None
        version = _triton_version()
        if not version.startswith(TESTED_TRITON):
            return False, (f"the Hopper pa_decode is not picked on {device}: triton {version} is not the one its GPU "
                           f"tests ran on ({TESTED_TRITON}x); using the Triton backend (backend='hopper' forces it)")
        return True, None
