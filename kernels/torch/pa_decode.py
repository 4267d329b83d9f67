"""pa_decode, torch reference: paged attention of one query token per row over MXFP4 K/V.

Token t of row r is at folded page ``tables[r, t // 128]``, offset ``t % 128``. Tokens t >= context_lens[r] are
never used, whatever their bytes (NaN, Inf, scale 255): they are masked before any arithmetic touches the output.
``context_lens[r] == 0`` writes zeros. Softmax in fp32.
"""

import torch

from atom_mxfp4.cache import PAGE_SIZE

from .paged import read_pages

TOKENS_PER_CHUNK = 1 << 18  # rows x table tokens dequantized at once (bounds memory)


def make_plan(num_rows, max_table_width, group, device):
    """The torch backend needs no workspace."""
    return None


def pa_decode(out, q, k_cache, v_cache, tables, context_lens, *, softmax_scale, query_scale, plan):
    # out [R, G, D] bf16; q [R, G, D] bf16|e4m3; tables [R, W] i32; context_lens [R] i32
    num_rows, width = tables.shape
    rows_per_chunk = max(1, TOKENS_PER_CHUNK // max(1, width * PAGE_SIZE))
    for start in range(0, num_rows, rows_per_chunk):
        rows = slice(start, start + rows_per_chunk)
        lens = context_lens[rows].long()
        page_used = torch.arange(width, device=tables.device) * PAGE_SIZE < lens[:, None]
        pages = torch.where(page_used, tables[rows].long(), 0)  # unused entries are never read
        valid = torch.arange(width * PAGE_SIZE, device=tables.device) < lens[:, None]  # [n, W*128]
        keys = read_pages(k_cache, pages).flatten(1, 2)  # [n, W*128, D]
        values = read_pages(v_cache, pages).flatten(1, 2)
        keys = torch.where(valid[..., None], keys, 0.0)
        values = torch.where(valid[..., None], values, 0.0)

        query = q[rows].float()
        if query_scale is not None:
            scale = query_scale[rows] if isinstance(query_scale, torch.Tensor) else query_scale
            query = query * (scale[:, None, None] if isinstance(scale, torch.Tensor) else scale)
        logits = torch.einsum("ngd,ntd->ngt", query, keys) * softmax_scale
        logits = torch.where(valid[:, None, :], logits, float("-inf"))
        probs = torch.softmax(logits, dim=-1)
        probs = torch.where(lens[:, None, None] > 0, probs, 0.0)  # empty rows: softmax of nothing is NaN
        out[rows] = torch.einsum("ngt,ntd->ngd", probs, values).to(out.dtype)
    return out
