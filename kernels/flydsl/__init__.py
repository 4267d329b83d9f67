"""FlyDSL backend (AMD gfx950 / MI350-MI355X): ``pa_decode`` over MXFP4 K/V.

Only ``pa_decode`` / ``make_plan`` live here; ``atom_mxfp4.backends`` composes them with the Triton versions of
the other three ops. Importing this package needs no GPU and no flydsl; running needs both (``is_available``).
See docs/flydsl.md for what is verified without a gfx950 device and how to verify the rest on one.
"""

from .check import is_available, self_check
from .pa_decode import FlyDSLDecodePlan, make_plan, pa_decode

__all__ = ["pa_decode", "make_plan", "FlyDSLDecodePlan", "is_available", "self_check", "compile_isa", "IsaReport"]


def __getattr__(name):
    if name in ("compile_isa", "IsaReport"):
        from . import compile as _compile

        return getattr(_compile, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
