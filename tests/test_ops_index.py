"""index_topk (DESIGN §5) against a per-row Python loop over dequantized index-K.

Scores are made exact in fp32 whatever the summation order: idx_q holds small integers (bf16-exact) and idx_k
holds e2m1 codes with scales 2**-2..2**2, so every product is a multiple of 2**-3 and every sum is far below
2**24 * 2**-3. That makes ties real ties, and a mismatch a bug rather than rounding.
"""

from __future__ import annotations


import numpy as np
import pytest
import torch

import _helpers as H

from atom_mxfp4 import ops
from atom_mxfp4.cache import MXFP4PageCache



def make_problem(lens, rows_at, niq=1, seed=0, extra_pages=3):
    """Index-K cache + block table for requests of ``lens`` tokens; rows at positions ``rows_at(req, len)``.

    Returns dict: records [P, 1, 8704] (garbage outside owned tokens), block_table [B, max_blocks] i32 (pages
    shuffled; padding entries point at a garbage page), row_request / row_position [R] i32, idx_q [R, niq, D] bf16,
    keys: list per request of fp64 [len, D] (the dequantized owned tokens).
    """
    gen = torch.Generator().manual_seed(seed)
    nblocks = [(n + 127) // 128 for n in lens]
    total = sum(nblocks) + extra_pages
    records = H.garbage_records(gen, total, 1)
    perm = torch.randperm(total, generator=gen).tolist()
    garbage_page = perm[-1]
    max_blocks = max(max(nblocks), 1)
    table = torch.full((len(lens), max_blocks), garbage_page, dtype=torch.int32)
    keys, used = [], 0
    for r, n in enumerate(lens):
        pages = perm[used:used + nblocks[r]]
        used += nblocks[r]
        table[r, :len(pages)] = torch.tensor(pages, dtype=torch.int32)
        data, scale = H.random_codes(gen, n, lo=125, hi=129)
        for t in range(n):
            H.put_token(records, pages[t // 128], 0, t % 128, data[t], scale[t])
        keys.append(H.np_dequantize(data, scale))
    return dict(records=records, block_table=table, keys=keys, **H.query_rows(lens, rows_at, niq, gen))


def reference_topk(prob, topk, init_blocks, local_blocks) -> np.ndarray:
    """[niq, R, topk] int32 by the rule of DESIGN §5, one row and head at a time."""
    q = prob["idx_q"].double().numpy()
    R, niq = q.shape[0], q.shape[1]
    out = np.full((niq, R, topk), -1, dtype=np.int32)
    for r in range(R):
        req, pos = int(prob["row_request"][r]), int(prob["row_position"][r])
        own = pos // 128
        keys = prob["keys"][req]
        for h in range(niq):
            rank = []  # forced blocks first (init, then local; each kind tied), then by score; ties to smaller id
            for b in range(own + 1):
                last = min(pos, b * 128 + 127)  # positions p <= row_position only
                s = float((keys[b * 128:last + 1] @ q[r, h]).max())
                level = 2 if b < init_blocks else 1 if b > own - local_blocks else 0
                rank.append((-level, 0.0 if level else -s))
            keep = min(topk, own + 1)
            best = sorted(range(own + 1), key=lambda b: (rank[b], b))[:keep]
            out[h, r, :keep] = sorted(best)
    return out


def run(prob, topk, init_blocks, local_blocks, backend, as_cache=False):
    cache = MXFP4PageCache(prob["records"].shape[0], 1, records=prob["records"]) if as_cache else prob["records"]
    return ops.index_topk(prob["idx_q"], cache, prob["block_table"], prob["row_request"], prob["row_position"],
                          topk=topk, init_blocks=init_blocks, local_blocks=local_blocks, backend=backend)


def check(prob, topk, init_blocks, local_blocks, backend, as_cache=False):
    got = run(prob, topk, init_blocks, local_blocks, backend, as_cache)
    want = reference_topk(prob, topk, init_blocks, local_blocks)
    assert got.dtype == torch.int32 and tuple(got.shape) == want.shape
    bad = np.argwhere(got.numpy() != want)
    assert len(bad) == 0, (f"{len(bad)} mismatches; first at [h, r, k] = {bad[0].tolist()}: row position "
                           f"{int(prob['row_position'][bad[0][1]])}, got {got[bad[0][0], bad[0][1]].tolist()}, "
                           f"want {want[bad[0][0], bad[0][1]].tolist()}")
    return got


def _rows_everywhere(r, n):
    """Row positions of a request of n tokens: first, block edges, a random middle, the last."""
    cand = {0, n - 1, min(n - 1, 127), min(n - 1, 128), min(n - 1, 255), (n * 7) // 11}
    return sorted(cand)


@pytest.mark.parametrize("backend", H.backends_here(large_shapes=True))
def test_batch1_long_context(backend):
    prob = make_problem([2049], _rows_everywhere, seed=1)
    got = check(prob, topk=16, init_blocks=0, local_blocks=1, backend=backend)
    # the row at position 2048 has 17 blocks: 16 kept, own block (16) always in (local)
    assert 16 in got[0, -1].tolist() and -1 not in got[0, -1].tolist()


@pytest.mark.parametrize("backend", H.backends_here(large_shapes=True))
@pytest.mark.parametrize("niq", [1, 2])
def test_batch17_irregular(backend, niq):
    lens = [1, 97, 128, 129, 2049, 255, 256, 257, 3, 640, 1000, 131, 384, 129, 64, 1536, 700]
    prob = make_problem(lens, _rows_everywhere, niq=niq, seed=2 + niq)
    check(prob, topk=4, init_blocks=1, local_blocks=2, backend=backend)
    check(prob, topk=16, init_blocks=0, local_blocks=1, backend=backend, as_cache=True)


@pytest.mark.parametrize("backend", H.backends_here(large_shapes=True))
def test_fewer_blocks_than_topk_pads_with_minus_one(backend):
    prob = make_problem([97, 129, 300], lambda r, n: [n - 1], seed=4)
    got = check(prob, topk=16, init_blocks=0, local_blocks=1, backend=backend)
    assert got[0, 0].tolist() == [0] + [-1] * 15
    assert got[0, 1].tolist() == [0, 1] + [-1] * 14
    assert got[0, 2].tolist() == [0, 1, 2] + [-1] * 13


@pytest.mark.parametrize("backend", H.backends_here(large_shapes=True))
@pytest.mark.parametrize("init_blocks, local_blocks, topk", [(0, 0, 3), (1, 1, 3), (2, 3, 4), (3, 2, 3), (4, 4, 2)])
def test_init_and_local_forcing(backend, init_blocks, local_blocks, topk):
    # forced blocks beat any score; with more forced blocks than topk, init beats local, and forced blocks of
    # one kind go to the smaller block id
    prob = make_problem([1500, 900], lambda r, n: [n - 1, n // 2, 300], seed=5)
    got = check(prob, topk=topk, init_blocks=init_blocks, local_blocks=local_blocks, backend=backend)
    own = (1500 - 1) // 128
    sel = got[0, 0].tolist()
    forced = list(range(init_blocks)) + list(range(own - local_blocks + 1, own + 1))
    if len(set(forced)) <= topk:
        assert set(forced) <= set(sel)


@pytest.mark.parametrize("backend", H.backends_here(large_shapes=True))
def test_ties_go_to_smaller_block_id(backend):
    prob = make_problem([128 * 8], lambda r, n: [n - 1], seed=6)
    # make blocks 1..6 identical copies of block 3 (equal scores), blocks 0 and 7 hold zeros (score 0, below)
    rec, page = prob["records"], prob["block_table"][0].tolist()
    keys = prob["keys"][0]
    for b in range(8):
        for t in range(128):
            src = (page[3], 3 * 128 + t) if 1 <= b <= 6 else None
            if src is None:
                H.put_token(rec, page[b], 0, t, torch.zeros(64, dtype=torch.uint8),
                            torch.full((4,), 127, dtype=torch.uint8))
                keys[b * 128 + t] = 0
            elif b != 3:
                d, s = H.token_bytes(rec, page[3], 0, t)
                H.put_token(rec, page[b], 0, t, d.clone(), s.clone())
                keys[b * 128 + t] = keys[3 * 128 + t]
    prob["idx_q"][:] = 1  # every block 1..6 has the same positive max
    assert (keys[128:256] @ np.ones(128)).max() > 0
    got = check(prob, topk=3, init_blocks=0, local_blocks=0, backend=backend)
    assert got[0, 0].tolist() == [1, 2, 3]
    got = check(prob, topk=3, init_blocks=0, local_blocks=1, backend=backend)
    assert got[0, 0].tolist() == [1, 2, 7]


@pytest.mark.parametrize("backend", H.backends_here(large_shapes=True))
def test_future_tokens_of_own_block_are_excluded(backend):
    # row at position 130: block 1 holds a huge key at position 200 (future) that must not count
    prob = make_problem([256], lambda r, n: [130], seed=7)
    rec, page = prob["records"], prob["block_table"][0].tolist()
    H.put_token(rec, page[1], 0, 200 - 128, torch.full((64,), 0x77, dtype=torch.uint8),
                torch.full((4,), 129, dtype=torch.uint8))
    prob["keys"][0][200] = 24.0  # (not read by the reference: 200 > 130)
    prob["idx_q"][:] = 1
    check(prob, topk=1, init_blocks=0, local_blocks=0, backend=backend)
