"""A decode batch's metadata from a request-to-token map, in one launch (the SGLang backend's decode step, issue 39).

Per row ``b`` of the batch: ``positions[b] = seq_lens[b] - 1``; ``slot_mapping[b] = out_cache_loc[b]``, or NO_SLOT
(-1) where it is ``padding_slot`` (the runner's slot for padded rows: nothing written); ``block_table[b, p] =
req_to_token[req_pool_indices[b], 128 p] >> 7`` for every ``p < block_table.shape[1]`` (the page holding the
request's token ``128 p``; entries past the request's length are whatever the map holds there, never read).

The torch twin (kernels/torch/decode_metadata.py) is the same values from torch ops, six launches and as many
Python calls on the host of an eager step; here one pre-bound launch (``atom_mxfp4.launch``), static shapes, no
sync: inside a CUDA graph it is captured like the attention after it. Bit-exact to the twin (tests/
test_decode_metadata.py): integer copies, a shift for the floor division by 128.
"""

import torch
import triton
import triton.language as tl

from atom_mxfp4.errors import expect
from atom_mxfp4.launch import cdiv, launcher
from atom_mxfp4.layout import NO_SLOT, PAGE_SIZE

from ._options import FUSED

PAGES_PER_PROGRAM = 256
_NO_SLOT = tl.constexpr(NO_SLOT)
PAGE_SHIFT = PAGE_SIZE.bit_length() - 1  # 7: token id >> 7 = its page (a floor division, as torch's // on ints)


@triton.jit
def _decode_metadata_kernel(seq_lens_ptr, out_cache_loc_ptr, req_pool_ptr, req_to_token_ptr, positions_ptr,
                            slot_mapping_ptr, block_table_ptr, map_stride, max_pages, table_stride, padding_slot,
                            PAGES: tl.constexpr, SHIFT: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    if chunk == 0:
        tl.store(positions_ptr + row, tl.load(seq_lens_ptr + row).to(tl.int64) - 1)
        loc = tl.load(out_cache_loc_ptr + row).to(tl.int64)
        tl.store(slot_mapping_ptr + row, tl.where(loc == padding_slot, _NO_SLOT, loc))
    request = tl.load(req_pool_ptr + row).to(tl.int64)
    page = chunk * PAGES + tl.arange(0, PAGES)
    inside = page < max_pages
    token = tl.load(req_to_token_ptr + request * map_stride + page.to(tl.int64) * (1 << SHIFT), mask=inside)
    tl.store(block_table_ptr + row * table_stride + page, (token >> SHIFT).to(tl.int32), mask=inside)


def decode_metadata(seq_lens, out_cache_loc, req_pool_indices, req_to_token, positions, slot_mapping, block_table,
                    padding_slot: int = 0) -> None:
    """Fill ``positions`` [B] i64, ``slot_mapping`` [B] i64 and ``block_table`` [B, P] i32 (contiguous, in place)
    from ``seq_lens``, ``out_cache_loc``, ``req_pool_indices`` ([B] integers) and ``req_to_token`` [R, T] i32 (T >
    128 (P - 1): each page's first token inside a row); module docstring. The runner's own tensors: layouts
    checked, values not. Torch's version counters of the three outputs are bumped as an in-place torch op would
    (what remembers checks and derived tensors of the metadata keys on them: atom_mxfp4.checked, the layer's
    ``row_position``, the replayed steps)."""
    rows, pages = block_table.shape
    for name, t, dtype in (("positions", positions, torch.int64), ("slot_mapping", slot_mapping, torch.int64),
                           ("block_table", block_table, torch.int32), ("req_to_token", req_to_token, torch.int32)):
        expect(t.dtype == dtype, f"{name}.dtype", str(dtype), t.dtype, TypeError)
    for name, t in (("seq_lens", seq_lens), ("out_cache_loc", out_cache_loc), ("req_pool_indices", req_pool_indices)):
        expect(not t.is_floating_point() and not t.is_complex() and t.dtype != torch.bool, f"{name}.dtype",
               "an integer dtype", t.dtype, TypeError)
    for name, t in (("seq_lens", seq_lens), ("out_cache_loc", out_cache_loc), ("req_pool_indices", req_pool_indices),
                    ("positions", positions), ("slot_mapping", slot_mapping)):
        expect(t.dim() == 1 and t.shape[0] == rows and t.stride(0) == 1, name, f"a contiguous vector of {rows}",
               f"shape {list(t.shape)} stride {tuple(t.stride())}")
    expect(block_table.is_contiguous(), "block_table", "contiguous", f"strides {tuple(block_table.stride())}")
    expect(req_to_token.dim() == 2 and req_to_token.stride(1) == 1, "req_to_token", "[requests, tokens], rows "
           "contiguous", f"shape {list(req_to_token.shape)} strides {tuple(req_to_token.stride())}")
    # the last column read is token 128 (pages - 1): a map of context + a few tokens (SGLang's) reaches pages_for(it)
    expect(pages == 0 or req_to_token.shape[1] > (pages - 1) * PAGE_SIZE, "req_to_token.shape[1]",
           f"> {(pages - 1) * PAGE_SIZE} (block_table's {pages} pages start inside it)", req_to_token.shape[1])
    if rows == 0:
        return
    launcher(_decode_metadata_kernel)[(rows, max(1, cdiv(pages, PAGES_PER_PROGRAM)))](
        seq_lens, out_cache_loc, req_pool_indices, req_to_token, positions, slot_mapping, block_table,
        req_to_token.stride(0), pages, block_table.stride(0), padding_slot,
        PAGES=PAGES_PER_PROGRAM, SHIFT=PAGE_SHIFT, num_warps=4, **FUSED)
    for written in (positions, slot_mapping, block_table):  # host-side counters only: safe under graph capture
        _increment_version(written)


_increment_version = torch.autograd.graph.increment_version
