"""The Triton backend (NVIDIA Hopper/Blackwell, AMD): the four ops of DESIGN §5, one op family per file.

``fused_qknorm_rope_write`` (qknorm_rope_write.py), ``index_topk`` (index_topk.py), ``build_sparse_tables``
(sparse_tables.py), ``pa_decode`` + ``make_plan`` (pa_decode.py); shared MXFP4 device code in _mxfp4.py.
Arguments arrive validated by ``atom_mxfp4.ops``; launchers re-check only the layout invariants they rely on.
"""

from ._interpreter_compat import patch_interpreter

patch_interpreter()

from .index_topk import index_topk  # noqa: E402
from .pa_decode import make_plan, pa_decode  # noqa: E402
from .qknorm_rope_write import fused_qknorm_rope_write  # noqa: E402
from .sparse_tables import build_sparse_tables  # noqa: E402

__all__ = ["fused_qknorm_rope_write", "index_topk", "build_sparse_tables", "pa_decode", "make_plan"]
