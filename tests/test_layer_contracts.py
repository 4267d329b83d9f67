"""The layer at the edges of its contract (issue 11): configs and metadata refused at construction, a refused step
that writes nothing (the forward validates before its first write), norm weights replaced or updated after the first
step, RoPE tables shared between layers of different RoPE. Both backends where kernels run.
"""

import copy
import os

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

import pytest

from atom_mxfp4 import ops
from atom_mxfp4.layer import AttentionMetadata, LayerCaches, LayerConfig, SparseMXFP4Attention
from atom_mxfp4.synthetic import make_weights

import _helpers as H

BACKENDS = ["torch", "triton"]
I32 = torch.int32


# ---- LayerConfig and AttentionMetadata.for_requests: refused at construction, naming the field -------------------
@pytest.mark.parametrize("field, value, exc", [
    ("topk", -1, ValueError), ("topk", 0, ValueError), ("topk", ops.MAX_TOPK + 1, ValueError),
    ("topk", 2.0, ValueError), ("topk", True, ValueError),
    ("rotary_dim", 63, ValueError), ("rotary_dim", 130, ValueError), ("rotary_dim", 0, ValueError),
    ("eps", 0.0, ValueError), ("eps", -1e-6, ValueError), ("eps", float("nan"), ValueError),
    ("eps", float("inf"), ValueError), ("eps", "1e-6", ValueError),
    ("init_blocks", -1, ValueError), ("local_blocks", -2, ValueError), ("local_blocks", 1.0, ValueError),
    ("max_position", 0, ValueError), ("max_position", 2**31, ValueError),
    ("softmax_scale", float("nan"), ValueError), ("softmax_scale", float("inf"), ValueError),
    ("softmax_scale", 0.0, ValueError), ("rope_theta", -5.0, ValueError), ("rope_theta", float("nan"), ValueError),
    ("num_q_heads", 0, ValueError), ("num_kv_heads", 0, ValueError), ("num_q_heads", 16.0, ValueError),
    ("sparse", 1, TypeError), ("q_dtype", torch.float16, TypeError), ("scale_mode", "round", ValueError),
    ("head_dim", 64, ValueError), ("page_size", 64, ValueError),
])
def test_layer_config_refusals(field, value, exc):
    with pytest.raises(exc) as ei:
        LayerConfig(**{field: value})
    H.err_names(ei, field)


def test_sparse_layer_index_heads_bound():
    with pytest.raises(ValueError) as ei:
        LayerConfig(num_q_heads=34, num_kv_heads=17, num_index_heads=17)
    H.err_names(ei, "num_index_heads", "16")


def test_layer_config_numbers_are_normalized():
    config = LayerConfig(eps=1, softmax_scale=1, rope_theta=10000)
    assert (config.eps, config.softmax_scale, config.rope_theta) == (1.0, 1.0, 10000.0)
    assert all(isinstance(x, float) for x in (config.eps, config.softmax_scale, config.rope_theta))


@pytest.mark.parametrize("prefix, new, names", [
    ([0, -1], [3, 1], ["prefix_lens[1]"]),
    ([0, 0], [3, -2], ["new_lens[1]"]),
    ([0, 0], [3, 1.5], ["new_lens[1]"]),
    ([0, 0], [True, 1], ["new_lens[0]"]),
    ([250, 0], [10, 1], ["prefix_lens[0] + new_lens[0]", "256"]),  # past the 2-page block table
    ([0], [3], ["prefix_lens / new_lens"]),
    ([0, 200], [1, 1], ["block_table", "-1", "request 1"]),  # request 1 writes into page -1
])
def test_for_requests_refusals(prefix, new, names):
    block_table = torch.tensor([[0, 1], [2, -1]], dtype=I32)
    with pytest.raises(ValueError) as ei:
        AttentionMetadata.for_requests(block_table, prefix, new)
    H.err_names(ei, *names)


def test_for_requests_types_and_empty_batch():
    with pytest.raises(TypeError) as ei:
        AttentionMetadata.for_requests(torch.zeros(1, 2, dtype=torch.int64), [0], [1])
    H.err_names(ei, "block_table")
    meta = AttentionMetadata.for_requests(torch.zeros(0, 2, dtype=I32), [], [])
    assert meta.num_tokens == 0 and meta.positions.dtype == torch.int64 and meta.token_request.dtype == I32


