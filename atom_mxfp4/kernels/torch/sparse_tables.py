"""build_sparse_tables, torch reference: each row's top-k blocks -> one-block-per-page table + context length.

Row ``r * nkv + h``: the selected full blocks first (ascending), the row's own partial block last; entries are
folded page ids ``page * nkv + h``; unused entries are 0 (never read by pa_decode).
``context_lens = n_full * block + (row_position - own_block * block + 1)`` if the own block is selected,
else ``n_selected * block``; block = 128 * pages_per_block tokens.
"""

import torch

from atom_mxfp4.layout import PAGE_SIZE


def build_sparse_tables(topk_blocks, block_table, row_request, row_position, *, num_kv_heads, pages_per_block):
    # topk_blocks [nkv, R, topk] i32 ascending, -1 padded
    nkv, num_rows, topk = topk_blocks.shape
    ppb, block_tokens = pages_per_block, PAGE_SIZE * pages_per_block
    device = topk_blocks.device
    blocks = topk_blocks.transpose(0, 1).long()  # [R, nkv, topk]
    position = row_position.long()[:, None, None]
    own = position // block_tokens
    selected = blocks >= 0
    is_own = selected & (blocks == own)
    is_full = selected & ~is_own
    # order: full blocks ascending, then the own block, then padding
    last = blocks.new_tensor(1 << 40)
    key = torch.where(is_full, blocks, torch.where(is_own, last, last + 1))
    ordered = torch.sort(key, dim=-1).values
    slot_is_own = ordered == last
    slot_used = ordered <= last
    block_id = torch.where(slot_is_own, own.expand_as(ordered), torch.where(slot_used, ordered, 0))

    # expand each block to its pages: [R, nkv, topk, ppb]
    own_tokens = position - own * block_tokens + 1  # tokens of the own block the row may see
    page_in_block = torch.arange(ppb, device=device)
    page_used = slot_used[..., None] & (~slot_is_own[..., None] | (page_in_block * PAGE_SIZE < own_tokens[..., None]))
    logical_page = block_id[..., None] * ppb + page_in_block
    logical_page = torch.where(page_used, logical_page, 0)
    request = row_request.long()[:, None, None, None]
    physical = block_table.long()[request, logical_page]
    head = torch.arange(nkv, device=device)[None, :, None, None]
    folded = torch.where(page_used, physical * nkv + head, 0)
    tables = folded.reshape(num_rows * nkv, topk * ppb).to(torch.int32)

    n_full = is_full.sum(-1)
    own_selected = is_own.any(-1)
    context_lens = n_full * block_tokens + torch.where(own_selected, own_tokens[..., 0], 0)
    return tables.contiguous(), context_lens.reshape(-1).to(torch.int32)
