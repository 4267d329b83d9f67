"""build_sparse_tables (DESIGN §5) against the rule written out per row.

Row ``r*nkv + h``: selected full blocks ascending, the row's own partial block last; entries are folded physical
page ids ``page*nkv + h``; unused entries 0; ``context_lens = n_full*128 + (pos - own*128 + 1)`` when the own block
is selected, else ``n_selected*128``.
"""

from __future__ import annotations


import numpy as np
import pytest
import torch

import _helpers as H

from atom_mxfp4 import ops


def random_case(gen, lens, nkv, topk, rows_per_req=3, drop_own=0.3, empty_rows=1):
    """Random but valid top-k sets (ascending, -1 padded, blocks <= own) for rows of requests of ``lens``."""
    B = len(lens)
    max_blocks = max((n + 127) // 128 for n in lens)
    pool = torch.randperm(B * max_blocks + 5, generator=gen)[:B * max_blocks].to(torch.int32)
    block_table = pool.reshape(B, max_blocks).contiguous()
    req, pos = [], []
    for r, n in enumerate(lens):
        for _ in range(rows_per_req):
            req.append(r)
            pos.append(int(torch.randint(0, n, (1,), generator=gen)))
        req.append(r)
        pos.append(n - 1)
    R = len(req)
    tk = torch.full((nkv, R, topk), -1, dtype=torch.int32)
    for r in range(R):
        own = pos[r] // 128
        for h in range(nkv):
            if r < empty_rows:
                continue  # a row with nothing selected: context 0
            k = int(torch.randint(1, min(topk, own + 1) + 1, (1,), generator=gen))
            sel = sorted(torch.randperm(own + 1, generator=gen)[:k].tolist())
            if own not in sel and float(torch.rand(1, generator=gen)) > drop_own:
                sel = sorted(sel[1:] + [own]) if len(sel) == topk else sorted(sel + [own])
            tk[h, r, :len(sel)] = torch.tensor(sel, dtype=torch.int32)
    return tk, block_table, torch.tensor(req, dtype=torch.int32), torch.tensor(pos, dtype=torch.int32)


def check(tk, block_table, row_request, row_position, nkv, backend):
    tables, lens = ops.build_sparse_tables(tk, block_table, row_request, row_position, num_kv_heads=nkv,
                                           backend=backend)
    want_t, want_l = H.reference_tables(tk, block_table, row_request, row_position, nkv)
    assert tables.dtype == torch.int32 and lens.dtype == torch.int32
    assert tuple(tables.shape) == want_t.shape and tuple(lens.shape) == want_l.shape
    assert np.array_equal(lens.numpy(), want_l), np.argwhere(lens.numpy() != want_l)[:5].tolist()
    bad = np.argwhere(tables.numpy() != want_t)
    assert len(bad) == 0, (f"row {bad[0][0]}: got {tables[bad[0][0]].tolist()}, want {want_t[bad[0][0]].tolist()}")
    return tables, lens


@pytest.mark.parametrize("backend", H.backends_here(large_shapes=True))
@pytest.mark.parametrize("nkv", [1, 4])
@pytest.mark.parametrize("topk", [1, 4, 16])
def test_batch17_random_selections(backend, nkv, topk):
    gen = torch.Generator().manual_seed(nkv * 100 + topk)
    lens = [1, 97, 128, 129, 2049, 255, 256, 257, 3, 640, 1000, 131, 384, 129, 64, 1536, 700]
    check(*random_case(gen, lens, nkv, topk), nkv, backend)


@pytest.mark.parametrize("backend", H.backends_here(large_shapes=True))
def test_batch1_hand_case(backend):
    # one request of 600 tokens, pages [9, 4, 7, 2, 5]; row at position 550 (own block 4, offset 38)
    bt = torch.tensor([[9, 4, 7, 2, 5]], dtype=torch.int32)
    tk = torch.tensor([[[0, 2, 4, -1]], [[1, 3, -1, -1]]], dtype=torch.int32)  # nkv = 2
    req = torch.tensor([0], dtype=torch.int32)
    pos = torch.tensor([550], dtype=torch.int32)
    tables, lens = check(tk, bt, req, pos, 2, backend)
    # head 0: full blocks 0, 2 then own block 4; folded ids page*2 + 0
    assert tables[0].tolist() == [18, 14, 10, 0] and lens[0].item() == 2 * 128 + 39
    # head 1: own block not selected: two full blocks, ids page*2 + 1
    assert tables[1].tolist() == [9, 5, 0, 0] and lens[1].item() == 256


@pytest.mark.parametrize("backend", H.backends_here(large_shapes=True))
def test_own_block_listed_last_and_empty_row(backend):
    bt = torch.tensor([[3, 1, 4, 2]], dtype=torch.int32)
    tk = torch.tensor([[[0, 1, 2], [-1, -1, -1], [0, -1, -1]]], dtype=torch.int32)
    req = torch.zeros(3, dtype=torch.int32)
    pos = torch.tensor([300, 400, 0], dtype=torch.int32)  # own blocks 2, 3, 0
    tables, lens = check(tk, bt, req, pos, 1, backend)
    assert tables[0].tolist() == [3, 1, 4]  # full 0 (page 3), full 1 (page 1), own 2 (page 4) last
    assert lens[0].item() == 2 * 128 + (300 - 256 + 1)
    assert tables[1].tolist() == [0, 0, 0] and lens[1].item() == 0  # nothing selected: context 0
    assert tables[2].tolist() == [3, 0, 0] and lens[2].item() == 1  # position 0: one token


@pytest.mark.parametrize("backend", H.backends_here(large_shapes=True))
def test_pages_per_block_2_token_mapping(backend):
    # blocks of 256 tokens = 2 pages: token t of a row must live at page tables[r, t // 128] as DESIGN §5 says
    gen = torch.Generator().manual_seed(9)
    nkv, topk, ppb = 2, 3, 2
    lens = [700, 300, 1]
    B, max_pages = len(lens), 6
    block_table = torch.randperm(B * max_pages, generator=gen).to(torch.int32).reshape(B, max_pages).contiguous()
    req = torch.tensor([0, 0, 1, 2], dtype=torch.int32)
    pos = torch.tensor([699, 300, 299, 0], dtype=torch.int32)
    tk = torch.tensor([[[0, 1, 2], [0, 1, -1], [1, -1, -1], [0, -1, -1]],
                       [[2, -1, -1], [1, -1, -1], [0, 1, -1], [-1, -1, -1]]], dtype=torch.int32)
    tables, lens_out = ops.build_sparse_tables(tk, block_table, req, pos, num_kv_heads=nkv, pages_per_block=ppb,
                                               backend=backend)
    assert tables.shape == (4 * nkv, topk * ppb)
    bt = block_table.tolist()
    blk = 128 * ppb
    for r in range(4):
        own = int(pos[r]) // blk
        for h in range(nkv):
            sel = [b for b in tk[h, r].tolist() if b >= 0]
            order = sorted(b for b in sel if b != own) + ([own] if own in sel else [])
            want_len = (len(order) - (own in sel)) * blk + ((int(pos[r]) - own * blk + 1) if own in sel else 0)
            assert lens_out[r * nkv + h].item() == want_len, (r, h)
            for t in range(want_len):  # virtual token t -> request position order[t // blk] * blk + t % blk
                p = order[t // blk] * blk + t % blk
                assert tables[r * nkv + h, t // 128].item() == bt[int(req[r])][p // 128] * nkv + h, (r, h, t)
