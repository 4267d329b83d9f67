"""Property test (hypothesis) for index_topk: random requests, rows and options against the DESIGN §5 rule, computed
row by row in plain Python. Scores are exact (small-integer idx_q, e2m1 idx_k with scales 2**-2..2**2), so ties are
real ties and the ids must match exactly."""

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from atom_mxfp4 import ops
from atom_mxfp4.format import dequantize_mxfp4

from atom_mxfp4.layout import HEAD_DIM as D, PAGE_SIZE as PAGE, RECORD_BYTES as RECORD  # noqa: E402


def expected_topk(scores_by_token, position, topk, init_blocks, local_blocks):
    """One row and head: scores_by_token[p] for p <= position -> the kept block ids, ascending, -1 padded."""
    own = position // PAGE
    ranked = []
    for b in range(own + 1):
        score = max(scores_by_token[b * PAGE : min((b + 1) * PAGE, position + 1)])
        level = 2 if b < init_blocks else 1 if b > own - local_blocks else 0  # forced: above every score
        ranked.append((-level, 0.0 if level else -score, b))
    kept = sorted(b for *_, b in sorted(ranked)[: min(topk, own + 1)])
    return kept + [-1] * (topk - len(kept))


@st.composite
def cases(draw):
    lens = draw(st.lists(st.integers(1, 2200), min_size=1, max_size=4))  # up to 18 blocks > topk
    heads = draw(st.integers(1, 2))
    topk = draw(st.integers(1, 6))
    init_blocks = draw(st.integers(0, 2))
    local_blocks = draw(st.integers(0, 2))
    seed = draw(st.integers(0, 2**31 - 1))
    rows = [(b, draw(st.integers(0, n - 1))) for b, n in enumerate(lens) for _ in range(draw(st.integers(1, 3)))]
    tie_prone = draw(st.booleans())  # few distinct values: many exact ties between blocks
    return lens, heads, topk, init_blocks, local_blocks, seed, rows, tie_prone


@settings(max_examples=40, deadline=None)
@given(cases())
def test_index_topk_matches_the_rule(case):
    lens, heads, topk, init_blocks, local_blocks, seed, rows, tie_prone = case
    gen = torch.Generator().manual_seed(seed)
    width = max(math.ceil(n / PAGE) for n in lens)
    pages = len(lens) * width + 1
    records = torch.randint(0, 256, (pages, 1, RECORD), generator=gen, dtype=torch.int32).to(torch.uint8)
    if tie_prone:
        records[:, 0, : PAGE * 64] &= 0x11  # codes 0 / 1 only
    records[:, 0, PAGE * 64 :] = torch.randint(125, 130, (pages, PAGE * 4), generator=gen).to(torch.uint8)
    block_table = torch.randperm(pages, generator=gen)[: len(lens) * width].view(len(lens), width).int()
    q_values = torch.randint(-1 if tie_prone else -3, 2 if tie_prone else 4, (len(rows), heads, D), generator=gen)
    idx_q = q_values.to(torch.bfloat16)
    row_request = torch.tensor([b for b, _ in rows], dtype=torch.int32)
    row_position = torch.tensor([p for _, p in rows], dtype=torch.int32)

    got = ops.index_topk(idx_q, records, block_table, row_request, row_position, topk=topk,
                         init_blocks=init_blocks, local_blocks=local_blocks, backend="torch")

    data = records[:, 0, : PAGE * 64].view(pages, PAGE, 64)
    scale = records[:, 0, PAGE * 64 :].view(pages, PAGE, 4)
    keys = dequantize_mxfp4(data, scale, torch.float64)  # [pages, 128, D]
    assert got.shape == (heads, len(rows), topk)
    for r, (b, position) in enumerate(rows):
        tokens = keys[block_table[b].long()].reshape(-1, D)[: position + 1]  # the request's tokens 0..position
        for h in range(heads):
            scores = (tokens @ q_values[r, h].double()).tolist()
            want = expected_topk(scores, position, topk, init_blocks, local_blocks)
            assert got[h, r].tolist() == want, f"row {r} (request {b}, position {position}), head {h}"
