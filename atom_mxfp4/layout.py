"""The ground floor: DESIGN §2-4 (geometry, MXFP4 block, cache record, sentinels, qkv row map) as code.

Every other module (ops, layer, cache, the three backends, the SGLang plugin, evals, tests) imports these facts
from here instead of restating them. Pure constants and small integer functions: no torch import, no state.
The views ``data_view`` / ``scale_view`` only call methods of the tensor they are given.

Record of one (page, head), ``RECORD_BYTES`` = 8704 uint8:
``[PAGE_SIZE tokens x DATA_BYTES e2m1 codes][PAGE_SIZE tokens x SCALE_BYTES e8m0 scales]``; code byte ``b`` of a
token holds elements ``2b`` (low nibble) and ``2b + 1`` (high nibble), scale byte ``k`` covers elements
``32k .. 32k + 31``. Token slot = ``page * PAGE_SIZE + offset``; folded physical page id = ``page * heads + head``.
"""

from __future__ import annotations

from typing import NamedTuple

# ---- geometry (DESIGN §2) ---------------------------------------------------------------------------------------
HEAD_DIM = 128  # the only head_dim of the MXFP4 kernels
PAGE_SIZE = 128  # tokens per page = tokens per sparse block at pages_per_block 1 (MiniMax-M3)
MAX_GROUP = 16  # query heads per KV head (GQA group), 1 <= G <= 16: the decode kernels pad it to 16

# ---- MXFP4 block (DESIGN §3) ------------------------------------------------------------------------------------
BLOCK = 32  # elements per e8m0 scale (OCP MX block size), along head_dim
E8M0_ONE = 127  # scale byte of 2**0; value = e2m1(code) * 2**(e - 127)
E8M0_MIN, E8M0_MAX = 1, 254  # the scale bytes writers emit (0 and 255 = NaN never written)

# ---- cache record (DESIGN §4) -----------------------------------------------------------------------------------
DATA_BYTES = HEAD_DIM // 2  # 64: e2m1 code bytes per token-head (two codes per byte)
SCALE_BYTES = HEAD_DIM // BLOCK  # 4: e8m0 scale bytes per token-head
TOKEN_BYTES = DATA_BYTES + SCALE_BYTES  # 68: one token-head of K, V or index-K
SCALE_OFFSET = PAGE_SIZE * DATA_BYTES  # 8192: where a record's scale bytes start
RECORD_BYTES = PAGE_SIZE * TOKEN_BYTES  # 8704: one (page, head); a multiple of 16 B
# the fp8 index-K record (index_k_dtype="fp8", atom_mxfp4.index_k): e4m3 bytes, then one e8m0 scale per 32 elements
FP8_DATA_BYTES = HEAD_DIM  # 128: one e4m3 byte per element
FP8_SCALE_BYTES = HEAD_DIM // BLOCK  # 4
FP8_SCALE_OFFSET = PAGE_SIZE * FP8_DATA_BYTES  # 16384
FP8_RECORD_BYTES = PAGE_SIZE * (FP8_DATA_BYTES + FP8_SCALE_BYTES)  # 16896: one (page, head)

# ---- sentinels (where produced / consumed: docs/api.md) ---------------------------------------------------------
NO_SLOT = -1  # slot_mapping entry: do not write this token (consumed by fused_qknorm_rope_write)
NO_BLOCK = -1  # index_topk output padding (consumed by build_sparse_tables)
UNUSED_PAGE = 0  # unused sparse-table entries (never read: context_lens stop before them)
# Forced blocks rank above every score, +inf included: index_topk ranks a block by the monotone int of its fp32
# score (+inf is 0x7F800000); init blocks (b < init_blocks) get INIT_KEY, the local_blocks blocks ending at the
# row's own block LOCAL_KEY (init above local, each kind tied, ties to the smaller block id). DESIGN's 1e30 / 1e29
# scores lost to scores above them; these keys cannot.
POS_INF_KEY = 0x7F800000
LOCAL_KEY = POS_INF_KEY + 1
INIT_KEY = POS_INF_KEY + 2

# ---- kernel bounds: validated by atom_mxfp4.ops with check=True, re-checked by the Triton launchers -----------
MAX_INDEX_HEADS = 16  # index heads per row of index_topk (the Triton kernel's padded dot)
MAX_TOPK = 256  # top-k blocks per row (index_topk output width, build_sparse_tables input width)
MAX_PAGES_PER_BLOCK = 16  # pages per sparse block (2048-token blocks)
MAX_INDEX_BLOCKS = 1 << 14  # block-table width of index_topk (2M tokens per request): one program holds a row's blocks


# ---- the fused projection row (DESIGN §2) -----------------------------------------------------------------------
class QKVRows(NamedTuple):
    """Head-row slices ``[start, stop)`` (units of HEAD_DIM columns) of one token's fused projection, usable as
    indices of ``qkv.view(T, heads, HEAD_DIM)[:, rows.k]``; multiply by HEAD_DIM for column ranges.

    ``[q (nq) | k (nkv) | v (nkv) | idx_q (niq) | idx_k (1 if niq else 0)]``; ``heads`` rows, ``width`` columns.
    """

    q: slice
    k: slice
    v: slice
    idx_q: slice
    idx_k: slice

    @property
    def heads(self) -> int:
        return self.idx_k.stop

    @property
    def width(self) -> int:
        return self.heads * HEAD_DIM


def qkv_rows(num_q_heads: int, num_kv_heads: int, num_index_heads: int = 0) -> QKVRows:
    """The head-row map of the fused projection for (nq, nkv, niq); niq = 0 for dense layers (no index part)."""
    nq, nkv, niq = num_q_heads, num_kv_heads, num_index_heads
    k0 = nq
    v0 = k0 + nkv
    iq0 = v0 + nkv
    ik0 = iq0 + niq
    return QKVRows(slice(0, nq), slice(k0, v0), slice(v0, iq0), slice(iq0, ik0), slice(ik0, ik0 + (1 if niq else 0)))


def qkv_width(num_q_heads: int, num_kv_heads: int, num_index_heads: int = 0) -> int:
    """Columns of the fused projection: ``(nq + 2 nkv + niq + (niq > 0)) * HEAD_DIM``."""
    return qkv_rows(num_q_heads, num_kv_heads, num_index_heads).width


# ---- slots and views --------------------------------------------------------------------------------------------
def pages_for(num_tokens: int) -> int:
    """Pages holding ``num_tokens`` tokens (ceil division by PAGE_SIZE)."""
    return -(-num_tokens // PAGE_SIZE)


def data_view(records):
    """records [pages, heads, 8704] uint8 -> data [pages, heads, 128, 64] uint8 (a view, same storage)."""
    pages, heads, _ = records.shape
    return records.as_strided((pages, heads, PAGE_SIZE, DATA_BYTES),
                              (heads * RECORD_BYTES, RECORD_BYTES, DATA_BYTES, 1), records.storage_offset())


def scale_view(records):
    """records [pages, heads, 8704] uint8 -> scale [pages, heads, 128, 4] uint8 e8m0 (a view, same storage)."""
    pages, heads, _ = records.shape
    return records.as_strided((pages, heads, PAGE_SIZE, SCALE_BYTES),
                              (heads * RECORD_BYTES, RECORD_BYTES, SCALE_BYTES, 1),
                              records.storage_offset() + SCALE_OFFSET)
