"""The layer end to end on CUDA with the Triton and the Hopper backends (marker ``gpu``; run by scripts/gpu_run.sh;
the Hopper cases are skipped off sm_90 and have not run yet).

- prefill (chunked, with a cached prefix) then decode, sparse (MXFP4 and fp8 index-K) and dense: the GPU backend vs
  the torch backend on the CPU, with the same MXFP4 cache bytes (bit-exact writes), the same top-k blocks and
  attention within the named tolerance;
- a decode step captured in a CUDA graph (``check=False``) and replayed on new inputs equals the eager step (fresh
  metadata, a plan of its own), output and cache bytes, bit for bit; the capture reuses the plan the warm-up cached on
  the metadata.
"""

import pytest
import torch

import _helpers as H

from atom_mxfp4.layer import AttentionMetadata, LayerCaches, LayerConfig, SparseMXFP4Attention
from atom_mxfp4.synthetic import make_request, make_weights

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (scripts/gpu_run.sh)")]

DEV = torch.device("cuda")
ATTN_REL_TOL = 3e-3  # as tests/test_triton_ops.py: bf16 output and probabilities (measured ~7e-4), band x3
PROMPTS = [1500, 333, 129, 1]  # ragged: a partial last page, one token, one page + 1
PAGES = 64  # >= rows x width = 4 x 12


