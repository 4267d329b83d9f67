"""atom-mxfp4: MXFP4 KV cache and block-sparse attention for MiniMax-M3-style models."""

from .cache import MXFP4PageCache, capacity_ratio, kv_bytes_per_token, tokens_that_fit
from .format import ScaleMode, dequantize_mxfp4, quantize_mxfp4
from .ops import (attend, build_sparse_tables, dense_tables, fused_qknorm_rope_write, index_topk, pa_decode,
                  plan_pa_decode)
from .plan import DecodePlan

__version__ = "0.1.0"
__all__ = [
    "MXFP4PageCache", "ScaleMode", "quantize_mxfp4", "dequantize_mxfp4", "kv_bytes_per_token", "tokens_that_fit",
    "capacity_ratio", "fused_qknorm_rope_write", "index_topk", "build_sparse_tables", "pa_decode", "plan_pa_decode",
    "attend", "dense_tables", "DecodePlan",
]
