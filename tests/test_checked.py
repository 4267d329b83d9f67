"""Attribute checks remembered by signature (atom_mxfp4.checked.attributes): a pass is remembered for the tensors'
dtypes, devices, sizes and strides and the scalars' values and types, and never stands for anything else: every
other argument runs the checks, which refuse it by name. The value checks (``once``) are not remembered this way."""

from __future__ import annotations

import pytest
import torch

from atom_mxfp4 import checked, ops
from atom_mxfp4.layer import LayerCaches, LayerConfig


@pytest.fixture(autouse=True, params=["TensorGuards", "python"])
def guard(request, monkeypatch):
    """Each test with torch's C++ check and with the Python one op replay falls back to where torch lacks it."""
    if request.param == "python":
        from atom_mxfp4 import op_replay
        monkeypatch.setattr(checked, "_guard", lambda tensors: op_replay._Signatures(*tensors))
    checked.clear()
    yield request.param
    checked.clear()


def _counting():
    runs = []
    return runs, lambda: runs.append(1)


def test_a_pass_is_remembered_per_signature_and_scalars_of_the_same_type():
    runs, check = _counting()
    t = torch.zeros(4, 8)
    for tensor, scalars in ((t, (1, 0.5)), (t.clone(), (1, 0.5)), (t + 1, (1, 0.5))):  # same signature: once
        checked.attributes("op", scalars, (tensor, None), check)
    assert len(runs) == 1
    others = [(t.t(), (1, 0.5)), (t[:, :4], (1, 0.5)), (t.double(), (1, 0.5)), (torch.zeros(4, 9), (1, 0.5)),
              (t, (True, 0.5)), (t, (1.0, 0.5)), (t, (2, 0.5)), (t.requires_grad_(False).view(8, 4), (1, 0.5))]
    for tensor, scalars in others:  # a stride, a dtype, a size, a scalar's type or value: checked again
        before = len(runs)
        checked.attributes("op", scalars, (tensor, None), check)
        assert len(runs) == before + 1, (tensor.shape, tensor.stride(), tensor.dtype, scalars)
    before = len(runs)
    checked.attributes("op", (1, 0.5), (None, t), check)  # another tensor absent: another key
    checked.attributes("other", (1, 0.5), (t, None), check)  # another op
    assert len(runs) == before + 2


def test_what_is_not_a_plain_tensor_or_hashable_is_checked_every_time():
    class Sub(torch.Tensor):
        pass

    runs, check = _counting()
    sub = torch.zeros(3).as_subclass(Sub)
    for _ in range(3):
        checked.attributes("op", (), (sub,), check)
        checked.attributes("op", (), ([1, 2, 3],), check)
        checked.attributes("op", ([1],), (torch.zeros(3),), check)  # an unhashable scalar
    assert len(runs) == 9


def test_a_failed_check_is_not_remembered():
    def refuse():
        raise ValueError("refused")

    for _ in range(2):
        with pytest.raises(ValueError, match="refused"):
            checked.attributes("op", (1,), (torch.zeros(2),), refuse)


def _rows_case():
    """A batch of two decode rows (MiniMax-M3 rank geometry): the layer's caches, metadata and top-k ids."""
    from atom_mxfp4.layer import AttentionMetadata

    config = LayerConfig()
    caches = LayerCaches.allocate(config, 9)
    dense = LayerCaches.allocate(LayerConfig(sparse=False), 9)
    block_table = torch.tensor([[1, 2], [3, 4]], dtype=torch.int32)
    meta = AttentionMetadata.for_requests(block_table, [199, 4], [1, 1])
    rows = (meta.block_table, meta.token_request, meta.row_position)
    topk = ops.index_topk(torch.zeros(2, 1, 128, dtype=torch.bfloat16), caches.index_k, *rows, backend="torch")
    return config, caches, dense, meta, rows, topk