def _setup(sparse: bool, index_k_dtype: str = "mxfp4"):
    config = LayerConfig(sparse=sparse, max_position=4096, index_k_dtype=index_k_dtype)
    weights = make_weights(config, seed=11)
    requests = [make_request(config, n + 4, needles=[n // 3], seek_from=n, seed=11 + b)
                for b, n in enumerate(PROMPTS)]
    pages = torch.randperm(PAGES, generator=torch.Generator().manual_seed(5))
    width = max(-(-(n + 4) // 128) for n in PROMPTS)
    block_table = pages[: len(PROMPTS) * width].view(len(PROMPTS), width).int().contiguous()
    return config, weights, requests, block_table


def _step(layer, requests, block_table, caches, prefix, new, device, **kwargs):
    meta = AttentionMetadata.for_requests(block_table.to(device), prefix, new)
    qkv = torch.cat([r.qkv[p : p + n] for r, p, n in zip(requests, prefix, new)]).to(device)
    return layer(qkv, meta, caches, return_topk=True, **kwargs)


def _rel(a, b):
    a, b = a.double().cpu(), b.double().cpu()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


CASES = [(True, "mxfp4"), (True, "fp8"), (False, "mxfp4")]  # (sparse, index_k_dtype)
CASE_IDS = ["sparse", "sparse-fp8-index-k", "dense"]



@pytest.mark.parametrize("backend", ["triton", "hopper"])
@pytest.mark.parametrize("sparse,index_k_dtype", CASES, ids=CASE_IDS)
def test_layer_on_the_gpu_matches_torch_backend(sparse, index_k_dtype, backend):
    """``backend`` on the GPU (the Hopper backend: its pa_decode, Triton's other ops) vs the torch backend."""
    config, weights, requests, block_table = _setup(sparse, index_k_dtype)
    gpu = SparseMXFP4Attention(config, {k: w.to(DEV) for k, w in weights.items()},
                               backend=H.usable_or_skip(backend, DEV))
    cpu = SparseMXFP4Attention(config, weights, backend="torch")
    gpu_caches, cpu_caches = LayerCaches.allocate(config, PAGES, DEV), LayerCaches.allocate(config, PAGES)
    half = [n // 2 for n in PROMPTS]
    steps = [([0] * len(PROMPTS), half), (half, [n - h for n, h in zip(PROMPTS, half)])]  # chunked + prefix
    steps += [([n + i for n in PROMPTS], [1] * len(PROMPTS)) for i in range(3)]  # decode
    for prefix, new in steps:
        out_gpu, topk_gpu = _step(gpu, requests, block_table, gpu_caches, prefix, new, DEV)
        out_cpu, topk_cpu = _step(cpu, requests, block_table, cpu_caches, prefix, new, torch.device("cpu"))
        for name in ("k", "v", "index_k"):
            mine, ref = getattr(gpu_caches, name), getattr(cpu_caches, name)
            if ref is not None:
                assert torch.equal(mine.records.cpu(), ref.records), f"{name} cache bytes differ"
        if sparse:
            assert torch.equal(topk_gpu.cpu(), topk_cpu), "top-k blocks differ"
        assert _rel(out_gpu, out_cpu) < ATTN_REL_TOL


@pytest.mark.parametrize("backend", ["triton", "hopper"])
@pytest.mark.parametrize("sparse,index_k_dtype", CASES, ids=CASE_IDS)
def test_layer_decode_cuda_graph_replay_equals_eager(sparse, index_k_dtype, backend):
    config, weights, requests, block_table = _setup(sparse, index_k_dtype)
    layer = SparseMXFP4Attention(config, {k: w.to(DEV) for k, w in weights.items()},
                                 backend=H.usable_or_skip(backend, DEV))
    caches = LayerCaches.allocate(config, PAGES, DEV)
    _step(layer, requests, block_table, caches, [0] * len(PROMPTS), PROMPTS, DEV)  # prefill (eager)

    # static decode buffers, as a runner keeps them for its graph
    meta = AttentionMetadata.for_requests(block_table.to(DEV), PROMPTS, [1] * len(PROMPTS))
    qkv = torch.cat([r.qkv[n : n + 1] for r, n in zip(requests, PROMPTS)]).to(DEV)
    layer(qkv, meta, caches, check=False)  # warm-up: compile, RoPE table, the batch's pa_decode plan (meta.plans)
    torch.cuda.synchronize()
    plans = dict(meta.plans)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = layer(qkv, meta, caches, check=False)
    assert len(plans) == 1 and meta.plans == plans, "capture made a plan: its workspace would live in the graph pool"

    # the next decode step: new contents in the same buffers, then replay vs eager on a copy of the caches
    step = AttentionMetadata.for_requests(block_table.to(DEV), [n + 1 for n in PROMPTS], [1] * len(PROMPTS))
    for name in ("positions", "slot_mapping", "token_request", "block_table"):
        getattr(meta, name).copy_(getattr(step, name))
    qkv.copy_(torch.cat([r.qkv[n + 1 : n + 2] for r, n in zip(requests, PROMPTS)]).to(DEV))
    before = [None if c is None else c.records.clone() for c in (caches.k, caches.v, caches.index_k)]
    graph.replay()
    torch.cuda.synchronize()
    eager_caches = LayerCaches(*[None if b is None else type(c)(records=b)
                                 for c, b in zip((caches.k, caches.v, caches.index_k), before)])
    eager = layer(qkv, step, eager_caches)
    assert torch.equal(captured.view(torch.int16), eager.view(torch.int16)), "replayed output != eager output"
    for c, e in zip((caches.k, caches.v, caches.index_k), (eager_caches.k, eager_caches.v, eager_caches.index_k)):
        if c is not None:
            assert torch.equal(c.records, e.records), "replayed cache writes != eager cache writes"


FLASH_REL_TOL = 8e-3  # flash attention's bf16 probabilities against the torch backend's fp32 ones: measured 2.3-3.2e-3
#                       against the Hopper decode kernel (H100, prefill_bench), ~2.5x band


@pytest.mark.parametrize("backend", ["triton", "hopper"])
def test_dense_prefill_as_flash_attention_matches_torch_backend(backend, monkeypatch):
    """A dense layer with ``flash_prefill_rows`` (atom_mxfp4.prefill) on the GPU: its long prefill segments by torch's
    SDPA over the dequantized prefix (flash or memory-efficient kernel), the short ones and decode by ``backend``;
    against the torch backend's decode path on the CPU, the cache bytes bit for bit."""
    from dataclasses import replace

    from atom_mxfp4 import prefill

    calls, real = [], prefill._sdpa
    monkeypatch.setattr(prefill, "_sdpa", lambda *a: calls.append(a[0].shape[2]) or real(*a))
    config, weights, requests, block_table = _setup(False)
    gpu = SparseMXFP4Attention(replace(config, flash_prefill_rows=64), {k: w.to(DEV) for k, w in weights.items()},
                               backend=H.usable_or_skip(backend, DEV))
    cpu = SparseMXFP4Attention(config, weights, backend="torch")
    gpu_caches, cpu_caches = LayerCaches.allocate(config, PAGES, DEV), LayerCaches.allocate(config, PAGES)
    half = [n // 2 for n in PROMPTS]
    steps = [([0] * len(PROMPTS), half), (half, [n - h for n, h in zip(PROMPTS, half)])]
    steps += [([n + i for n in PROMPTS], [1] * len(PROMPTS)) for i in range(2)]
    for prefix, new in steps:
        out_gpu, _ = _step(gpu, requests, block_table, gpu_caches, prefix, new, DEV)
        out_cpu, _ = _step(cpu, requests, block_table, cpu_caches, prefix, new, torch.device("cpu"))
        assert torch.equal(gpu_caches.k.records.cpu(), cpu_caches.k.records)
        assert _rel(out_gpu, out_cpu) < FLASH_REL_TOL
    assert calls == [750, 166, 64, 750, 167, 65]  # the segments of >= 64 rows of both prefill chunks; no decode row


@pytest.mark.parametrize("num_kv_heads,length", [(1, 32768), (2, 1000), (1, 1)])
def test_the_prefix_in_one_launch_equals_the_torch_dequantization(num_kv_heads, length):
    """The flash prefill's prefix (kernels/triton/prefix, PTX decode on the GPU) bit for bit against read_pages + bf16
    over the writer's bytes, the pages out of order."""
    from atom_mxfp4 import quantize_mxfp4
    from atom_mxfp4.kernels.torch.paged import read_pages
    from atom_mxfp4.kernels.triton.prefix import dequantize_prefix

    used = -(-length // 128)
    pages = used + 3
    table = torch.randperm(pages, device=DEV)[:used].int()
    data, scale = quantize_mxfp4(torch.randn(pages * num_kv_heads * 128, 128, device=DEV) * 4)
    records = torch.cat((data.view(pages, num_kv_heads, 128 * 64), scale.view(pages, num_kv_heads, 128 * 4)), -1)
    got = dequantize_prefix(records.contiguous(), table, num_kv_heads, length)
    ids = table.long()[None, :] * num_kv_heads + torch.arange(num_kv_heads, device=DEV)[:, None]
    want = read_pages(records, ids).flatten(1, 2)[:, :length].to(torch.bfloat16)
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))
