"""The Triton backend (NVIDIA Hopper/Blackwell, AMD): the four ops of DESIGN §5, one op family per file.

``fused_qknorm_rope_write`` (qknorm_rope_write.py), ``index_topk`` (index_topk.py), ``build_sparse_tables``
(sparse_tables.py), ``pa_decode`` + ``make_plan`` (pa_decode.py); shared MXFP4 device code in _mxfp4.py (which also
installs the interpreter compat layer, _interpreter_compat.py, before any kernel is defined).
Arguments arrive validated by ``atom_mxfp4.ops``; launchers re-check only the layout invariants they rely on.
Without triton installed the package still imports (and registers): an explicit request then says why it cannot run.
"""

import importlib.util
import os

import torch

from atom_mxfp4.registry import Backend, register_backend

NAME = "triton"  # the registered name; pa_decode's plans carry it (defined before the op modules import it)
INTERPRETER_SMS = 4  # the SM count the ops plan with off-GPU: small, so CPU tests exercise the split paths

if importlib.util.find_spec("triton") is not None:  # without triton the backend is registered all the same
    from .index_topk import index_topk
    from .pa_decode import TritonDecodePlan, make_plan, pa_decode
    from .qknorm_rope_write import fused_qknorm_rope_write
    from .sparse_tables import build_sparse_tables

__all__ = ["fused_qknorm_rope_write", "index_topk", "build_sparse_tables", "pa_decode", "make_plan",
           "TritonDecodePlan"]


def usable(device: torch.device) -> str | None:
    """Why Triton kernels cannot run on ``device`` (None: they can): a CUDA/ROCm device or TRITON_INTERPRET=1."""
    if device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        return f"triton needs a CUDA/ROCm device or TRITON_INTERPRET=1, got device {device}"
    try:
        import triton  # noqa: F401
    except ImportError as error:
        return f"triton is not importable ({error})"
    return None


@register_backend(NAME, rank=1)
class TritonBackend(Backend):
    """``backend=None`` picks it on a CUDA/ROCm device (the interpreter only on explicit request)."""

    @classmethod
    def unavailable(cls, device):
        return usable(device)

    @classmethod
    def auto(cls, device):
        return device.type == "cuda" and usable(device) is None, None
