"""Dense layers' prefill as flash attention over the dequantized prefix (``LayerConfig.flash_prefill_rows``).

``ops.attend`` runs every new token as one decode row: each row decodes its whole prefix from MXFP4 on its own, so a
prefill chunk of n rows over L tokens decodes n x L cached tokens where a tiled kernel would decode L. For a segment
of at least ``flash_prefill_rows`` consecutive new tokens of one request (``AttentionMetadata.segments``) a dense
layer instead dequantizes the request's L = prefix + n tokens once (exact in bf16: an e2m1 value times a power of two)
and runs torch's ``scaled_dot_product_attention``, causal from the bottom right (query i of the segment sees the
tokens up to ``prefix + i``): the work SGLang's own bf16 prefill does. Shorter segments (decode rows of a mixed batch)
keep the decode kernel. On a GPU only the flash and memory-efficient SDPA kernels are allowed, asked first whether
they take the tensors (a materialised mask of n x L would not fit a long prompt): one KV head per group first (GQA),
else K / V copied per query head, else the segment goes to the decode kernel.

The tokens attended are exactly the decode path's (a segment's L tokens are all its own, written before the
attention), so both agree to bf16 rounding (tests/test_prefill_flash.py against the fp64 oracle).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from .errors import expect, fail
from .layout import PAGE_SIZE

_FLASH_ONLY = None  # the SDPA backends allowed on a GPU (made on first use: torch.nn.attention imports lazily)


class Segment(NamedTuple):
    """Consecutive new tokens of one request: rows ``row .. row + rows - 1`` of the batch, at positions ``start ..
    start + rows - 1`` (``start``: the request's cached prefix), pages from ``block_table[request]``."""

    row: int
    rows: int
    request: int
    start: int


def segments_for(prefix_lens, new_lens) -> tuple[Segment, ...]:
    """The segments of a batch whose request b has ``new_lens[b]`` new tokens after ``prefix_lens[b]`` (rows in
    request order, as ``AttentionMetadata.for_requests`` and SGLang's extend batches lay them out)."""
    out, row = [], 0
    for b, (p, n) in enumerate(zip(prefix_lens, new_lens)):
        if n:
            out.append(Segment(row, int(n), b, int(p)))
        row += int(n)
    return tuple(out)


def longest(segments) -> int:
    """The most rows of one segment (0: none); reads ``s[1]``, so check_segments names a segment of another type."""
    return max((s[1] for s in segments), default=0)


def check_segments(segments, positions: torch.Tensor, token_request: torch.Tensor, block_table: torch.Tensor) -> None:
    """``segments`` describe the batch's rows: in row order, covering every row once, each row's request and position
    as ``token_request`` / ``positions`` say, inside ``block_table``. The values are compared on the device (one host
    sync: run once per batch, ``atom_mxfp4.checked.once``)."""
    expect(isinstance(segments, tuple), "meta.segments", "a tuple of prefill.Segment", type(segments).__name__,
           TypeError)
    row, capacity = 0, block_table.shape[1] * PAGE_SIZE
    for i, s in enumerate(segments):
        expect(isinstance(s, Segment), f"meta.segments[{i}]", "a prefill.Segment", type(s).__name__, TypeError)
        expect(s.row == row, f"meta.segments[{i}].row", f"{row} (the rows of the segments before it)", s.row)
        expect(s.rows >= 1, f"meta.segments[{i}].rows", ">= 1", s.rows)
        expect(0 <= s.request < block_table.shape[0], f"meta.segments[{i}].request",
               f"a row of block_table, in [0, {block_table.shape[0]})", s.request)
        expect(0 <= s.start and s.start + s.rows <= capacity, f"meta.segments[{i}].start + rows",
               f"in [0, {capacity}] (block_table's pages)", s.start + s.rows)
        row += s.rows
    expect(row == positions.shape[0], "meta.segments", f"{positions.shape[0]} rows in all (the batch's tokens)", row)
    if not segments:
        return
    want_pos = torch.cat([torch.arange(s.start, s.start + s.rows) for s in segments]).to(positions.device)
    want_req = torch.cat([torch.full((s.rows,), s.request) for s in segments]).to(token_request.device)
    wrong = (positions.long() != want_pos) | (token_request.long() != want_req)
    if bool(wrong.any()):
        t = int(wrong.nonzero()[0, 0])
        fail("meta.segments", "each row's request and position as token_request / positions give them",
             f"row {t}: request {int(want_req[t])}, position {int(want_pos[t])} in the segments, token_request "
             f"{int(token_request[t])}, positions {int(positions[t])}")


def _prefix(cache, block_table: torch.Tensor, seg: Segment, num_kv_heads: int, one_launch: bool) -> torch.Tensor:
    """The request's first ``start + rows`` tokens of ``cache`` as bf16 [nkv, L, 128]: in one Triton launch
    (``one_launch``: the layer runs the Hopper or Triton backend; ``kernels/triton/prefix``), else by torch ops (the
    same values)."""
    length = seg.start + seg.rows
    if one_launch:
        from .kernels.triton.prefix import dequantize_prefix

        return dequantize_prefix(cache.records, block_table[seg.request], num_kv_heads, length)
    from .kernels.torch.paged import read_pages

    pages = block_table[seg.request, : -(-length // PAGE_SIZE)].long()
    heads = torch.arange(num_kv_heads, device=pages.device)
    values = read_pages(cache.records, pages[None, :] * num_kv_heads + heads[:, None])  # [nkv, P, 128, 128] fp32
    return values.flatten(1, 2)[:, :length].to(torch.bfloat16)


def _kernel_for(q, k, v) -> bool:
    """On a GPU: whether torch's flash or memory-efficient SDPA kernel takes these tensors (asked before the call: a
    refused call would first build the n x L mask of the lower-right causal bias, 256 MiB at 8K x 32K, and warn)."""
    from torch.backends.cuda import SDPAParams, can_use_efficient_attention, can_use_flash_attention

    gqa = k.shape[1] != q.shape[1]
    try:
        params = SDPAParams(q, k, v, None, 0.0, q.shape[2] == k.shape[2], gqa)
    except TypeError:  # a torch whose SDPAParams takes other arguments: no SDPA here, the decode kernel runs it
        return False
    return can_use_flash_attention(params) or (not gqa and can_use_efficient_attention(params))


def _sdpa(q, k, v, scale: float) -> torch.Tensor | None:
    """q [H, G, n, D], k / v [H, 1 or G, L, D] (L >= n): causal from the bottom right; one K/V head serves the G
    query heads of its group (GQA). None on a GPU where no flash / memory-efficient kernel takes them."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.bias import causal_lower_right

    global _FLASH_ONLY
    n, length = q.shape[2], k.shape[2]
    mask = None if n == length else causal_lower_right(n, length)

    def call():
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None,
                                                                scale=scale, enable_gqa=k.shape[1] != q.shape[1])
    if not q.is_cuda:
        return call()
    if not _kernel_for(q, k, v):
        return None
    if _FLASH_ONLY is None:
        _FLASH_ONLY = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]
    with sdpa_kernel(_FLASH_ONLY):
        return call()


def attend_dense(out: torch.Tensor, q: torch.Tensor, k_cache, v_cache, block_table: torch.Tensor,
                 token_request: torch.Tensor, row_position: torch.Tensor, segments, *, num_kv_heads: int,
                 softmax_scale: float, min_rows: int, decode, backend: str = "torch") -> None:
    """A dense layer's attention of the batch's rows: segments of at least ``min_rows`` rows by SDPA over their
    dequantized prefix, the other rows by ``decode(first_token, end_token)`` (the layer's ``ops.attend`` of those
    rows). out / q [T * nkv, G, 128] bf16 (row = token * nkv + head), as ``ops.attend`` takes them; unchecked (the
    layer validated the step and ``check_segments`` the segments). ``backend``: the layer's (resolved); on Hopper and
    Triton the prefix is dequantized in one launch."""
    tokens = token_request.shape[0]
    group, dim = q.shape[1], q.shape[2]
    q_t = q.view(tokens, num_kv_heads, group, dim)
    out_t = out.view(tokens, num_kv_heads, group, dim)
    pending = None  # [first, end): adjacent rows left to the decode kernel, launched as one range
    one_launch = backend in ("hopper", "triton")
    for seg in segments:
        if seg.rows >= min_rows:
            k = _prefix(k_cache, block_table, seg, num_kv_heads, one_launch)[:, None]  # [nkv, 1, L, D]
            v = _prefix(v_cache, block_table, seg, num_kv_heads, one_launch)[:, None]
            query = q_t[seg.row: seg.row + seg.rows].permute(1, 2, 0, 3)  # [nkv, G, n, D]
            result = None
            for heads in (1, group):  # GQA first; then K / V copied per query head; then the decode kernel
                try:
                    result = _sdpa(query, k.expand(-1, heads, -1, -1).contiguous(),
                                   v.expand(-1, heads, -1, -1).contiguous(), softmax_scale)
                except RuntimeError:  # a kernel said yes and then refused: the next form
                    result = None
                if result is not None:
                    break
            if result is not None:
                out_t[seg.row: seg.row + seg.rows] = result.permute(2, 0, 1, 3)
                continue
        first, end = seg.row, seg.row + seg.rows
        if pending is not None and pending[1] == first:
            pending = (pending[0], end)
            continue
        if pending is not None:
            decode(*pending)
        pending = (first, end)
    if pending is not None:
        decode(*pending)
