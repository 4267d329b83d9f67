"""FlyDSL backend (AMD gfx950 / MI350-MI355X): ``pa_decode`` over MXFP4 K/V.

Only ``pa_decode`` / ``make_plan`` live here; the registration below borrows the Triton versions of the other three
ops (``atom_mxfp4.backends`` composes them). Importing this package needs no GPU and no flydsl; running needs both
(``is_available``). See docs/flydsl.md for what is verified without a gfx950 device and how to verify the rest on one.
"""

import functools

import torch

from atom_mxfp4.plan import plan_device
from atom_mxfp4.registry import REFERENCE_BACKEND, Backend, register_backend

NAME = "flydsl"  # the registered name; pa_decode's plans carry it (defined before the modules that import it)

from .check import is_available, self_check  # noqa: E402
from .pa_decode import FlyDSLDecodePlan, make_plan, pa_decode  # noqa: E402

__all__ = ["pa_decode", "make_plan", "FlyDSLDecodePlan", "is_available", "self_check", "compile_isa", "IsaReport"]


def __getattr__(name):
    if name in ("compile_isa", "IsaReport"):
        from . import compile as _compile

        return getattr(_compile, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _is_gfx950(device: torch.device) -> bool:
    if device.type != "cuda" or getattr(torch.version, "hip", None) is None:
        return False
    return "gfx950" in getattr(torch.cuda.get_device_properties(device), "gcnArchName", "")


@functools.cache
def _checked(device_index: int) -> str | None:
    """Run the self-check once per process and device; None if it passed, else why it failed."""
    try:
        self_check(torch.device("cuda", device_index))
    except Exception as error:  # the reason is reported, never swallowed
        return f"{type(error).__name__}: {error}"
    return None


@register_backend(NAME, rank=0)
class FlyDSLBackend(Backend):
    """``backend=None``'s first choice on gfx950, once its self-check against the torch backend passed."""

    ships = ("pa_decode", "make_plan")
    borrows = "triton"

    @classmethod
    def unavailable(cls, device):
        if not _is_gfx950(device):
            return f"needs an AMD gfx950 device, got {device}"
        why = _checked(plan_device(device).index)  # cuda without an index: the current device
        return None if why is None else f"failed its self-check against the {REFERENCE_BACKEND} backend: {why}"

    @classmethod
    def auto(cls, device):
        if not _is_gfx950(device):
            return False, None
        why = _checked(plan_device(device).index)  # cuda without an index: the current device
        if why is None:
            return True, None
        return False, f"FlyDSL self-check failed on {device} ({why}); using the Triton backend"
