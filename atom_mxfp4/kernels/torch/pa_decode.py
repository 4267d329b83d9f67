"""pa_decode, torch reference: paged attention of one query token per row over MXFP4 K/V.

Token t of row r is at folded page ``tables[r, t // 128]``, offset ``t % 128``. Tokens t >= context_lens[r] are
never used, whatever their bytes (NaN, Inf, scale 255): their logits are replaced by -inf and their values by 0
before they meet the output. ``context_lens[r] == 0`` writes zeros. Softmax in fp32, base 2, on
``logits = (q . k) * scale`` with ``scale = fp32(softmax_scale * query_scale * log2(e))`` (a tensor query_scale
multiplies the fp32 ``softmax_scale * log2(e)`` per row): the kernels' order, so logits overflow alike.
Non-finite logits (docs/api.md): NaN or +inf at an attended token -> the head's row is NaN; -inf -> weight 0;
all -inf -> NaN.

Each distinct page of a chunk of rows is dequantized once. When the rows share their pages (prefill rows of
one request), logits are one GEMM against those pages and are then gathered per row; otherwise (decode rows,
disjoint pages) each row's pages are gathered and multiplied row by row.
"""

import math

import torch

from atom_mxfp4.layout import PAGE_SIZE
from atom_mxfp4.plan import DecodePlan, check_plan
from atom_mxfp4.registry import REFERENCE_BACKEND

from .paged import read_pages

ELEMENTS_PER_CHUNK = 1 << 25  # bounds the largest temporary (fp32 elements)
LOG2E = math.log2(math.e)


def make_plan(num_rows, max_table_width, group, device) -> DecodePlan:
    """The protocol's plan (atom_mxfp4.plan) with no workspace: the torch backend allocates per call."""
    return DecodePlan(REFERENCE_BACKEND, num_rows, max_table_width, group, device)


def _softmax2(logits, valid):
    """Base-2 softmax over the valid tokens. logits [n, G, T] fp32 (scaled); valid [n, T] -> probs [n, G, T].

    No valid token: 0. NaN or +inf logit (the max is then NaN or +inf): NaN. All valid logits -inf: NaN (0 / 0).
    -inf logits among finite ones: weight 0.
    """
    logits = torch.where(valid[:, None, :], logits, float("-inf"))
    top = logits.amax(-1, keepdim=True)  # NaN propagates
    top = torch.where(top == float("-inf"), 0.0, top)
    weights = torch.exp2(logits - top)
    total = weights.sum(-1, keepdim=True)
    empty = torch.where(valid.any(-1)[:, None, None], float("nan"), 0.0)
    return torch.where(total > 0, weights / torch.where(total > 0, total, 1.0), empty)


def _attend_rows(query, keys, values, valid, scale):
    """query [n, G, D]; keys / values [n, T, D] (values finite); valid [n, T]; scale [n, 1, 1] -> [n, G, D] fp32."""
    probs = _softmax2(torch.einsum("ngd,ntd->ngt", query, keys) * scale, valid)
    return torch.einsum("ngt,ntd->ngd", probs, values)


def _attend_shared(query, page_keys, page_values, inverse, valid, scale):
    """Rows sharing U pages. page_keys / page_values [U, 128, D]; inverse [n, W] (row entry -> page index)."""
    n, group, _ = query.shape
    pages = page_keys.shape[0]
    logits = (query.reshape(n * group, -1) @ page_keys.flatten(0, 1).T).view(n, group, pages, PAGE_SIZE)
    index = inverse[:, None, :, None].expand(n, group, inverse.shape[1], PAGE_SIZE)
    logits = torch.gather(logits, 2, index).flatten(2)  # [n, G, W*128] in the row's token order
    probs = _softmax2(logits * scale, valid).view_as(index)
    per_page = torch.zeros(n, group, pages, PAGE_SIZE, dtype=probs.dtype, device=probs.device)
    per_page.scatter_add_(2, index, probs)  # back to page order (a page listed twice adds zeros)
    return (per_page.view(n * group, -1) @ page_values.flatten(0, 1)).view(n, group, -1)


def pa_decode(out, q, k_cache, v_cache, tables, context_lens, *, softmax_scale, query_scale, plan):
    # out [R, G, D] bf16; q [R, G, D] bf16|e4m3; tables [R, W] i32; context_lens [R] i32
    num_rows, width = tables.shape
    group = q.shape[1]
    if plan is not None:  # refused as on every backend, though this one reads nothing from it
        check_plan(plan, backend=REFERENCE_BACKEND, rows=num_rows, width=width, group=group, device=q.device)
    if num_rows == 0 or width == 0:  # no token anywhere (context_lens are 0): zeros, as every backend
        out.zero_()
        return out
    rows_per_chunk = max(1, ELEMENTS_PER_CHUNK // max(1, width * PAGE_SIZE * group))  # logits [n, G, W*128]
    rows_per_gather = max(1, ELEMENTS_PER_CHUNK // max(1, width * PAGE_SIZE * q.shape[2]))  # keys [n, W*128, D]
    number = 1.0 if query_scale is None or isinstance(query_scale, torch.Tensor) else float(query_scale)
    logit_scale = float(softmax_scale) * number * LOG2E  # fp64 here, fp32 once in the tensor (as the kernels)
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

        query = q[rows].float()
        scale = torch.full((query.shape[0], 1, 1), logit_scale, dtype=torch.float32, device=query.device)
        if isinstance(query_scale, torch.Tensor):
            scale = scale * query_scale[rows][:, None, None]
        if unique_pages.numel() <= 2 * width:
            result = _attend_shared(query, page_keys, page_values, inverse, valid, scale)
        else:
            result = torch.cat([
                _attend_rows(query[i : i + rows_per_gather], page_keys[inverse[i : i + rows_per_gather]].flatten(1, 2),
                             page_values[inverse[i : i + rows_per_gather]].flatten(1, 2),
                             valid[i : i + rows_per_gather], scale[i : i + rows_per_gather])
                for i in range(0, query.shape[0], rows_per_gather)])
        out[rows] = result.to(out.dtype)
    return out
