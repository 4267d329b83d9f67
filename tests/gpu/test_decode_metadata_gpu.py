"""The decode metadata kernel on CUDA (kernels/triton/decode_metadata.py; marker ``gpu``): bit for bit its torch twin,
eagerly and inside a captured CUDA graph replayed on new inputs (the SGLang backend's decode step is captured)."""

import pytest
import torch

from atom_mxfp4.kernels.torch import decode_metadata as twin
from atom_mxfp4.layout import PAGE_SIZE

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (scripts/gpu_run.sh)")]

DEV = torch.device("cuda")


def _inputs(rows, pages, seed):
    gen = torch.Generator().manual_seed(seed)
    width = (pages - 1) * PAGE_SIZE + 4  # as SGLang sizes its map (context + 4): the last page's first token inside
    req_to_token = torch.randint(-2**20, 2**30, (rows + 4, width), generator=gen, dtype=torch.int32)
    seq_lens = torch.randint(1, width + 1, (rows,), generator=gen)
    loc = torch.randint(0, 2**30, (rows,), generator=gen)
    loc[::4] = 0
    req = torch.randperm(rows + 4, generator=gen)[:rows]
    return [t.to(DEV) for t in (seq_lens, loc, req, req_to_token)]


def _outputs(rows, pages):
    return (torch.full((rows,), 7777, dtype=torch.int64, device=DEV),
            torch.full((rows,), 7777, dtype=torch.int64, device=DEV),
            torch.full((rows, pages), 7777, dtype=torch.int32, device=DEV))


@pytest.mark.parametrize("rows, pages", [(1, 1), (7, 300), (64, 1024)])
def test_decode_metadata_eager_and_graph_replayed_equal_the_twin(rows, pages):
    from atom_mxfp4.kernels.triton.decode_metadata import decode_metadata

    inputs = _inputs(rows, pages, seed=rows + pages)
    want, got = _outputs(rows, pages), _outputs(rows, pages)
    twin.decode_metadata(*inputs, *want)
    versions = [t._version for t in got]
    decode_metadata(*inputs, *got)
    torch.cuda.synchronize()
    assert all(torch.equal(a, b) for a, b in zip(got, want))
    assert all(t._version > v for t, v in zip(got, versions))  # seen as refilled by what keys on versions
    # captured once, replayed after the inputs were refilled in place (as SGLang's runner does)
    static, out = [t.clone() for t in inputs], _outputs(rows, pages)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        decode_metadata(*static, *out)
    fresh = _inputs(rows, pages, seed=rows * 7 + pages)
    for s, f in zip(static, fresh):
        s.copy_(f)
    graph.replay()
    twin.decode_metadata(*fresh, *want)
    torch.cuda.synchronize()
    assert all(torch.equal(a, b) for a, b in zip(out, want))
