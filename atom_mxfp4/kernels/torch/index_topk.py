"""index_topk, torch reference: score every KV block with the index query, force init/local blocks, keep top-k.

``score[h, r, b] = max_{p in block b, p <= row_position[r]} idx_q[r, h] . idx_k[p]`` (dequantized, fp32; a NaN
product sum counts as -inf). Blocks rank by score; forced blocks rank above every score, +inf included (init
blocks above local ones, each kind tied, ties to the smaller id). Output padding is -1.
"""

import torch

from atom_mxfp4.layout import INIT_KEY, LOCAL_KEY, NO_BLOCK, PAGE_SIZE  # forced-block rank keys: above +inf's

from atom_mxfp4.index_k import IndexKDtype

from .paged import read_fp8_pages, read_pages

ROW_CHUNK = 1024  # rows scored at once (bounds the [rows, heads, tokens] score tensor)


def rank_keys(scores: torch.Tensor) -> torch.Tensor:
    """fp32 scores (no NaN) -> int64 keys in the order of the scores (-0.0 ties +0.0)."""
    bits = (scores + 0.0).view(torch.int32).long()
    return torch.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)


def select_blocks(scores: torch.Tensor, own_block: torch.Tensor, topk: int, init_blocks: int,
                  local_blocks: int) -> torch.Tensor:
    """scores [rows, heads, nblocks] fp32 (blocks past own_block are ignored) -> ids [rows, heads, topk] int32.

    Keeps the ``min(topk, own_block + 1)`` best, ties to the smaller block id, ascending, padded with -1.
    """
    rows, _, nblocks = scores.shape
    block = torch.arange(nblocks, device=scores.device)
    own = own_block[:, None, None].long()
    keys = rank_keys(scores)
    keys = torch.where(block >= own - local_blocks + 1, LOCAL_KEY, keys)
    keys = torch.where(block < init_blocks, INIT_KEY, keys)
    keys = torch.where(block > own, torch.iinfo(torch.int64).min, keys)
    order = torch.sort(keys, dim=-1, descending=True, stable=True).indices  # stable: ties keep smaller id first
    width = min(topk, nblocks)
    chosen = order[..., :width]
    keep = torch.arange(width, device=scores.device) < torch.clamp(own + 1, max=topk)
    chosen = torch.where(keep, chosen, torch.full_like(chosen, nblocks))  # padding sorts last
    chosen = torch.sort(chosen, dim=-1).values
    out = torch.full((rows, scores.shape[1], topk), NO_BLOCK, dtype=torch.int32, device=scores.device)
    out[..., :width] = torch.where(chosen == nblocks, NO_BLOCK, chosen).to(torch.int32)
    return out


def index_topk(idx_q, index_k_cache, block_table, row_request, row_position, *, topk, init_blocks, local_blocks,
               index_k_dtype=IndexKDtype.MXFP4, tile_rows=None):
    # idx_q [R, H, D]; index_k_cache [pages, 1, 8704] (mxfp4) or [pages, 1, 16896] (fp8); block_table [B, max_blocks]
    # i32; row_* [R] i32; tile_rows: a kernel's launch shape (the ids are the same): each request's rows are one
    # problem here already
    read = read_fp8_pages if IndexKDtype.parse(index_k_dtype) is IndexKDtype.FP8 else read_pages
    num_rows, num_heads, _ = idx_q.shape
    out = torch.full((num_heads, num_rows, topk), -1, dtype=torch.int32, device=idx_q.device)
    for request in torch.unique(row_request).tolist():
        rows = torch.nonzero(row_request == request).flatten()
        num_tokens = int(row_position[rows].max()) + 1
        num_blocks = -(-num_tokens // PAGE_SIZE)
        keys = read(index_k_cache, block_table[request, :num_blocks]).reshape(-1, idx_q.shape[-1])
        for start in range(0, rows.numel(), ROW_CHUNK):
            chunk = rows[start : start + ROW_CHUNK]
            position = row_position[chunk].long()
            scores = torch.einsum("rhd,td->rht", idx_q[chunk].float(), keys)  # [rows, H, tokens]
            causal = torch.arange(keys.shape[0], device=keys.device) <= position[:, None, None]
            scores = torch.where(causal & ~scores.isnan(), scores, float("-inf"))  # NaN never wins a block's max
            scores = scores.view(chunk.numel(), num_heads, num_blocks, PAGE_SIZE).amax(-1)
            ids = select_blocks(scores, position // PAGE_SIZE, topk, init_blocks, local_blocks)
            out[:, chunk] = ids.transpose(0, 1)
    return out
