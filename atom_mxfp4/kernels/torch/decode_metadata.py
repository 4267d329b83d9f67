"""A decode batch's metadata from a request-to-token map, in torch ops: the twin of kernels/triton/decode_metadata.py
(its docstring says what is filled), used by the SGLang backend where the Triton kernel does not run (the CPU, the
torch kernel backend) and by its extend batches' block table (``page_table``, ``slots``)."""

import torch

from atom_mxfp4.layout import NO_SLOT, PAGE_SIZE


def decode_metadata(seq_lens, out_cache_loc, req_pool_indices, req_to_token, positions, slot_mapping, block_table,
                    padding_slot: int = 0) -> None:
    """Fill ``positions``, ``slot_mapping`` and ``block_table`` in place (static-shape ops: CUDA-graph safe)."""
    positions.copy_(seq_lens.long() - 1)
    slot_mapping.copy_(slots(out_cache_loc, padding_slot))
    block_table.copy_(page_table(req_to_token, req_pool_indices, block_table.shape[1]))


def slots(out_cache_loc, padding_slot: int = 0) -> torch.Tensor:
    """[T] i64: the runner's slots, its padding slot as NO_SLOT (-1: nothing written)."""
    loc = out_cache_loc.long()
    return loc.masked_fill(loc == padding_slot, NO_SLOT)


def page_table(req_to_token, req_pool_indices, pages: int) -> torch.Tensor:
    """[B, pages] i32: the page of each request's token ``128 p`` (``req_to_token[request, 128 p] // 128``)."""
    cols = torch.arange(pages, device=req_to_token.device) * PAGE_SIZE
    return (req_to_token[req_pool_indices.long()][:, cols] // PAGE_SIZE).to(torch.int32)
