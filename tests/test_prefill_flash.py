"""Dense layers' prefill as flash attention over the dequantized prefix (atom_mxfp4.prefill,
``LayerConfig.flash_prefill_rows``): against the fp64 oracle with the tolerances of tests/test_layer.py, against the
decode path of the same step, mixed with decode rows, and the segments' refusals."""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch

import _helpers as H
from test_layer import CONFIGS, ROUNDED_TOL, Run, check_step, make_requests, rel_l2

from atom_mxfp4 import prefill
from atom_mxfp4.errors import InvalidValue
from atom_mxfp4.layer import AttentionMetadata, LayerConfig, SparseMXFP4Attention

FLASH_ROWS = 64
DENSE = dict(CONFIGS["dense_tp4"], flash_prefill_rows=FLASH_ROWS)
LENS = [450, 129, 1, 97, 63]  # flash: 450, 129, 97; decode: the single token and 63 (< FLASH_ROWS)


def spy(monkeypatch) -> list:
    """Record each SDPA call's (query rows, keys) made by atom_mxfp4.prefill."""
    calls, real = [], prefill._sdpa

    def recorded(q, k, v, scale):
        calls.append((q.shape[2], k.shape[2]))
        return real(q, k, v, scale)

    monkeypatch.setattr(prefill, "_sdpa", recorded)
    return calls


def one_prompt(seed: int):
    """A dense flash layer's run over one 300-token prompt and the prompt's metadata (all of it new tokens)."""
    config = LayerConfig(**DENSE)
    reqs, weights = make_requests(config, [300], seed=seed)
    run = Run(config, reqs, weights, seed=seed + 1)
    return run, reqs[0], AttentionMetadata.for_requests(run.block_table, [0], [300])


@pytest.mark.parametrize("backend", H.backends_here(large_shapes=True))
def test_prefill_against_the_oracle(backend, monkeypatch):
    config = LayerConfig(**DENSE)
    reqs, weights = make_requests(config, LENS, seed=31)
    run = Run(config, reqs, weights, seed=32, backend=backend)
    calls = spy(monkeypatch)
    out, topk, spans = run.step(LENS)
    assert calls == [(450, 450), (129, 129), (97, 97)]  # the short runs went to the decode kernel
    check_step(run, weights, out, topk, spans, config.scale_mode)


@pytest.mark.parametrize("backend", H.backends_here(large_shapes=True))
def test_chunks_after_a_cached_prefix_then_decode(backend, monkeypatch):
    config = LayerConfig(**DENSE)
    reqs, weights = make_requests(config, LENS, seed=33)
    run = Run(config, reqs, weights, seed=34, backend=backend)
    run.step([300, 40, 0, 10, 0])
    calls = spy(monkeypatch)
    out, topk, spans = run.step([148, 87, 1, 85, 62])  # causal from the bottom right: 148 rows over 448 tokens
    assert calls == [(148, 448), (87, 127), (85, 95)]
    check_step(run, weights, out, topk, spans, config.scale_mode)
    calls.clear()
    out, topk, spans = run.step([1, 1, 0, 1, 1])  # decode rows: no segment is long enough
    assert calls == []
    check_step(run, weights, out, topk, spans, config.scale_mode)


def test_equals_the_decode_path_to_bf16_rounding():
    lens = [400, 3, 200]
    flash = LayerConfig(**DENSE)
    plain = dataclasses.replace(flash, flash_prefill_rows=0)
    reqs, weights = make_requests(flash, lens, seed=35)
    outs = []
    for config in (flash, plain):
        run = Run(config, reqs, weights, seed=36)
        run.step([100, 0, 50])
        outs.append(run.step([300, 3, 150])[0])
    assert rel_l2(outs[0], outs[1]) <= ROUNDED_TOL


def test_sparse_layers_and_fp8_queries_keep_the_decode_kernel(monkeypatch):
    calls = spy(monkeypatch)
    for name, extra in (("sparse_tp4", {}), ("dense_tp4", {"q_dtype": torch.float8_e4m3fn})):
        config = LayerConfig(**CONFIGS[name], flash_prefill_rows=FLASH_ROWS, **extra)
        reqs, weights = make_requests(config, [300], seed=37)
        Run(config, reqs, weights, seed=38).step([300])
    assert calls == []


def test_without_segments_every_row_is_a_decode_row(monkeypatch):
    run, qkv, meta = one_prompt(39)
    calls = spy(monkeypatch)
    plain = AttentionMetadata(meta.positions, meta.slot_mapping, meta.token_request, meta.block_table)
    run.layer(qkv, plain, run.caches)
    assert calls == []


@pytest.mark.parametrize("how", ["none takes them", "raises"])
def test_no_sdpa_kernel_falls_back_to_the_decode_kernel(monkeypatch, how):
    config = LayerConfig(**DENSE)
    reqs, weights = make_requests(config, [300, 100], seed=41)
    run = Run(config, reqs, weights, seed=42)
    tried = []

    def refused(q, k, v, scale):
        tried.append(k.shape[1])
        if how == "raises":
            raise RuntimeError("No available kernel")
        return None  # what _sdpa says on a GPU where no flash / memory-efficient kernel takes the tensors

    monkeypatch.setattr(prefill, "_sdpa", refused)
    out, topk, spans = run.step([300, 100])
    check_step(run, weights, out, topk, spans, config.scale_mode)
    assert tried == [1, 16, 1, 16]  # per segment: one KV head (GQA), then K / V per query head, then decode


