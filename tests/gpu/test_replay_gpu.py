"""Replayed layer steps on CUDA (atom_mxfp4.replay, issue 39; marker ``gpu``): bit for bit the ordinary path.

Four layers of one kind (their own weights, caches and inputs) run a chunked prefill and decode steps on one
metadata per step, as a model runner does: the first layer takes the ordinary path, the second is traced, the third
and fourth are replays. The same layers run each step on metadata of their own (every step the ordinary path) on
copies of the caches. Outputs and every cache byte must be equal, bit for bit; decode refills the runner's metadata
in place between steps: with the first layer checked each decode step is traced again, unchecked (the SGLang server's
decode batches) the next decode step replays its first layer too, reading the refilled values. The CPU tests
(tests/test_replay.py) check what a replay launches.
"""

import pytest
import torch

import _helpers as H

from atom_mxfp4.layer import AttentionMetadata, LayerCaches, LayerConfig, SparseMXFP4Attention
from atom_mxfp4.synthetic import make_request, make_weights

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (scripts/gpu_run.sh)")]

DEV = torch.device("cuda")
PROMPTS = [1500, 333, 129, 1]
PAGES = 64
LAYERS = 4



def _records(caches):
    return [None if c is None else c.records for c in (caches.k, caches.v, caches.index_k)]


@pytest.mark.parametrize("check_first", [True, False])
@pytest.mark.parametrize("backend,sparse", [("hopper", True), ("hopper", False), ("triton", True),
                                            ("triton", False)])
def test_replayed_steps_equal_the_ordinary_path_bit_for_bit(backend, sparse, check_first):
    config = LayerConfig(sparse=sparse, max_position=4096)
    requests = [make_request(config, n + 4, needles=[n // 3], seek_from=n, seed=11 + b)
                for b, n in enumerate(PROMPTS)]
    pages = torch.randperm(PAGES, generator=torch.Generator().manual_seed(5))
    width = max(-(-(n + 4) // 128) for n in PROMPTS)
    block_table = pages[: len(PROMPTS) * width].view(len(PROMPTS), width).int().contiguous().to(DEV)
    layers = [SparseMXFP4Attention(config, {k: w.to(DEV) for k, w in make_weights(config, seed=20 + i).items()},
                                   backend=H.usable_or_skip(backend, DEV)) for i in range(LAYERS)]
    shared = [LayerCaches.allocate(config, PAGES, DEV) for _ in range(LAYERS)]
    own = [LayerCaches.allocate(config, PAGES, DEV) for _ in range(LAYERS)]
    half = [n // 2 for n in PROMPTS]
    steps = [([0] * len(PROMPTS), half), (half, [n - h for n, h in zip(PROMPTS, half)])]
    steps += [([n + i for n in PROMPTS], [1] * len(PROMPTS)) for i in range(3)]
    runner_meta = None  # decode: one metadata refilled in place, as a runner's buffers
    replayed = refill_replays = 0
    ordinary = []  # the layers of the current step that ran the ordinary path (their _launches called)
    for i, layer in enumerate(layers):
        own_launches = layer._launches
        layer._launches = lambda *a, _i=i, _f=own_launches, **k: ordinary.append(_i) or _f(*a, **k)
    for prefix, new in steps:
        step = AttentionMetadata.for_requests(block_table, prefix, new)
        if new[0] == 1:
            if runner_meta is None or runner_meta.num_tokens != step.num_tokens:
                runner_meta = step
            else:
                for name in ("positions", "slot_mapping", "token_request", "block_table"):
                    getattr(runner_meta, name).copy_(getattr(step, name))
            meta = runner_meta
        else:
            meta = step
        kept = dict(meta.steps)
        ordinary.clear()
        for i, layer in enumerate(layers):
            # a different token mix per layer: the layers' inputs differ, as in a model
            qkv = torch.cat([r.qkv[p : p + n].roll(i, dims=-1) for r, p, n in zip(requests, prefix, new)]).to(DEV)
            got = layer(qkv, meta, shared[i], check=check_first and i == 0)
            alone = AttentionMetadata.for_requests(block_table, prefix, new)
            seen = list(ordinary)
            want = layer(qkv, alone, own[i], return_topk=True)[0]
            ordinary[:] = seen  # (the reference's own ordinary path is not the step's)
            assert torch.equal(got.view(torch.int16), want.view(torch.int16)), f"layer {i}: output differs"
            for mine, ref in zip(_records(shared[i]), _records(own[i])):
                if ref is not None:
                    assert torch.equal(mine, ref), f"layer {i}: cache bytes differ"
        trace = next(iter(meta.steps.values()))
        replayed += bool(trace.launches)
        # a refill replay: the trace kept from the last batch, and no layer of the step on the ordinary path
        refill_replays += bool(kept) and all(meta.steps[k] is t for k, t in kept.items()) and not ordinary
    # every kind replays (the Triton dense step's tables are made once per batch: AttentionMetadata.dense_tables),
    # except a sparse
    # prefill step whose index runs the tiled scorer (LayerConfig.index_tile_rows: torch work on the tiles)
    tiled = sum(sparse and max(new) >= config.index_tile_rows for _, new in steps)
    assert replayed == len(steps) - tiled, "a step of four layers on one metadata was not replayed"
    # unchecked, the second and third decode steps replay the first's trace (refilled metadata; the Triton dense
    # step's tables made again in their buffers first)
    want = 0 if check_first else 2
    assert refill_replays == want, f"{refill_replays} decode steps replayed a trace kept from the last batch"
