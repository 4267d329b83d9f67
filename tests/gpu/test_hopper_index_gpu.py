"""The Hopper (Gluon) index scorer (fp8 and MXFP4 index-K) on an sm_90 GPU (marker ``gpu``; skipped without one):
run on the H200.

- top-k ids bit for bit equal to the torch backend's (exact dyadic scores, so every backend's sums are exact):
  1 / 2 / 4 / 8 index heads, init and local blocks, positions anywhere in the table (partial own blocks), chunks of
  1 / 7 / 64 blocks per program and the heuristic's; every page no request owns is random bytes (NaN codes, scale
  255), never reaching an id;
- the rank keys themselves equal the Triton scorer's bit for bit (the same words the select kernel reads);
- CUDA-graph replay after refilling the inputs equals eager;
- ``backend=None`` on sm_90 resolves index_topk to this kernel; calls it does not score (fp32 idx_q, more than 8
  heads) give the Triton backend's ids.
"""


import pytest
import torch

SM90 = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (scripts/gpu_run.sh)"),
              pytest.mark.skipif(torch.cuda.is_available() and not SM90, reason="the Gluon kernel is sm_90 only")]

from _helpers import capture_then_replay, index_case, refill_index_case  # noqa: E402

import atom_mxfp4.kernels.torch as torch_backend  # noqa: E402
import atom_mxfp4.kernels.triton as triton_backend  # noqa: E402

DEV = torch.device("cuda")


def _hopper():
    import atom_mxfp4.kernels.hopper as hopper
    return hopper


@pytest.mark.parametrize("index_k_dtype", ["fp8", "mxfp4"])
@pytest.mark.parametrize("rows,max_blocks,heads,init,local,per_program", [
    (300, 97, 1, 1, 1, None), (3, 333, 1, 0, 1, None), (64, 40, 4, 2, 2, None), (17, 130, 8, 1, 0, 7),
    (5, 64, 1, 0, 1, 1), (9, 200, 2, 3, 1, 64), (40, 16, 1, 0, 1, None)])
def test_index_topk_bit_exact(rows, max_blocks, heads, init, local, per_program, index_k_dtype):
    hopper = _hopper()
    gen = torch.Generator().manual_seed(rows * max_blocks + heads)
    args = index_case(gen, rows, max_blocks, index_k_dtype=index_k_dtype, heads=heads)
    kwargs = dict(topk=16, init_blocks=init, local_blocks=local, index_k_dtype=index_k_dtype)
    ours = hopper.index_topk(*(a.to(DEV) for a in args), **kwargs,
                             config=hopper.IndexConfig(blocks_per_program=per_program))
    ref = torch_backend.index_topk(*args, **kwargs)
    assert torch.equal(ours.cpu(), ref), int((ours.cpu() != ref).sum())


def _spy_rank_keys(monkeypatch):
    """The keys buffers handed to the select kernel (select_topk), one per index_topk call, in call order."""
    import importlib
    triton_index = importlib.import_module("atom_mxfp4.kernels.triton.index_topk")
    seen = []
    real = triton_index.select_topk

    def spy(keys, row_position, out, **kw):
        seen.append(keys.clone())
        return real(keys, row_position, out, **kw)

    monkeypatch.setattr(triton_index, "select_topk", spy)
    return seen


def _written_keys_equal(a, b, row_position, max_blocks):
    """Two keys buffers agree on every key a scorer writes (blocks up to each row's own; the rest is never written)."""
    own = (row_position.long() // 128)[None, :, None]
    written = torch.arange(max_blocks, device=DEV)[None, None, :] <= own
    return torch.equal(torch.where(written, a, 0), torch.where(written, b, 0))


@pytest.mark.parametrize("index_k_dtype", ["fp8", "mxfp4"])
@pytest.mark.parametrize("stages", [2, 3, 4])
def test_rank_keys_equal_the_triton_scorers(stages, index_k_dtype, monkeypatch):
    """The keys buffer both scorers hand to the select kernel, captured through select_topk."""
    hopper = _hopper()
    gen = torch.Generator().manual_seed(11 + stages)
    idx_q, records, block_table, row_request, row_position = (
        a.to(DEV) for a in index_case(gen, 33, 75, index_k_dtype=index_k_dtype, heads=2))
    seen = _spy_rank_keys(monkeypatch)
    kwargs = dict(topk=16, init_blocks=1, local_blocks=1, index_k_dtype=index_k_dtype)
    ours = hopper.index_topk(idx_q, records, block_table, row_request, row_position, **kwargs,
                             config=hopper.IndexConfig(stages=stages))
    ref = triton_backend.index_topk(idx_q, records, block_table, row_request, row_position, **kwargs)
    assert torch.equal(ours, ref)
    ours_keys, ref_keys = seen
    assert _written_keys_equal(ours_keys, ref_keys, row_position, 75)


@pytest.mark.parametrize("index_k_dtype", ["fp8", "mxfp4"])
def test_index_cuda_graph_replay_equals_eager(index_k_dtype):
    hopper = _hopper()
    gen = torch.Generator().manual_seed(3)
    idx_q, records, block_table, row_request, row_position = (
        a.to(DEV) for a in index_case(gen, 64, 40, index_k_dtype=index_k_dtype))
    kwargs = dict(topk=16, init_blocks=0, local_blocks=1, index_k_dtype=index_k_dtype)

    def step():
        return hopper.index_topk(idx_q, records, block_table, row_request, row_position, **kwargs)

    outputs = []  # the last one: what the captured call allocated, as the replay left it
    capture_then_replay(lambda: outputs.append(step()), lambda: refill_index_case(gen, idx_q, row_position, 40))
    assert torch.equal(outputs[-1], step())


def test_backend_none_resolves_and_other_calls_match_triton():
    hopper = _hopper()
    from atom_mxfp4.backends import resolve_backend
    assert resolve_backend(None, DEV).index_topk is hopper.index_topk
    gen = torch.Generator().manual_seed(5)
    for dtype, heads, q_dtype in (("mxfp4", 12, torch.bfloat16), ("fp8", 12, torch.bfloat16),
                                  ("fp8", 1, torch.float32), ("mxfp4", 2, torch.float32)):
        args = [a.to(DEV) for a in index_case(gen, 20, 50, index_k_dtype=dtype, heads=heads)]
        args[0] = args[0].to(q_dtype)
        kwargs = dict(topk=16, init_blocks=1, local_blocks=1, index_k_dtype=dtype)
        assert torch.equal(hopper.index_topk(*args, **kwargs), triton_backend.index_topk(*args, **kwargs))