def test_flash_steps_are_not_replayed(monkeypatch):
    # the segments are host ints the traced launches would not carry: every dense layer on flash metadata runs it
    run, qkv, meta = one_prompt(43)
    calls = spy(monkeypatch)
    outs = [run.layer(qkv, meta, run.caches, check=False) for _ in range(3)]
    assert len(calls) == 3
    assert all(torch.equal(o, outs[0]) for o in outs)


def test_segments_for():
    assert prefill.segments_for([0, 5, 7], [3, 0, 2]) == (prefill.Segment(0, 3, 0, 0), prefill.Segment(3, 2, 2, 7))
    assert prefill.longest(()) == 0


@pytest.mark.parametrize("segments, message", [
    ((prefill.Segment(0, 299, 0, 0),), "300 rows in all"),
    ((prefill.Segment(0, 150, 0, 0), prefill.Segment(151, 150, 0, 150)), "segments[1].row"),
    ((prefill.Segment(0, 300, 1, 0),), "segments[0].request"),
    ((prefill.Segment(0, 300, 0, 1),), "row 0: request 0, position 1"),
    ((prefill.Segment(0, 300, 0, 200),), "segments[0].start + rows"),
    (((0, 300, 0, 0),), "a prefill.Segment"),
])
def test_segments_that_disagree_with_the_rows_are_refused(segments, message):
    run, qkv, meta = one_prompt(45)
    meta.segments = segments
    before = run.caches.k.records.clone()
    with pytest.raises((InvalidValue, TypeError), match=re.escape(message)):
        run.layer(qkv, meta, run.caches)
    assert torch.equal(run.caches.k.records, before)  # refused before the write


def test_config_refuses_a_negative_row_count():
    with pytest.raises(InvalidValue, match="flash_prefill_rows"):
        LayerConfig(flash_prefill_rows=-1)


def test_a_layer_of_flash_config_is_a_kind_of_its_own():
    a = SparseMXFP4Attention(LayerConfig(**DENSE), {"q_norm": torch.zeros(128), "k_norm": torch.zeros(128)})
    b = SparseMXFP4Attention(LayerConfig(**CONFIGS["dense_tp4"]), {"q_norm": torch.zeros(128),
                                                                     "k_norm": torch.zeros(128)})
    assert a._kind != b._kind


# ---- the tiled index scorer in prefill batches (LayerConfig.index_tile_rows) ----
def test_prefill_batches_pass_the_tiled_scorer_and_decode_batches_do_not(monkeypatch):
    from atom_mxfp4 import ops

    seen, real = [], ops.index_topk
    monkeypatch.setattr(ops, "index_topk", lambda *a, **k: seen.append(k["tile_rows"]) or real(*a, **k))
    config = LayerConfig(**CONFIGS["sparse_tp4"])
    assert config.index_tile_rows == 32
    reqs, weights = make_requests(config, [300, 20], seed=47)
    run = Run(config, reqs, weights, seed=48)
    out, topk, spans = run.step([299, 19])  # a run of >= 32 rows: tiled
    check_step(run, weights, out, topk, spans, config.scale_mode)
    run.step([1, 1])  # decode: the row scorer
    off = Run(dataclasses.replace(config, index_tile_rows=0), reqs, weights, seed=48)
    off.step([299, 19])
    assert seen == [32, None, None]


def test_index_tile_rows_is_checked():
    with pytest.raises(InvalidValue, match="index_tile_rows must be 0 \\(off\\), 16 or 32, got 64"):
        LayerConfig(index_tile_rows=64)



@pytest.mark.parametrize("num_kv_heads,length", [(1, 300), (2, 129), (1, 1)])
def test_the_prefix_in_one_launch_equals_the_torch_dequantization(num_kv_heads, length):
    """kernels/triton/prefix (the Hopper / Triton layers' flash prefill, here under the interpreter): the same bits as
    read_pages + bf16 on a request's pages (out of order, among garbage pages), nothing read past ``length``."""
    pytest.importorskip("triton")
    from atom_mxfp4 import quantize_mxfp4
    from atom_mxfp4.kernels.torch.paged import read_pages
    from atom_mxfp4.kernels.triton.prefix import dequantize_prefix

    gen = torch.Generator().manual_seed(length)
    pages, used = 9, -(-length // 128)
    records = torch.randint(0, 256, (pages, num_kv_heads, 8704), generator=gen, dtype=torch.uint8)  # garbage
    table = torch.randperm(pages, generator=gen)[:used + 1].int()  # one page past the prefix: never read
    slots = (table[:used, None].long() * 128 + torch.arange(128)).flatten()[:length].tolist()
    for head in range(num_kv_heads):  # the prefix's tokens as the writer's codec makes them; the rest stays garbage
        data, scale = quantize_mxfp4(torch.randn(length, 128, generator=gen) * 3 ** head)
        for i, slot in enumerate(slots):
            page, token = divmod(slot, 128)
            records[page, head, token * 64:(token + 1) * 64] = data[i]
            records[page, head, 8192 + token * 4: 8192 + (token + 1) * 4] = scale[i]
    got = dequantize_prefix(records, table, num_kv_heads, length)
    ids = table[:used].long()[None, :] * num_kv_heads + torch.arange(num_kv_heads)[:, None]
    want = read_pages(records, ids).flatten(1, 2)[:, :length].to(torch.bfloat16)
    assert got.shape == (num_kv_heads, length, 128) and got.dtype == torch.bfloat16
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))