# ---- a refused step writes nothing ----------------------------------------------------------------------------------
def small_step(sparse, seed=0):
    """A 2-request batch (a prefill of 200 tokens after 0, a decode after 130) on fresh caches with a prefix."""
    config = LayerConfig(num_q_heads=4, num_kv_heads=1, num_index_heads=1, sparse=sparse, topk=2, max_position=1024)
    gen = torch.Generator().manual_seed(seed)
    block_table = torch.tensor([[3, 1, 4], [0, 2, 5]], dtype=I32)
    caches = LayerCaches.allocate(config, 7)
    weights = make_weights(config, seed)
    layer = SparseMXFP4Attention(config, weights, backend="torch")
    layer(torch.randn(130, config.qkv_width, generator=gen).bfloat16(),
          AttentionMetadata.for_requests(block_table[1:], [0], [130]), LayerCaches(
              caches.k, caches.v, caches.index_k))  # request 1's prefix
    qkv = torch.randn(201, config.qkv_width, generator=gen).bfloat16()
    return config, weights, caches, block_table, qkv, AttentionMetadata.for_requests(block_table, [0, 130], [200, 1])


BAD_METADATA = {
    # name: (how one valid field of the metadata is broken, exception, names in the message)
    "token_request_out_of_range": (lambda m: m.token_request.fill_(2), ValueError, ["meta.token_request"]),
    "token_request_int64": (lambda m: setattr(m, "token_request", m.token_request.long()), TypeError,
                            ["meta.token_request"]),
    "token_request_strided": (lambda m: setattr(m, "token_request", m.token_request.repeat_interleave(2)[::2]),
                              ValueError, ["meta.token_request", "contiguous"]),
    "block_table_entry_read_past_the_cache": (lambda m: m.block_table[0].copy_(torch.tensor([3, 99, 4])), ValueError,
                                              ["meta.block_table", "99"]),
    "block_table_int64": (lambda m: setattr(m, "block_table", m.block_table.long()), TypeError, ["meta.block_table"]),
    "block_table_on_another_device": (lambda m: setattr(m, "block_table", m.block_table.to("meta")), ValueError,
                                      ["meta.block_table"]),
    "position_past_the_table": (lambda m: setattr(m, "block_table", m.block_table[:, :1].contiguous()), ValueError,
                                ["meta.positions"]),
    "slot_written_twice": (lambda m: m.slot_mapping[5].copy_(m.slot_mapping[6]), ValueError, ["slot_mapping"]),
    "positions_int32": (lambda m: setattr(m, "positions", m.positions.int()), TypeError, ["positions"]),
    "slot_not_where_the_table_reads": (lambda m: m.slot_mapping[200].copy_(6 * 128 + 3), ValueError,
                                       ["meta.slot_mapping", "token 200"]),
}


