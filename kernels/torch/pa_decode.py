"""pa_decode, torch reference: paged attention of one query token per row over MXFP4 K/V.

Token t of row r is at folded page ``tables[r, t // 128]``, offset ``t % 128``. Tokens t >= context_lens[r] are
never used, whatever their bytes (NaN, Inf, scale 255): their logits are replaced by -inf and their values by 0
before they meet the output. ``context_lens[r] == 0`` writes zeros. Softmax in fp32.

Each distinct page of a chunk of rows is dequantized once. When the rows share their pages (prefill rows of
one request), logits are one GEMM against those pages and are then gathered per row; otherwise (decode rows,
disjoint pages) each row's pages are gathered and multiplied row by row.
"""

import torch

from atom_mxfp4.cache import PAGE_SIZE

from .paged import read_pages

ELEMENTS_PER_CHUNK = 1 << 25  # bounds the largest temporary (fp32 elements)


def make_plan(num_rows, max_table_width, group, device):
    """The torch backend needs no workspace."""
    return None


def _attend_rows(query, keys, values, valid):
    """query [n, G, D]; keys / values [n, T, D] (values finite); valid [n, T] -> out [n, G, D] fp32."""
    logits = torch.einsum("ngd,ntd->ngt", query, keys)
    logits = torch.where(valid[:, None, :], logits, float("-inf"))
    probs = torch.softmax(logits, dim=-1).nan_to_num_(0.0)  # a row with no valid token: 0
    return torch.einsum("ngt,ntd->ngd", probs, values)


def _attend_shared(query, page_keys, page_values, inverse, valid):
    """Rows sharing U pages. page_keys / page_values [U, 128, D]; inverse [n, W] (row entry -> page index)."""
    n, group, _ = query.shape
    pages = page_keys.shape[0]
    logits = (query.reshape(n * group, -1) @ page_keys.flatten(0, 1).T).view(n, group, pages, PAGE_SIZE)
    index = inverse[:, None, :, None].expand(n, group, inverse.shape[1], PAGE_SIZE)
    logits = torch.gather(logits, 2, index).flatten(2)  # [n, G, W*128] in the row's token order
    logits = torch.where(valid[:, None, :], logits, float("-inf"))
    probs = torch.softmax(logits, dim=-1).nan_to_num_(0.0).view_as(index)
    per_page = torch.zeros(n, group, pages, PAGE_SIZE, dtype=probs.dtype, device=probs.device)
    per_page.scatter_add_(2, index, probs)  # back to page order (a page listed twice adds zeros)
    return (per_page.view(n * group, -1) @ page_values.flatten(0, 1)).view(n, group, -1)


def pa_decode(out, q, k_cache, v_cache, tables, context_lens, *, softmax_scale, query_scale, plan):
    # out [R, G, D] bf16; q [R, G, D] bf16|e4m3; tables [R, W] i32; context_lens [R] i32
    num_rows, width = tables.shape
    group = q.shape[1]
    rows_per_chunk = max(1, ELEMENTS_PER_CHUNK // max(1, width * PAGE_SIZE * group))  # logits [n, G, W*128]
    rows_per_gather = max(1, ELEMENTS_PER_CHUNK // max(1, width * PAGE_SIZE * q.shape[2]))  # keys [n, W*128, D]
    for start in range(0, num_rows, rows_per_chunk):
        rows = slice(start, start + rows_per_chunk)
        lens = context_lens[rows].long()
        page_used = torch.arange(width, device=tables.device) * PAGE_SIZE < lens[:, None]
        pages = torch.where(page_used, tables[rows].long(), 0)  # unused entries are never read
        valid = torch.arange(width * PAGE_SIZE, device=tables.device) < lens[:, None]  # [n, W*128]
        unique_pages, inverse = torch.unique(pages, return_inverse=True)
        page_keys = read_pages(k_cache, unique_pages)  # [U, 128, D]
        # garbage of unowned tokens must not survive 0 * x in P @ V: non-finite values become 0
        page_values = read_pages(v_cache, unique_pages).nan_to_num_(0.0, 0.0, 0.0)

        query = q[rows].float() * softmax_scale
        if query_scale is not None:
            scale = query_scale[rows][:, None, None] if isinstance(query_scale, torch.Tensor) else query_scale
            query = query * scale
        if unique_pages.numel() <= 2 * width:
            result = _attend_shared(query, page_keys, page_values, inverse, valid)
        else:
            result = torch.cat([
                _attend_rows(query[i : i + rows_per_gather], page_keys[inverse[i : i + rows_per_gather]].flatten(1, 2),
                             page_values[inverse[i : i + rows_per_gather]].flatten(1, 2), valid[i : i + rows_per_gather])
                for i in range(0, query.shape[0], rows_per_gather)])
        out[rows] = result.to(out.dtype)
    return out
