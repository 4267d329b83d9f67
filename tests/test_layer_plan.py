"""Plan once per batch (STYLE.md): the layers of one step share one pa_decode plan, cached on the step's
AttentionMetadata, on every backend that runs here (Triton under the interpreter, small shapes).

- a step of N layers (dense and sparse, whose tables differ in width) makes one plan, and every layer's pa_decode
  gets that plan;
- a CUDA-graph-style runner that keeps one metadata object and refills its tensors in place makes one plan for all
  its steps, with outputs (and cache bytes) equal, bit for bit, to fresh metadata (fresh planning) at every step.
"""

from __future__ import annotations

import copy

import pytest
import torch

import _helpers as H

from atom_mxfp4.backends import resolve_backend
from atom_mxfp4.layer import AttentionMetadata, LayerCaches, LayerConfig, SparseMXFP4Attention

LENS = [200, 129, 5]  # prefix tokens per request: at most 2 pages, so the block table (2 pages) is narrower than topk
TOPK = 3
SPARSE = [False, True, False, True]  # layer kinds: dense tables are 2 pages wide, sparse ones topk = 3


def interpreted(backend: str) -> bool:
    """Under the Triton interpreter one layer step takes ~2 s (the fused write's programs): fewer steps there."""
    return backend == "triton" and not torch.cuda.is_available()


def make_model(seed=21):
    gen = torch.Generator().manual_seed(seed)
    # few heads, CEIL and a small RoPE table: the interpreter copies every argument per launch and the fused write
    # dominates there (the plan is what is tested)
    configs = {sparse: LayerConfig(num_q_heads=4, num_kv_heads=2, num_index_heads=2 if sparse else 0, sparse=sparse,
                                   topk=TOPK, init_blocks=0, local_blocks=1, scale_mode="ceil", max_position=1024)
               for sparse in (False, True)}
    weights = [{k: (torch.randn(128, generator=gen) * 0.2).bfloat16() for k in ("q_norm", "k_norm", "idx_q_norm",
                                                                               "idx_k_norm")} for _ in SPARSE]
    pages = 3 * 2 + 1
    block_table = torch.randperm(pages, generator=gen)[:6].view(3, 2).int().contiguous()
    caches = [LayerCaches.allocate(configs[sparse], pages) for sparse in SPARSE]
    for sparse, w, c in zip(SPARSE, weights, caches):  # the prefix, written by the torch backend
        prefix = torch.randn(sum(LENS), configs[sparse].qkv_width, generator=gen).bfloat16()
        SparseMXFP4Attention(configs[sparse], w, backend="torch")(
            prefix, AttentionMetadata.for_requests(block_table, [0, 0, 0], LENS), c)
    steps = [[torch.randn(3, configs[sparse].qkv_width, generator=gen).bfloat16() for sparse in SPARSE]
             for _ in range(3)]
    return configs, weights, block_table, caches, steps


@pytest.fixture(scope="module")
def model():
    return make_model()


def count_plans(monkeypatch, backend):
    """Record every make_plan of the backend's op table and the plan of every pa_decode call."""
    table = resolve_backend(backend, "cpu")
    made, used = [], []
    make_plan, pa_decode = table.make_plan, table.pa_decode

    def counting_make_plan(*args, **kwargs):
        made.append(make_plan(*args, **kwargs))
        return made[-1]

    def recording_pa_decode(*args, plan, **kwargs):
        used.append(plan)
        return pa_decode(*args, plan=plan, **kwargs)

    monkeypatch.setattr(table, "make_plan", counting_make_plan)
    monkeypatch.setattr(table, "pa_decode", recording_pa_decode)
    return made, used


def run_step(layers, caches, meta, inputs, check=True):
    return [layer(x, meta, c, check=check) for layer, c, x in zip(layers, caches, inputs)]


@pytest.mark.parametrize("backend", H.backends_here())
def test_a_step_of_many_layers_makes_one_plan(model, backend, monkeypatch):
    configs, weights, block_table, caches, steps = model
    caches = copy.deepcopy(caches)
    layers = [SparseMXFP4Attention(configs[sparse], w, backend=backend) for sparse, w in zip(SPARSE, weights)]
    made, used = count_plans(monkeypatch, backend)
    for step, inputs in enumerate(steps[:1 if interpreted(backend) else 2]):
        meta = AttentionMetadata.for_requests(block_table, [n + step for n in LENS], [1, 1, 1])
        run_step(layers, caches, meta, inputs)
        assert len(made) == step + 1, f"step {step}: {len(made)} plans for {len(SPARSE)} layers, want one per batch"
        step_plans = used[len(SPARSE) * step:]
        assert len(step_plans) == len(SPARSE) and all(p is made[-1] for p in step_plans), \
            "every layer's pa_decode must get the batch's plan"
    plan = made[-1]
    assert (plan.backend, plan.num_rows, plan.max_table_width) == (backend, 3 * 2, max(block_table.shape[1], TOPK))


@pytest.mark.parametrize("backend", H.backends_here())
def test_graph_style_reuse_equals_fresh_planning(model, backend, monkeypatch):
    """One metadata object refilled in place for every step (what the SGLang backend's decode buffers do under CUDA
    graphs) against fresh metadata per step: the same outputs and cache bytes, bit for bit; one plan in all."""
    configs, weights, block_table, caches, steps = model
    kinds = SPARSE[:2] if interpreted(backend) else SPARSE  # a dense and a sparse layer at least
    layers = [SparseMXFP4Attention(configs[sparse], w, backend=backend) for sparse, w in zip(kinds, weights)]
    fresh_caches, reused_caches = copy.deepcopy(caches[:len(kinds)]), copy.deepcopy(caches[:len(kinds)])
    reused = AttentionMetadata.for_requests(block_table.clone(), LENS, [1, 1, 1])
    made, _ = count_plans(monkeypatch, backend)
    steps = steps[:2] if interpreted(backend) else steps  # two at least: the second refills the buffers
    for step, inputs in enumerate(steps):
        fresh = AttentionMetadata.for_requests(block_table, [n + step for n in LENS], [1, 1, 1])
        for name in ("positions", "slot_mapping", "token_request", "block_table"):
            getattr(reused, name).copy_(getattr(fresh, name))  # new contents, same buffers
        want = run_step(layers, fresh_caches, fresh, inputs)
        got = run_step(layers, reused_caches, reused, inputs, check=False)  # the graph path runs unchecked
        for layer, (a, b) in enumerate(zip(got, want)):
            assert torch.equal(a.view(torch.int16), b.view(torch.int16)), f"step {step}, layer {layer}"
    for a, b in zip(reused_caches, fresh_caches):
        for x, y in ((a.k, b.k), (a.v, b.v), (a.index_k, b.index_k)):
            assert (x is None and y is None) or torch.equal(x.records, y.records)
    reused_plans = [p for p in reused.plans.values()]
    assert len(reused_plans) == 1 and len(made) == 1 + len(steps)  # the reused one + one per fresh step
