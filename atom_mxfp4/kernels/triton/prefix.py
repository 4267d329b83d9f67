"""One request's cached K or V as bf16, in one launch: what a dense layer's flash prefill attends (atom_mxfp4.prefill).

``dequantize_prefix(records, pages, num_kv_heads, length)`` -> bf16 [num_kv_heads, length, 128]: token ``t`` of head
``h`` is token ``t % 128`` of folded page ``pages[t // 128] * num_kv_heads + h``. The values are the exact dequantized
ones (an e2m1 value times a power of two is a bf16), the same bits as ``kernels/torch/paged.read_pages`` then a cast
to bf16 for every record a writer made; its torch form is about 20 small torch operations per cache, each issued by
Python while the GPU waits (docs/sglang.md: the flash step's time above SDPA alone was that host time).

Bytes moved: 68 B read and 256 B written per token and head (a 32K-token prompt, K and V: 21 MB, a few microseconds
of HBM time), so one launch of a few host microseconds is all it should cost.
"""

import torch
import triton
import triton.language as tl

from atom_mxfp4.launch import cdiv, launcher

from ._mxfp4 import HEAD_DIM, PAGE_SIZE, RECORD_BYTES, decode_variant, load_tokens

BLOCK_N = 32  # tokens per program: a page is four programs


@triton.jit(do_not_specialize=("length",))
def _dequantize_prefix_kernel(out_ptr, records_ptr, pages_ptr, length, num_kv_heads, BLOCK_N: tl.constexpr,
                              DECODE: tl.constexpr):
    page = tl.program_id(0)  # the page of the prefix
    head = tl.program_id(1)
    part = tl.program_id(2)  # which BLOCK_N tokens of the page
    token = part * BLOCK_N + tl.arange(0, BLOCK_N)  # in the page
    position = page * PAGE_SIZE + token  # in the prefix
    mask = position < length
    folded = tl.load(pages_ptr + page).to(tl.int64) * num_kv_heads + head
    values = load_tokens(records_ptr + folded * RECORD_BYTES, token, mask, BLOCK_N, True, DECODE)
    rows = (head.to(tl.int64) * length + position)[:, None] * HEAD_DIM
    tl.store(out_ptr + rows + tl.arange(0, HEAD_DIM)[None, :], values, mask=mask[:, None])


def dequantize_prefix(records: torch.Tensor, pages: torch.Tensor, num_kv_heads: int, length: int) -> torch.Tensor:
    """records [pages, num_kv_heads, 8704] uint8 (contiguous); pages [>= ceil(length / 128)] int32 / int64 page ids
    (the request's block-table row) -> bf16 [num_kv_heads, length, 128]. Unchecked: the caller (the layer's flash
    prefill) passes its own validated block table and a length inside it."""
    out = torch.empty(num_kv_heads, length, HEAD_DIM, dtype=torch.bfloat16, device=records.device)
    used = cdiv(length, int(PAGE_SIZE))
    if used:
        launcher(_dequantize_prefix_kernel)[(used, num_kv_heads, int(PAGE_SIZE) // BLOCK_N)](
            out, records, pages, length, num_kv_heads, BLOCK_N=BLOCK_N, DECODE=decode_variant(True).value)
    return out
