"""Replayed single ops on CUDA (atom_mxfp4.op_replay, issue 39; marker ``gpu``): bit for bit the ordinary path.

Each public op is called five times with new inputs of the same signatures (new query / qkv / top-k ids, new slots,
caches copied), once with op replay off and once on (calls 3-5 replays). Every output and every cache byte must be
equal, bit for bit, and each op that can replay must hold a trace afterwards. Under a launch hook (a profiler) the
calls are ordinary launches, seen by the hook. What a replay launches is checked on the CPU (tests/test_op_replay.py).
"""

import pytest
import torch

import _helpers as H

from atom_mxfp4 import op_replay, ops
from atom_mxfp4.layer import AttentionMetadata, LayerCaches, LayerConfig, SparseMXFP4Attention
from atom_mxfp4.synthetic import make_weights

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (scripts/gpu_run.sh)")]

DEV = torch.device("cuda")
PROMPTS = [1000, 260, 129]
PAGES = 40
CALLS = 5



def _setup(backend):
    """Caches holding the prompts (written by the backend, op replay off), the decode metadata after them, the
    layer's weights and RoPE table, a plan."""
    config = LayerConfig(max_position=4096)
    width = max(-(-(n + 1) // 128) for n in PROMPTS)
    pages = torch.randperm(PAGES, generator=torch.Generator().manual_seed(3))[: len(PROMPTS) * width]
    block_table = pages.view(len(PROMPTS), width).int().contiguous().to(DEV)
    layer = SparseMXFP4Attention(config, {k: w.to(DEV) for k, w in make_weights(config, seed=4).items()},
                                 backend=backend)
    caches = LayerCaches.allocate(config, PAGES, DEV)
    prefill = AttentionMetadata.for_requests(block_table, [0] * len(PROMPTS), PROMPTS)
    gen = torch.Generator(device=DEV).manual_seed(5)
    qkv = torch.randn(prefill.num_tokens, config.qkv_width, generator=gen, device=DEV).to(torch.bfloat16)
    layer(qkv, prefill, caches)
    meta = AttentionMetadata.for_requests(block_table, PROMPTS, [1] * len(PROMPTS))
    plan = meta.pa_decode_plan(config, DEV, backend)
    return config, layer, caches, meta, plan


def _calls(backend, config, layer, caches, meta, plan):
    """op -> call(seed) -> (the op's outputs, the caches it wrote): each call's inputs new, same signatures."""
    w, rows = layer.weights, meta.num_tokens
    position = meta.positions.to(torch.int32)
    cos_sin = layer.cos_sin_cache(DEV)
    kv = dict(backend=backend, check=False)

    def randn(seed, *shape):
        return torch.randn(*shape, generator=torch.Generator(device=DEV).manual_seed(seed), device=DEV).to(
            torch.bfloat16)

    def topk(seed):
        return ops.index_topk(randn(seed, rows, 1, 128), caches.index_k, meta.block_table, meta.token_request,
                              position, topk=config.topk, backend=backend)

    def write(seed):
        own = [c.records.clone() for c in (caches.k, caches.v, caches.index_k)]
        slots = meta.slot_mapping.roll(seed)  # other slots of the same pages
        q, idx_q = ops.fused_qknorm_rope_write(
            randn(seed, rows, config.qkv_width), meta.positions, w["q_norm"], w["k_norm"], w["idx_q_norm"],
            w["idx_k_norm"], cos_sin, slots, own[0], own[1], own[2], num_q_heads=16, num_kv_heads=1,
            num_index_heads=1, **kv)
        return (q, idx_q), own

    def attend(seed, sparse, with_plan=True):
        out = torch.full((rows, config.group, 128), float("nan"), device=DEV, dtype=torch.bfloat16)
        ops.attend(out, randn(seed, rows, config.group, 128), caches.k, caches.v, meta.block_table,
                   meta.token_request, position, num_kv_heads=1, topk_blocks=topk(seed + 100) if sparse else None,
                   softmax_scale=config.softmax_scale, plan=plan if with_plan else None, **kv)
        return (out,), []

    def pa_decode(seed, with_plan):
        tables, lens = ops.build_sparse_tables(topk(seed + 100), meta.block_table, meta.token_request, position,
                                               num_kv_heads=1, backend=backend)
        out = torch.full((rows, config.group, 128), float("nan"), device=DEV, dtype=torch.bfloat16)
        ops.pa_decode(out, randn(seed, rows, config.group, 128), caches.k, caches.v, tables, lens,
                      softmax_scale=config.softmax_scale, plan=plan if with_plan else None, **kv)
        return (out,), []

    return {
        "write": write,
        "index_topk": lambda seed: ((ops.index_topk(randn(seed, rows, 1, 128), caches.index_k, meta.block_table,
                                                    meta.token_request, position, topk=config.topk, **kv),), []),
        "build_sparse_tables": lambda seed: (ops.build_sparse_tables(topk(seed), meta.block_table,
                                                                     meta.token_request, position, num_kv_heads=1,
                                                                     **kv), []),
        "pa_decode": lambda seed: pa_decode(seed, True),
        "pa_decode_no_plan": lambda seed: pa_decode(seed, False),
        "attend_sparse": lambda seed: attend(seed, True),
        "attend_dense": lambda seed: attend(seed, False),
    }


@pytest.mark.parametrize("backend", ["hopper", "triton"])
def test_replayed_ops_equal_the_ordinary_path_bit_for_bit(backend, monkeypatch):
    calls = _calls(H.usable_or_skip(backend, DEV), *_setup(backend))
    for op, call in calls.items():
        monkeypatch.setattr(op_replay, "ENABLED", False)
        want = [call(seed) for seed in range(CALLS)]
        monkeypatch.setattr(op_replay, "ENABLED", True)
        op_replay.clear()
        got = [call(seed) for seed in range(CALLS)]
        torch.cuda.synchronize()
        for seed, ((outputs, written), (ref_outputs, ref_written)) in enumerate(zip(got, want)):
            for i, (a, b) in enumerate(zip(outputs + tuple(written), ref_outputs + tuple(ref_written))):
                assert (a is None) == (b is None), (op, seed, i)
                if a is not None:
                    assert a.shape == b.shape and a.stride() == b.stride() and a.dtype == b.dtype, (op, seed, i)
                    assert torch.equal(a.view(torch.uint8), b.view(torch.uint8)), f"{op} call {seed} output {i}"
        name = {"attend_sparse": "attend", "attend_dense": "attend", "pa_decode_no_plan": "pa_decode"}.get(op, op)
        traces = [t for key, t in op_replay.traces() if key[0][0] == name]
        # never replayed: dense_tables' torch work (Triton), a plan made per call (zeroed counters, when it splits),
        # build_sparse_tables (called directly: ops.build_sparse_tables does not go through op_replay)
        if not (op == "attend_dense" and backend == "triton") and op not in ("pa_decode_no_plan",
                                                                             "build_sparse_tables"):
            assert any(t is not op_replay.REFUSED for t in traces), f"{op}: no trace kept ({traces})"


def test_a_launch_hook_sees_every_launch_of_a_replayable_op(monkeypatch):
    import triton

    calls = _calls(H.usable_or_skip("hopper", DEV), *_setup("hopper"))
    for seed in range(3):
        calls["pa_decode"](seed)  # the third call a replay: traced by now
    seen = []
    monkeypatch.setattr(triton.knobs.runtime, "launch_enter_hook", lambda metadata: seen.append(metadata))
    (out,), _ = calls["pa_decode"](7)
    torch.cuda.synchronize()
    assert seen, "a launch hook saw no launch of a replayable op"
    assert not torch.isnan(out.float()).any()
