"""ops.attend (a layer's attention over its rows' request pages) against its definition: pa_decode over the tables of
dense_tables / build_sparse_tables, bit for bit, on every backend here; dense_tables against its rule; the checks
(errors name the argument, the expected and the actual value); fused ops are never borrowed.

The fused Hopper kernel (one launch, no tables) is tested against the same definition on the H200:
tests/gpu/test_hopper_gpu.py::test_attend_fused_equals_the_composition.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

import _helpers as H

from atom_mxfp4 import backends, ops, registry

SCALE = 128 ** -0.5


def _composition(case, backend):
    """pa_decode over the tables ``attend`` is defined by (the same backend's ops)."""
    bt, rr, rp, nkv = case["block_table"], case["row_request"], case["row_position"], case["num_kv_heads"]
    if case["topk_blocks"] is None:
        tables, lens = ops.dense_tables(bt, rr, rp, num_kv_heads=nkv)
    else:
        tables, lens = ops.build_sparse_tables(case["topk_blocks"], bt, rr, rp, num_kv_heads=nkv,
                                               pages_per_block=case["pages_per_block"], backend=backend)
    out = torch.full_like(case["q"], float("nan"))
    ops.pa_decode(out, case["q"], case["k"], case["v"], tables, lens, softmax_scale=SCALE, backend=backend)
    return out, tables, lens


def _attend(case, backend, **kw):
    out = torch.full_like(case["q"], float("nan"))  # poisoned: every row must be written
    ops.attend(out, case["q"], case["k"], case["v"], case["block_table"], case["row_request"], case["row_position"],
               num_kv_heads=case["num_kv_heads"], topk_blocks=case["topk_blocks"],
               pages_per_block=case["pages_per_block"], softmax_scale=SCALE, backend=backend, **kw)
    return out


@pytest.mark.parametrize("nkv", [1, 3])
def test_dense_tables_rule(nkv):
    gen = torch.Generator().manual_seed(3)
    case = H.attend_case(gen, [300, 1, 129], nkv=nkv, group=2)
    tables, lens = ops.dense_tables(case["block_table"], case["row_request"], case["row_position"], num_kv_heads=nkv)
    bt = case["block_table"].tolist()
    rows = len(case["row_request"]) * nkv
    assert tables.shape == (rows, case["block_table"].shape[1]) and lens.shape == (rows,)
    for t, (req, pos) in enumerate(zip(case["row_request"].tolist(), case["row_position"].tolist())):
        for h in range(nkv):
            assert tables[t * nkv + h].tolist() == [page * nkv + h for page in bt[req]]
            assert int(lens[t * nkv + h]) == pos + 1
    assert tables.dtype == lens.dtype == torch.int32 and tables.is_contiguous() and lens.is_contiguous()


@pytest.mark.parametrize("backend", H.backends_here())
@pytest.mark.parametrize("kind", ["dense", "sparse", "sparse-ppb2"])
def test_attend_is_pa_decode_over_its_tables(backend, kind):
    gen = torch.Generator().manual_seed({"dense": 1, "sparse": 2, "sparse-ppb2": 4}[kind])
    topk, ppb = {"dense": (None, 1), "sparse": (3, 1), "sparse-ppb2": (2, 2)}[kind]
    case = H.attend_case(gen, [400, 60, 257], nkv=2, group=3, topk=topk, ppb=ppb)
    want, tables, lens = _composition(case, backend)
    got = _attend(case, backend)
    assert torch.equal(got.view(torch.int16), want.view(torch.int16)), "attend differs from its composition"
    ref = H.attention_rows(case["q"].double().numpy(), case["k"], case["v"], tables, lens, SCALE)
    got = got.float().numpy()
    assert np.isfinite(got).all(), "garbage past a request's tokens (or an unwritten row) reached out"
    assert (got[lens.numpy() == 0] == 0).all()
    rel = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert rel < H.ATTN_REL_TOL, rel


def test_attend_with_a_plan_and_query_scale():
    gen = torch.Generator().manual_seed(5)
    case = H.attend_case(gen, [200, 90], nkv=1, group=4, topk=2)
    rows = case["q"].shape[0]
    plan = ops.plan_pa_decode(rows, case["block_table"].shape[1], 4, "cpu", backend="torch")
    scale = torch.rand(rows) + 0.5
    out = _attend(case, "torch", plan=plan, query_scale=scale)
    tables, lens = ops.build_sparse_tables(case["topk_blocks"], case["block_table"], case["row_request"],
                                           case["row_position"], num_kv_heads=1, backend="torch")
    want = torch.empty_like(out)
    ops.pa_decode(want, case["q"], case["k"], case["v"], tables, lens, softmax_scale=SCALE, query_scale=scale,
                  backend="torch")
    assert torch.equal(out.view(torch.int16), want.view(torch.int16))


def test_attend_errors_name_argument_expected_and_actual():
    gen = torch.Generator().manual_seed(6)
    case = H.attend_case(gen, [200, 90], nkv=2, group=2, topk=2)

    def call(**change):
        c = {**case, **change}
        out = torch.empty_like(c["q"])
        ops.attend(out, c["q"], c["k"], c["v"], c["block_table"], c["row_request"], c["row_position"],
                   num_kv_heads=c["num_kv_heads"], topk_blocks=c["topk_blocks"],
                   pages_per_block=c["pages_per_block"], softmax_scale=SCALE, backend="torch",
                   plan=c.get("plan"))

    with pytest.raises(ValueError) as e:
        call(q=case["q"][:-1].contiguous())
    H.err_names(e, "q.shape[0]", "len(row_request) x num_kv_heads")
    with pytest.raises(ValueError) as e:
        call(num_kv_heads=1, topk_blocks=case["topk_blocks"][:1].contiguous())
    H.err_names(e, "k_cache.shape[1]", "num_kv_heads = 1")
    with pytest.raises(ValueError) as e:
        call(topk_blocks=None, pages_per_block=2)
    H.err_names(e, "pages_per_block", "dense")
    bad_table = case["block_table"].clone()
    bad_table[0, 0] = case["k"].shape[0]  # a page past the cache
    with pytest.raises(ValueError) as e:
        call(block_table=bad_table)
    H.err_names(e, "block_table (entries a row can see)")
    unordered = case["topk_blocks"].clone()
    unordered[1, 1, 0], unordered[1, 1, 1] = 1, 0
    with pytest.raises(ValueError) as e:
        call(topk_blocks=unordered)
    H.err_names(e, "topk_blocks", "ascending")
    small = ops.plan_pa_decode(1, 1, 2, "cpu", backend="torch")
    with pytest.raises(ValueError) as e:
        call(plan=small)
    H.err_names(e, "plan.num_rows")


def test_fused_ops_are_never_borrowed(monkeypatch):
    """A backend borrowing from one that ships ``attend`` gets the composition, not the lender's fused launch (it
    would run the lender's pa_decode instead of its own)."""
    fused = SimpleNamespace(**{op: object() for op in registry.OPS + registry.FUSED_OPS})
    own = SimpleNamespace(pa_decode=object(), make_plan=object())

    class Lender(registry.Backend):
        ships = registry.OPS + registry.FUSED_OPS

        @classmethod
        def load(cls):
            return fused

    class Borrower(registry.Backend):
        ships = ("pa_decode", "make_plan")
        borrows = "lender-test"

        @classmethod
        def load(cls):
            return own

    monkeypatch.setitem(registry._REGISTRY, "lender-test", Lender)
    monkeypatch.setitem(registry._REGISTRY, "borrower-test", Borrower)
    assert backends._compose("lender-test").attend is fused.attend
    table = backends._compose("borrower-test")
    assert not hasattr(table, "attend") and table.pa_decode is own.pa_decode
    assert table.index_topk is fused.index_topk


def test_a_backend_may_decline_attend_and_ops_composes(monkeypatch):
    """A backend's attend returns None where its composition is faster (Hopper: ``fuses_sparse``): ops.attend then
    runs build_sparse_tables + pa_decode of that backend; a backend that runs it returns out and nothing else runs."""
    gen = torch.Generator().manual_seed(8)
    case = H.attend_case(gen, [300, 70], nkv=1, group=2, topk=2)
    want, _, _ = _composition(case, "torch")
    calls = []
    torch_ops = backends.resolve_backend("torch", "cpu")

    def table(attend):
        return SimpleNamespace(**{**vars(torch_ops), "attend": attend})

    def declines(out, *args, **kwargs):
        calls.append("declined")
        return None

    monkeypatch.setattr(ops, "resolve_backend", lambda name, device: table(declines))
    got = _attend(case, None)
    assert calls == ["declined"] and torch.equal(got.view(torch.int16), want.view(torch.int16))

    def runs(out, *args, **kwargs):
        calls.append("ran")
        return out.zero_()

    monkeypatch.setattr(ops, "resolve_backend", lambda name, device: table(runs))
    assert calls[-1:] != ["ran"] and (_attend(case, None) == 0).all() and calls[-1] == "ran"


@pytest.mark.parametrize("backend", H.backends_here())
def test_sparse_attend_with_topk_0_writes_zeros(backend):
    gen = torch.Generator().manual_seed(9)
    case = H.attend_case(gen, [300, 70], nkv=2, group=3, topk=0)
    assert case["topk_blocks"].shape[2] == 0
    got = _attend(case, backend)
    assert torch.equal(got, torch.zeros_like(got))
