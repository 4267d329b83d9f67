"""A decode batch's metadata from a request-to-token map, in torch ops: the twin of kernels/triton/decode_metadata.py
(its docstring says what is filled), used by the SGLang backend where the Triton kernel does not run (the CPU, the
torch kernel backend, and a GPU until the kernel is asked for) and by its extend batches' block table (``page_table``,
``slots``). Few ops (six or seven per batch): on a GPU each eager op is host time of every decode batch."""

import torch

from atom_mxfp4.errors import expect
from atom_mxfp4.layout import NO_SLOT, PAGE_SIZE


def decode_metadata(seq_lens, out_cache_loc, req_pool_indices, req_to_token, positions, slot_mapping, block_table,
                    padding_slot: int = 0) -> None:
    """Fill ``positions``, ``slot_mapping`` and ``block_table`` in place (static-shape ops: CUDA-graph safe). The
    vectors must be as long as the block table has rows (the ``out=`` ops would resize a buffer silently)."""
    rows = block_table.shape[0]
    vectors = (("seq_lens", seq_lens), ("out_cache_loc", out_cache_loc), ("req_pool_indices", req_pool_indices),
               ("positions", positions), ("slot_mapping", slot_mapping))
    if not all([t.dim() == 1 and t.shape[0] == rows for _, t in vectors]):
        for name, t in vectors:
            expect(t.dim() == 1 and t.shape[0] == rows, f"{name}.shape", f"[{rows}] (block_table's rows)",
                   list(t.shape))
    torch.sub(seq_lens, 1, out=positions)
    slot_mapping.copy_(out_cache_loc)
    slot_mapping.masked_fill_(slot_mapping == padding_slot, NO_SLOT)
    pages = _page_rows(req_to_token, req_pool_indices, block_table.shape[1])
    if pages.dtype == block_table.dtype:
        torch.floor_divide(pages, PAGE_SIZE, out=block_table)
    else:
        block_table.copy_(pages // PAGE_SIZE)


def slots(out_cache_loc, padding_slot: int = 0) -> torch.Tensor:
    """[T] i64: the runner's slots, its padding slot as NO_SLOT (-1: nothing written)."""
    loc = out_cache_loc.long()
    return loc.masked_fill(loc == padding_slot, NO_SLOT)


def page_table(req_to_token, req_pool_indices, pages: int) -> torch.Tensor:
    """[B, pages] i32: the page of each request's token ``128 p`` (``req_to_token[request, 128 p] // 128``)."""
    return (_page_rows(req_to_token, req_pool_indices, pages) // PAGE_SIZE).to(torch.int32)


def _page_rows(req_to_token, req_pool_indices, pages: int) -> torch.Tensor:
    """[B, pages]: ``req_to_token[request, 128 p]``, the map's every 128th column (a view) gathered for the batch's
    requests: one op, reading only those entries."""
    expect(pages == 0 or req_to_token.shape[1] > (pages - 1) * PAGE_SIZE, "req_to_token.shape[1]",
           f"> {(pages - 1) * PAGE_SIZE} (the first token of each of the table's {pages} pages)",
           req_to_token.shape[1])
    return req_to_token[:, ::PAGE_SIZE][:, :pages].index_select(0, req_pool_indices)
