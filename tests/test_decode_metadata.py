"""The decode batch's metadata in one Triton launch (kernels/triton/decode_metadata.py) against its torch twin
(kernels/torch/decode_metadata.py), bit for bit, under TRITON_INTERPRET=1: batches of 1 to 65 rows, tables of 1 to
300 pages (past one program's 256), the runner's padding slot, int32 and int64 inputs, request rows out of order,
token ids whose pages are large, garbage (negative ids) in unused map entries, and outputs poisoned first."""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch

from atom_mxfp4.kernels.torch import decode_metadata as twin
from atom_mxfp4.layout import PAGE_SIZE

pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None or os.environ.get("TRITON_INTERPRET")
                                != "1", reason="the Triton kernel on the CPU needs TRITON_INTERPRET=1")


def _case(rows, pages, map_rows, dtype, seed, width=None):
    """``width``: the map's tokens per request (SGLang's: the context + 4, rarely a multiple of 128); the table's
    ``pages`` then reach its last page start."""
    gen = torch.Generator().manual_seed(seed)
    width = pages * PAGE_SIZE + 5 if width is None else width
    req_to_token = torch.randint(-2**20, 2**30, (map_rows, width), generator=gen, dtype=torch.int32)
    seq_lens = torch.randint(1, min(width, pages * PAGE_SIZE) + 1, (rows,), generator=gen).to(dtype)
    out_cache_loc = torch.randint(0, 2**30, (rows,), generator=gen).to(dtype)
    out_cache_loc[::3] = 0  # padded rows
    req_pool_indices = torch.randperm(map_rows, generator=gen)[:rows].to(dtype)
    return seq_lens, out_cache_loc, req_pool_indices, req_to_token


def _outputs(rows, pages):
    return (torch.full((rows,), 7777, dtype=torch.int64), torch.full((rows,), 7777, dtype=torch.int64),
            torch.full((rows, pages), 7777, dtype=torch.int32))


@pytest.mark.parametrize("rows, pages, dtype, width", [
    (1, 1, torch.int64, None), (3, 17, torch.int32, None), (17, 256, torch.int64, None), (65, 300, torch.int64, None),
    (5, 513, torch.int32, None), (4, 9, torch.int64, 1028), (2, 1, torch.int64, 1), (6, 257, torch.int32, 32772)])
def test_the_kernel_equals_its_torch_twin_bit_for_bit(rows, pages, dtype, width):
    from atom_mxfp4.kernels.triton.decode_metadata import decode_metadata
    from atom_mxfp4.layout import pages_for

    assert width is None or pages == pages_for(width)  # what the SGLang backend passes for a map of that width
    inputs = _case(rows, pages, rows + 3, dtype, seed=rows * 1000 + pages, width=width)
    want, got = _outputs(rows, pages), _outputs(rows, pages)
    twin.decode_metadata(*inputs, *want)
    versions = [t._version for t in got]
    decode_metadata(*inputs, *got)
    # bumped like an in-place torch op: what remembers the metadata's checks and derived tensors sees the refill
    assert all(t._version > v for t, v in zip(got, versions))
    for name, a, b in zip(("positions", "slot_mapping", "block_table"), got, want):
        assert torch.equal(a, b), f"{name} differs at rows={rows} pages={pages}"
    assert (got[1][::3] == -1).all()  # the padding slot is no slot
    seq_lens, _, req_pool_indices, req_to_token = inputs
    assert torch.equal(got[0], seq_lens.long() - 1)
    request = int(req_pool_indices[0])
    assert int(got[2][0, -1]) == int(req_to_token[request, (pages - 1) * PAGE_SIZE]) // PAGE_SIZE  # floor, not trunc


def test_a_wide_table_past_the_map_and_a_strided_table_are_refused():
    from atom_mxfp4.kernels.triton.decode_metadata import decode_metadata

    seq_lens, loc, req, req_to_token = _case(4, 8, 6, torch.int64, seed=3)
    positions, slots, table = _outputs(4, 8)
    with pytest.raises(ValueError, match=r"req_to_token.shape\[1\] must be > 1152 .*10 pages.*got 1029"):
        decode_metadata(seq_lens, loc, req, req_to_token[:, :1029], positions, slots,
                        torch.zeros(4, 10, dtype=torch.int32))
    with pytest.raises(ValueError, match="block_table must be contiguous"):
        decode_metadata(seq_lens, loc, req, req_to_token, positions, slots,
                        torch.zeros(4, 16, dtype=torch.int32)[:, :8])
    with pytest.raises(TypeError, match="positions.dtype must be torch.int64, got torch.int32"):
        decode_metadata(seq_lens, loc, req, req_to_token, positions.int(), slots, table)
    with pytest.raises(TypeError, match="seq_lens.dtype must be an integer dtype, got torch.float32"):
        decode_metadata(seq_lens.float(), loc, req, req_to_token, positions, slots, table)
    with pytest.raises(ValueError, match="seq_lens must be a contiguous vector of 4"):
        decode_metadata(seq_lens[:3], loc, req, req_to_token, positions, slots, table)


def test_the_torch_twin_refuses_vectors_of_another_length_before_writing_anything():
    """Its ``out=`` ops would resize a buffer of another length silently: refused by name, nothing written."""
    seq_lens, loc, req, req_to_token = _case(4, 8, 6, torch.int64, seed=5)
    for args, name in (((seq_lens[:3], loc, req), "seq_lens"), ((seq_lens, loc[:3], req), "out_cache_loc"),
                       ((seq_lens, loc, req[:1]), "req_pool_indices")):
        positions, slots, table = _outputs(4, 8)
        with pytest.raises(ValueError, match=rf"{name}.shape must be \[4\] \(block_table's rows\), got \["):
            twin.decode_metadata(*args, req_to_token, positions, slots, table)
        assert (positions == 7777).all() and (slots == 7777).all() and (table == 7777).all()
    positions, slots, table = _outputs(4, 8)
    with pytest.raises(ValueError, match=r"positions.shape must be \[4\]"):
        twin.decode_metadata(seq_lens, loc, req, req_to_token, positions[:3], slots, table)
    with pytest.raises(ValueError, match=r"req_to_token.shape\[1\] must be > 1152"):
        twin.decode_metadata(seq_lens, loc, req, req_to_token[:, :1029], positions, slots,
                             torch.zeros(4, 10, dtype=torch.int32))
