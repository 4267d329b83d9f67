"""The torch reference backend: the four ops of DESIGN §5, written for clarity; any device, CPU included."""

from atom_mxfp4.registry import REFERENCE_BACKEND, Backend, register_backend

from .index_topk import index_topk
from .pa_decode import make_plan, pa_decode
from .qknorm_rope_write import fused_qknorm_rope_write
from .sparse_tables import build_sparse_tables

__all__ = ["fused_qknorm_rope_write", "index_topk", "build_sparse_tables", "pa_decode", "make_plan"]


@register_backend(REFERENCE_BACKEND, rank=2)
class TorchBackend(Backend):
    """Runs on every device; ``backend=None``'s last resort (rank 2, after FlyDSL and Triton)."""

    @classmethod
    def auto(cls, device):
        return True, None