@pytest.mark.parametrize("case", list(BAD_METADATA))
@pytest.mark.parametrize("sparse", [True, False], ids=["sparse", "dense"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_refused_step_leaves_the_caches_byte_identical(backend, sparse, case):
    """Each case used to be refused by an op after the fused write had stored the step's K / V / index-K."""
    config, weights, caches, block_table, qkv, meta = small_step(sparse)
    mutate, exc, names = BAD_METADATA[case]
    meta = copy.deepcopy(meta)
    mutate(meta)
    before = [None if c is None else c.records.clone() for c in (caches.k, caches.v, caches.index_k)]
    with pytest.raises(exc) as ei:
        SparseMXFP4Attention(config, weights, backend=backend)(qkv, meta, caches)
    H.err_names(ei, *names)
    for got, want in zip((caches.k, caches.v, caches.index_k), before):
        assert (got is None and want is None) or torch.equal(got.records, want), "a refused step wrote the cache"


@pytest.mark.parametrize("name", ["k", "v", "index_k"])
def test_cache_records_off_16_byte_alignment_are_refused_before_the_write(name):
    """Records wrapped at an unaligned address (a view into a wider buffer): the Hopper and FlyDSL readers refuse
    them, and they run after the fused write, so the layer refuses them in ``validate`` first, naming the cache, and
    the step writes nothing (on every backend: the rule cannot depend on which backend reads)."""
    config, weights, caches, block_table, qkv, meta = small_step(True)
    records = getattr(caches, name).records
    flat = torch.zeros(records.numel() + 1, dtype=torch.uint8)
    flat[1:] = records.flatten()
    shifted = flat[1:].view(records.shape)
    moved = LayerCaches(**{n: getattr(caches, n) for n in ("k", "v", "index_k")})
    setattr(moved, name, type(getattr(caches, name))(records=shifted))
    before = [c.records.clone() for c in (moved.k, moved.v, moved.index_k)]
    with pytest.raises(ValueError) as ei:
        SparseMXFP4Attention(config, weights, backend="torch")(qkv, meta, moved)
    H.err_names(ei, f"caches.{name}", "16-byte aligned", "storage offset 1")
    for got, want in zip((moved.k, moved.v, moved.index_k), before):
        assert torch.equal(got.records, want), "a refused step wrote a cache"


# ---- norm weights are read at every step ------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_replaced_in_place_and_strided_weights_take_effect(backend):
    config, weights, caches, block_table, qkv, meta = small_step(True, seed=1)
    qkv, meta = qkv[-1:], AttentionMetadata.for_requests(block_table[1:], [130], [1])  # one decode row: cheap
    layer = SparseMXFP4Attention(config, dict(weights), backend=backend)

    def fresh(w):  # what a new layer with weights ``w`` gives on copies of the caches
        return SparseMXFP4Attention(config, w, backend=backend)(qkv, meta, copy.deepcopy(caches))

    layer(qkv, meta, copy.deepcopy(caches))  # first step: the old code cached the weights here
    new = {name: w * 2 + 0.1 for name, w in weights.items()}
    layer.weights["q_norm"], layer.weights["k_norm"] = new["q_norm"], new["k_norm"]  # replaced entries
    want = fresh(dict(weights, q_norm=new["q_norm"], k_norm=new["k_norm"]))
    assert torch.equal(layer(qkv, meta, copy.deepcopy(caches)), want)
    layer.weights["idx_q_norm"].mul_(-3)  # updated in place
    want = fresh(dict(weights, q_norm=new["q_norm"], k_norm=new["k_norm"], idx_q_norm=layer.weights["idx_q_norm"]))
    assert torch.equal(layer(qkv, meta, copy.deepcopy(caches)), want)
    strided = {name: torch.stack([w, torch.full_like(w, 9.0)], 1)[:, 0] for name, w in weights.items()}
    assert not strided["k_norm"].is_contiguous()
    assert torch.equal(fresh(strided), fresh({name: w.clone() for name, w in weights.items()}))


def test_weights_on_another_device_are_refreshed_in_place():
    """A weight on another device is copied once and refreshed into the same buffer (graph-safe) when it changes."""
    config = LayerConfig(max_position=256)
    layer = SparseMXFP4Attention(config, make_weights(config))
    first = layer.weights_on("meta")["q_norm"]
    assert layer.weights_on("meta")["q_norm"] is first and first.is_contiguous()
    version = first._version
    layer.weights["q_norm"].add_(1.0)  # in place: the copy is refreshed, same buffer
    assert layer.weights_on("meta")["q_norm"] is first and first._version > version
    layer.weights["k_norm"] = torch.zeros(128, dtype=torch.float64)  # replaced with another dtype: a new copy
    assert layer.weights_on("meta")["k_norm"].dtype == torch.float64


# ---- shared RoPE tables -----------------------------------------------------------------------------------------
def test_layers_of_another_rope_get_their_own_table_from_a_shared_dict():
    shared = {}
    base = LayerConfig(max_position=512)
    others = [LayerConfig(max_position=512, rotary_dim=32), LayerConfig(max_position=512, rope_theta=1e4),
              LayerConfig(max_position=256)]
    layers = [SparseMXFP4Attention(c, make_weights(c), rope_tables=shared) for c in [base] + others]
    tables = [layer.cos_sin_cache("cpu") for layer in layers]
    for config, table in zip([base] + others, tables):  # each its own config's table, computed here
        angles = torch.arange(config.max_position, dtype=torch.float64)[:, None] / config.rope_theta ** (
            torch.arange(0, config.rotary_dim, 2, dtype=torch.float64) / config.rotary_dim)
        assert torch.equal(table, torch.cat([angles.cos(), angles.sin()], 1).float())
    assert len(shared) == 4
    again = SparseMXFP4Attention(base, make_weights(base), rope_tables=shared)
    assert again.cos_sin_cache("cpu") is tables[0]


@pytest.mark.parametrize("sparse", [True, False], ids=["sparse", "dense"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_an_empty_step_runs_every_op_and_writes_nothing(backend, sparse):
    """No new token in the batch (every new_len 0): each op sees 0 rows; out [0, nq * 128], caches unchanged."""
    config, weights, caches, block_table, _, _ = small_step(sparse)
    before = [None if c is None else c.records.clone() for c in (caches.k, caches.v, caches.index_k)]
    meta = AttentionMetadata.for_requests(block_table, [0, 130], [0, 0])
    qkv = torch.empty(0, config.qkv_width, dtype=torch.bfloat16)
    out, topk = SparseMXFP4Attention(config, weights, backend=backend)(qkv, meta, caches, return_topk=True)
    assert out.shape == (0, config.num_q_heads * 128) and (topk is None or topk.shape == (1, 0, config.topk))
    for got, want in zip((caches.k, caches.v, caches.index_k), before):
        assert (got is None and want is None) or torch.equal(got.records, want)
