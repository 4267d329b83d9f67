"""build_sparse_tables (Triton): each row's top-k blocks -> a one-block-per-page table and a context length.

One program per (row, kv head), no host sync (CUDA-graph safe). Row ``r * nkv + h`` of the output:
the selected *full* blocks first in ascending id order, then the row's own partial block (if selected), each
block expanded to its ``pages_per_block`` pages as folded ids ``block_table[req, page] * nkv + h``;
unused entries are 0 (never read by pa_decode, which stops at context_lens).
``context_lens = n_full * block_tokens + (row_position - own_block * block_tokens + 1)`` when the own block is
selected, else ``n_selected * block_tokens``; ``block_tokens = 128 * pages_per_block``.
The input is what index_topk returns (``atom_mxfp4.ops`` checks it with check=True): distinct ascending ids, none
past the own block, then -1 padding. So the own block, when selected, is the last id and the table is the input
in its own order: one linear pass, no sort (work and registers O(topk * ppb)).
Sentinel consumed: ``topk_blocks == -1`` is padding. Not checked at run time: the order above, block ids < blocks
per request (unchecked violations give another order or other pages, always inside the table row).
"""

import torch
import triton
import triton.language as tl

from atom_mxfp4.errors import expect, expect_contiguous
from atom_mxfp4.launch import launcher, pow2_at_least
from atom_mxfp4.layout import MAX_PAGES_PER_BLOCK, MAX_TOPK

from ._mxfp4 import PAGE_SIZE
from ._options import FUSED


@triton.jit(do_not_specialize=("num_rows", "table_stride"))
def _sparse_tables_kernel(
    topk_ptr, block_table_ptr, row_request_ptr, row_position_ptr, tables_ptr, context_lens_ptr,
    num_rows, num_kv_heads, table_stride,
    TOPK: tl.constexpr, TOPK_POW2: tl.constexpr, PPB: tl.constexpr, PPB_POW2: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1).to(tl.int64)
    BLOCK_TOKENS: tl.constexpr = PAGE_SIZE * PPB
    request = tl.load(row_request_ptr + row).to(tl.int64)
    position = tl.load(row_position_ptr + row)
    own = position // BLOCK_TOKENS
    own_tokens = position - own * BLOCK_TOKENS + 1
    j = tl.arange(0, TOPK_POW2)
    ids = tl.load(topk_ptr + (head * num_rows + row) * TOPK + j, mask=j < TOPK, other=-1)
    selected = ids >= 0
    is_own = selected & (ids == own)  # the last selected id when present (ascending, none past own)
    n_full = tl.sum((selected & ~is_own).to(tl.int32), axis=0)
    own_selected = tl.sum(is_own.to(tl.int32), axis=0) > 0
    # expand slot j (block ids[j]) to its pages: [slot j, page i]
    i = tl.arange(0, PPB_POW2)
    page_used = selected[:, None] & (i[None, :] < PPB)
    page_used = page_used & (~is_own[:, None] | (i[None, :] * PAGE_SIZE < own_tokens))
    logical = ids[:, None].to(tl.int64) * PPB + i[None, :]
    physical = tl.load(block_table_ptr + request * table_stride + logical, mask=page_used, other=0)
    folded = tl.where(page_used, physical.to(tl.int64) * num_kv_heads + head, 0).to(tl.int32)
    out_row = tables_ptr + (row * num_kv_heads + head) * (TOPK * PPB)
    tl.store(out_row + j[:, None] * PPB + i[None, :], folded, mask=(j[:, None] < TOPK) & (i[None, :] < PPB))
    length = n_full * BLOCK_TOKENS + tl.where(own_selected, own_tokens, 0)
    tl.store(context_lens_ptr + row * num_kv_heads + head, length.to(tl.int32))


def build_sparse_tables(topk_blocks, block_table, row_request, row_position, *, num_kv_heads, pages_per_block):
    # topk_blocks [nkv, R, topk] i32 ascending, -1 padded; block_table [B, W] i32 page ids; row_* [R] i32
    # ---- validate (launch invariants)
    nkv, rows, topk = topk_blocks.shape
    expect(nkv == num_kv_heads, "topk_blocks.shape[0]", f"num_kv_heads = {num_kv_heads}", nkv)
    # compile-time sizes stay bounded even under check=False (host-side, no sync)
    expect(topk <= MAX_TOPK, "topk_blocks.shape[2] (topk)", f"<= {MAX_TOPK}", topk)
    expect(1 <= pages_per_block <= MAX_PAGES_PER_BLOCK, "pages_per_block", f"in [1, {MAX_PAGES_PER_BLOCK}]",
           pages_per_block)
    for name, tensor in (("topk_blocks", topk_blocks), ("block_table", block_table), ("row_request", row_request),
                         ("row_position", row_position)):
        expect_contiguous(tensor, name)  # read by pointer with unit strides (block_table rows by its row stride)
    # ---- flatten / allocate
    ppb = pages_per_block
    device = topk_blocks.device
    tables = torch.empty(rows * nkv, topk * ppb, dtype=torch.int32, device=device)
    context_lens = torch.empty(rows * nkv, dtype=torch.int32, device=device)
    # ---- early return
    if rows == 0 or nkv == 0:
        return tables, context_lens
    if topk == 0:
        return tables, context_lens.zero_()
    # ---- tuning: tiny per-row work; one warp
    # ---- launch
    launcher(_sparse_tables_kernel)[(rows, nkv)](
        topk_blocks, block_table, row_request, row_position, tables, context_lens,
        rows, nkv, block_table.stride(0),
        TOPK=topk, TOPK_POW2=pow2_at_least(topk), PPB=ppb, PPB_POW2=pow2_at_least(ppb),
        num_warps=1, **FUSED,
    )
    return tables, context_lens