def _op_calls():
    """op name -> (call(**changes) of that op with check=True on the torch backend, good by default)."""
    config, caches, dense, meta, rows, topk = _rows_case()
    q = torch.zeros(2, 16, 128, dtype=torch.bfloat16)
    idx_q = torch.zeros(2, 1, 128, dtype=torch.bfloat16)
    qkv = torch.zeros(2, config.qkv_width, dtype=torch.bfloat16)
    w = torch.ones(128)
    from atom_mxfp4.rope import rope_cos_sin

    table = rope_cos_sin(1024, 64, 5e6)

    def call(fn, args, kwargs):
        return lambda **changes: fn(*args, **{**kwargs, **changes})

    attention = dict(softmax_scale=0.1, backend="torch")
    return {
        "write": call(ops.fused_qknorm_rope_write, (qkv, meta.positions, w, w, w, w, table, meta.slot_mapping,
                                                    caches.k, caches.v, caches.index_k),
                      dict(num_q_heads=16, num_kv_heads=1, num_index_heads=1, backend="torch")),
        "index_topk": call(ops.index_topk, (idx_q, caches.index_k, *rows), dict(topk=16, backend="torch")),
        "build_sparse_tables": call(ops.build_sparse_tables, (topk, *rows), dict(num_kv_heads=1, backend="torch")),
        "attend_sparse": call(ops.attend, (torch.empty_like(q), q, caches.k, caches.v, *rows),
                              dict(num_kv_heads=1, topk_blocks=topk, **attention)),
        "attend_dense": call(ops.attend, (torch.empty_like(q), q, dense.k, dense.v, *rows),
                             dict(num_kv_heads=1, **attention)),
    }


@pytest.mark.parametrize("op, changes, match", [
    ("write", dict(num_q_heads=True), "num_q_heads"),
    ("write", dict(eps=float("nan")), "eps"),
    ("write", dict(rotary_dim=64.0), "rotary_dim"),
    ("index_topk", dict(topk=True), "topk"),
    ("index_topk", dict(tile_rows=16.0), "tile_rows"),
    ("index_topk", dict(init_blocks=-1), "init_blocks"),
    ("build_sparse_tables", dict(num_kv_heads=2), "num_kv_heads|topk_blocks"),
    ("build_sparse_tables", dict(pages_per_block=True), "pages_per_block"),
    ("attend_sparse", dict(num_kv_heads=True), "num_kv_heads"),
    ("attend_sparse", dict(num_kv_heads=2), "num_kv_heads|k_cache"),
    ("attend_dense", dict(pages_per_block=2), "pages_per_block"),
    ("attend_dense", dict(softmax_scale=[0.1]), "softmax_scale"),
    ("attend_dense", dict(query_scale=torch.ones(3)), "query_scale"),
])
def test_a_bad_scalar_is_refused_by_name_after_good_calls_were_remembered(op, changes, match):
    call = _op_calls()[op]
    for _ in range(3):
        call()
    with pytest.raises((TypeError, ValueError), match=match):
        call(**changes)


def _decode_args():
    caches = LayerCaches.allocate(LayerConfig(sparse=False), 9)
    q = torch.zeros(2, 16, 128, dtype=torch.bfloat16)
    tables = torch.tensor([[1, 2], [3, 4]], dtype=torch.int32)
    lens = torch.tensor([200, 5], dtype=torch.int32)
    return dict(out=torch.empty_like(q), q=q, k_cache=caches.k, v_cache=caches.v, tables=tables, context_lens=lens)


@pytest.mark.parametrize("change, match", [
    (lambda a: a.update(q=a["q"].float()), "q"),
    (lambda a: a.update(out=a["out"].transpose(0, 1).contiguous().transpose(0, 1)), "out"),
    (lambda a: a.update(tables=torch.tensor([[1, 0, 2, 0], [3, 0, 4, 0]], dtype=torch.int32)[:, ::2]), "tables"),
    (lambda a: a.update(context_lens=a["context_lens"].long()), "context_lens"),
    (lambda a: a.update(context_lens=[200, 5]), "context_lens"),
    (lambda a: a.update(softmax_scale=True), "softmax_scale"),
    (lambda a: a.update(softmax_scale=-0.5), "softmax_scale"),
    (lambda a: a.update(query_scale=torch.ones(2, dtype=torch.float64)), "query_scale"),
])
def test_a_bad_argument_is_refused_by_name_after_good_calls_were_remembered(change, match):
    good = _decode_args()
    for _ in range(3):
        ops.pa_decode(**good, softmax_scale=0.1, backend="torch")
    bad = {**_decode_args(), "softmax_scale": 0.1}
    change(bad)
    with pytest.raises((TypeError, ValueError), match=match):
        ops.pa_decode(**bad, backend="torch")
