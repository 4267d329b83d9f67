"""index_topk and build_sparse_tables at the edges of their contracts (issue 11), on every backend: fp32 idx_q is
never rounded to bf16, non-finite / huge idx_q, forced blocks against huge scores, layouts, the bounds on topk /
pages_per_block / table width, and the top-k input contract of build_sparse_tables.
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

import pytest

from atom_mxfp4 import ops

import _helpers as H

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
BACKENDS = ["torch", "triton"]
I32 = torch.int32


def topk_of(backend, idx_q, keys, row_position, topk, init_blocks=0, local_blocks=0, check=True):
    """keys [blocks, 128, 128] float (one request, page b = block b) -> ids [niq, R, topk] on the CPU."""
    records = H.records_from_values(keys)
    block_table = torch.arange(keys.shape[0], dtype=I32)[None]
    rows = idx_q.shape[0]
    args = (idx_q, records, block_table, torch.zeros(rows, dtype=I32), torch.as_tensor(row_position, dtype=I32))
    return ops.index_topk(*(H.to_device(a, DEVICE) for a in args), topk=topk, init_blocks=init_blocks,
                          local_blocks=local_blocks, backend=backend, check=check).cpu()


def one_hot_blocks(*dims):
    """Blocks whose token 0 holds a one-hot key at ``dims[b]`` (None: all zeros); every other token is 0."""
    keys = torch.zeros(len(dims), 128, 128)
    for b, d in enumerate(dims):
        if d is not None:
            keys[b, 0, d] = 1.0
    return keys


@pytest.mark.parametrize("dtype, delta", [(torch.float32, 2.0 ** -12), (torch.float16, 2.0 ** -10)])
@pytest.mark.parametrize("backend", BACKENDS)
def test_fp32_idx_q_is_not_rounded_to_bf16(backend, dtype, delta):
    """Block 1 scores 1 + delta, block 0 scores 1: exact in fp32 / fp16, a tie after bf16 rounding (which goes to
    block 0). DESIGN: fp32 scores from the dequantized index-K, so block 1 wins on every backend."""
    keys = one_hot_blocks(1, 0, None)
    idx_q = torch.zeros(1, 1, 128, dtype=dtype)
    idx_q[0, 0, 0], idx_q[0, 0, 1] = 1 + delta, 1
    assert idx_q.to(torch.bfloat16)[0, 0, 0] == 1  # the rounding this test is about
    assert topk_of(backend, idx_q, keys, [3 * 128 - 1], topk=1)[0, 0].tolist() == [1]
    assert topk_of(backend, idx_q.bfloat16(), keys, [3 * 128 - 1], topk=1)[0, 0].tolist() == [0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_non_finite_and_huge_idx_q(backend):
    """NaN dot products count as -inf; +-inf and huge scores are ordered as numbers; forced blocks still win."""
    keys = one_hot_blocks(0, 1, 2, 3, None)
    keys[1, 5, 1] = -1.0  # block 1 also has a token whose dim-1 product is negative
    own = [5 * 128 - 1]
    q = torch.zeros(5, 1, 128)
    q[0, 0, :] = float("nan")  # every score NaN -> -inf: the smallest ids fill the row
    q[1, 0, 1] = float("inf")  # block 1: +inf (token 0); 0 * inf = NaN elsewhere (skipped) -> block 1 first
    q[2, 0, 2] = 1e38  # block 2: 1e38 (finite, above the old 1e29 / 1e30 sentinels)
    q[3, 0, 3] = -1e38  # block 3: max(-1e38, 0) = 0 like every other block
    q[4, 0, 0], q[4, 0, 2] = 1e38, 3e38  # huge in two blocks: 3e38 > 1e38
    assert topk_of(backend, q.bfloat16(), keys, own * 5, topk=1)[0, :, 0].tolist() == [0, 1, 2, 0, 2]
    assert topk_of(backend, q.bfloat16(), keys, own * 5, topk=2)[0].tolist() == [[0, 1], [0, 1], [0, 2], [0, 1],
                                                                                 [0, 2]]
    # forced blocks rank above every score, +inf included (the 1e29 / 1e30 sentinels lost to such scores)
    assert topk_of(backend, q.bfloat16(), keys, own * 5, topk=1, local_blocks=1)[0, :, 0].tolist() == [4] * 5
    assert topk_of(backend, q.bfloat16(), keys, own * 5, topk=1, init_blocks=1)[0, :, 0].tolist() == [0] * 5


@pytest.mark.parametrize("backend", BACKENDS)
def test_index_topk_layout_and_bound_refusals(backend):
    keys = one_hot_blocks(0, 1)
    idx_q = torch.ones(2, 2, 128)
    cases = [
        (dict(idx_q=torch.ones(2, 2, 256)[:, :, ::2]), ValueError, ["idx_q", "contiguous"]),
        (dict(idx_q=torch.ones(2, 17, 128)), ValueError, ["idx_q", "16"]),
        (dict(topk=ops.MAX_TOPK + 1), ValueError, ["topk", str(ops.MAX_TOPK)]),
        (dict(topk=10 ** 9), ValueError, ["topk"]),
        (dict(topk=True), ValueError, ["topk"]),
    ]
    for change, exc, names in cases:
        kwargs = dict(idx_q=idx_q, keys=keys, row_position=[0, 200], topk=2) | change
        with pytest.raises(exc) as ei:
            topk_of(backend, **kwargs)
        H.err_names(ei, *names)
    with pytest.raises(ValueError) as ei:  # the block-table width bound
        ops.index_topk(idx_q, torch.zeros(1, 1, H.RECORD, dtype=torch.uint8),
                       torch.zeros(1, ops.MAX_INDEX_BLOCKS + 1, dtype=I32), torch.zeros(2, dtype=I32),
                       torch.zeros(2, dtype=I32), topk=2, backend=backend)
    H.err_names(ei, "block_table", str(ops.MAX_INDEX_BLOCKS))


def test_triton_refuses_a_strided_idx_q_even_unchecked():
    with pytest.raises(ValueError) as ei:
        topk_of("triton", torch.ones(2, 1, 256)[:, :, ::2], one_hot_blocks(0, 1), [0, 200], topk=2, check=False)
    H.err_names(ei, "idx_q")


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_largest_topk_runs_and_pads(backend):
    """topk = MAX_TOPK over a 3-block table: 3 ids then -1 (the Triton select loop runs min(topk, own + 1) times)."""
    got = topk_of(backend, torch.ones(2, 1, 128), one_hot_blocks(0, 1, 2), [3 * 128 - 1, 130], topk=ops.MAX_TOPK)
    assert got.shape == (1, 2, ops.MAX_TOPK)
    assert got[0, 0, :4].tolist() == [0, 1, 2, -1] and got[0, 1, :3].tolist() == [0, 1, -1]
    assert bool((got[0, :, 3:] == -1).all())


# ---- build_sparse_tables: the top-k input contract ------------------------------------------------------------------
def tables_call(backend, topk_blocks, row_position, pages_per_block=1, check=True):
    block_table = torch.arange(8, dtype=I32)[None]
    rows = topk_blocks.shape[1]
    return ops.build_sparse_tables(H.to_device(topk_blocks, DEVICE), H.to_device(block_table, DEVICE),
                                   torch.zeros(rows, dtype=I32, device=DEVICE),
                                   H.to_device(torch.as_tensor(row_position, dtype=I32), DEVICE),
                                   num_kv_heads=topk_blocks.shape[0], pages_per_block=pages_per_block,
                                   backend=backend, check=check)


@pytest.mark.parametrize("row, value", [
    ([0, 2, 2, -1], 2),  # duplicated
    ([2, 0, 3, -1], 0),  # unsorted
    ([0, 1, 4, -1], 4),  # past the row's own block (3): future tokens / another request's page
    ([0, -1, 1, -1], 1),  # padding before an id
])
@pytest.mark.parametrize("backend", BACKENDS)
def test_build_sparse_tables_refuses_selections_index_topk_never_makes(backend, row, value):
    topk_blocks = torch.tensor([[[0, -1, -1, -1], row]], dtype=I32)  # 1 head, rows 0 (valid) and 1 (bad)
    with pytest.raises(ValueError) as ei:
        tables_call(backend, topk_blocks, [100, 3 * 128 + 5])
    H.err_names(ei, "topk_blocks", "row 1", f"first bad value {value}", str(row))
    tables_call(backend, topk_blocks, [100, 3 * 128 + 5], check=False)  # unchecked: undefined, but it runs


@pytest.mark.parametrize("backend", BACKENDS)
def test_build_sparse_tables_own_block_counts_pages_per_block(backend):
    """Blocks of 2 pages: position 389 is in block 1, so block 2 is in its future; blocks 0-1 are fine."""
    ok = torch.tensor([[[0, 1, -1]]], dtype=I32)
    tables, lens = tables_call(backend, ok, [389], pages_per_block=2)
    assert lens.tolist() == [256 + 389 - 256 + 1]
    with pytest.raises(ValueError) as ei:
        tables_call(backend, torch.tensor([[[0, 2, -1]]], dtype=I32), [389], pages_per_block=2)
    H.err_names(ei, "topk_blocks", "own block 1", "first bad value 2")


@pytest.mark.parametrize("backend", BACKENDS)
def test_build_sparse_tables_bounds(backend):
    with pytest.raises(ValueError) as ei:
        tables_call(backend, torch.full((1, 1, ops.MAX_TOPK + 1), -1, dtype=I32), [0])
    H.err_names(ei, "topk_blocks", str(ops.MAX_TOPK))
    with pytest.raises(ValueError) as ei:
        tables_call(backend, torch.full((1, 1, 2), -1, dtype=I32), [0], pages_per_block=ops.MAX_PAGES_PER_BLOCK + 1)
    H.err_names(ei, "pages_per_block", str(ops.MAX_PAGES_PER_BLOCK))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("topk, init_blocks, local_blocks", [(1, 0, 0), (3, 2, 1), (4, 5, 3), (16, 0, 1)])
def test_index_topk_output_always_passes_build_sparse_tables(backend, topk, init_blocks, local_blocks):
    """Random requests and rows (first token, block edges, last token; more forced blocks than topk, init blocks
    past the row): index_topk's ids go through build_sparse_tables(check=True) and equal the rule's tables."""
    gen = torch.Generator().manual_seed(topk * 31 + init_blocks * 7 + local_blocks)
    pages, requests, width = 20, 3, 6
    records = H.garbage_records(gen, pages, 1)
    records[:, :, 8192:] = torch.randint(120, 130, (pages, 1, 512), generator=gen).to(torch.uint8)
    block_table = torch.stack([torch.randperm(pages, generator=gen)[:width] for _ in range(requests)]).int()
    positions = [0, 127, 128, 255, 256, 300, width * 128 - 1]
    row_request = torch.tensor([r for r in range(requests) for _ in positions], dtype=I32)
    row_position = torch.tensor(positions * requests, dtype=I32)
    idx_q = torch.randn(row_request.numel(), 2, 128, generator=gen).bfloat16()
    args = [H.to_device(a, DEVICE) for a in (idx_q, records, block_table, row_request, row_position)]
    ids = ops.index_topk(*args, topk=topk, init_blocks=init_blocks, local_blocks=local_blocks, backend=backend)
    tables, lens = ops.build_sparse_tables(ids, *args[2:], num_kv_heads=2, backend=backend)
    want_tables, want_lens = H.reference_tables(ids.cpu(), block_table, row_request, row_position, 2)
    assert torch.equal(tables.cpu(), torch.from_numpy(want_tables))
    assert torch.equal(lens.cpu(), torch.from_numpy(want_lens))


def test_triton_compile_time_sizes_stay_bounded_even_unchecked():
    """check=False skips validation, but the Triton launchers refuse a size they would compile in (no sync)."""
    with pytest.raises(ValueError) as ei:
        topk_of("triton", torch.ones(2, 1, 128), one_hot_blocks(0, 1), [0, 200], topk=10 ** 9, check=False)
    H.err_names(ei, "topk")
    with pytest.raises(ValueError) as ei:
        tables_call("triton", torch.full((1, 1, 2), -1, dtype=I32), [0], pages_per_block=10 ** 6, check=False)
    H.err_names(ei, "pages_per_block")
