"""Every refusal of DESIGN §6: the documented exception type, and a message naming the argument and the actual
value ("<arg> must be <expected>, got <actual>").

Each case starts from a valid call and breaks exactly one thing. Device mismatch uses the ``meta`` device so it
runs on a CPU-only machine.
"""

from __future__ import annotations


import pytest
import torch

import _helpers as H

from atom_mxfp4 import backends, ops
from atom_mxfp4.format import dequantize_mxfp4, quantize_mxfp4, scale_exponent
from atom_mxfp4.layout import qkv_width

META = torch.device("meta")
I32, I64, BF16 = torch.int32, torch.int64, torch.bfloat16


def rec(pages=2, heads=1, size=8704, dtype=torch.uint8):
    return torch.zeros(pages, heads, size, dtype=dtype)


def assert_refused(cases, case, make_args, call):
    """Break one thing of a valid call (``cases[case]`` = (mutate, exception, argument names)) and check the refusal."""
    mutate, exc, names = cases[case]
    args = make_args()
    mutate(args)
    with pytest.raises(exc) as ei:
        call(args)
    H.err_names(ei, *names)


# ---- pa_decode -------------------------------------------------------------------------------------------------
def decode_args(R=3, G=4):
    return dict(out=torch.zeros(R, G, 128, dtype=BF16), q=torch.randn(R, G, 128).to(BF16), k_cache=rec(),
                v_cache=rec(), tables=torch.zeros(R, 2, dtype=I32), context_lens=torch.tensor([1, 2, 0], dtype=I32))


def call_decode(a, **kw):
    return ops.pa_decode(a["out"], a["q"], a["k_cache"], a["v_cache"], a["tables"], a["context_lens"],
                         softmax_scale=kw.pop("softmax_scale", 0.088), backend="torch", **kw)


DECODE_CASES = {
    # name: (mutation of the valid arguments, exception, names the message must contain)
    "head_dim_64": (lambda a: a.update(q=torch.zeros(3, 4, 64, dtype=BF16), out=torch.zeros(3, 4, 64, dtype=BF16)),
                    ValueError, ["q", "128"]),
    "group_17": (lambda a: a.update(q=torch.zeros(3, 17, 128, dtype=BF16), out=torch.zeros(3, 17, 128, dtype=BF16)),
                 ValueError, ["q", "16"]),
    "query_length_2": (lambda a: a.update(q=torch.zeros(3, 2, 4, 128, dtype=BF16),
                                          out=torch.zeros(3, 2, 4, 128, dtype=BF16)), ValueError, ["q"]),
    "q_fp32": (lambda a: a.update(q=a["q"].float()), TypeError, ["q"]),
    "q_fp16": (lambda a: a.update(q=a["q"].half()), TypeError, ["q"]),
    "out_fp32": (lambda a: a.update(out=a["out"].float()), TypeError, ["out"]),
    "tables_i64": (lambda a: a.update(tables=a["tables"].long()), TypeError, ["tables"]),
    "lens_i64": (lambda a: a.update(context_lens=a["context_lens"].long()), TypeError, ["context_lens"]),
    "k_cache_int8": (lambda a: a.update(k_cache=rec(dtype=torch.int8)), TypeError, ["k_cache"]),
    "page_size_64": (lambda a: a.update(k_cache=rec(size=4352), v_cache=rec(size=4352)), ValueError, ["k_cache"]),
    "v_cache_other_shape": (lambda a: a.update(v_cache=rec(pages=3)), ValueError, ["v_cache"]),
    "cache_page_stride": (lambda a: a.update(k_cache=rec(heads=2)[:, :1], v_cache=rec(heads=2)[:, :1]),
                          ValueError, ["k_cache"]),
    "tables_non_contiguous": (lambda a: a.update(tables=torch.zeros(3, 4, dtype=I32)[:, ::2]), ValueError,
                              ["tables"]),
    "lens_non_contiguous": (lambda a: a.update(context_lens=torch.zeros(6, dtype=I32)[::2]), ValueError,
                            ["context_lens"]),
    "tables_batch": (lambda a: a.update(tables=torch.zeros(4, 2, dtype=I32)), ValueError, ["tables"]),
    "lens_batch": (lambda a: a.update(context_lens=torch.zeros(2, dtype=I32)), ValueError, ["context_lens"]),
    "out_batch": (lambda a: a.update(out=torch.zeros(2, 4, 128, dtype=BF16)), ValueError, ["out"]),
    "tables_device": (lambda a: a.update(tables=a["tables"].to(META)), ValueError, ["tables"]),
    "lens_device": (lambda a: a.update(context_lens=a["context_lens"].to(META)), ValueError, ["context_lens"]),
    "k_cache_device": (lambda a: a.update(k_cache=a["k_cache"].to(META)), ValueError, ["k_cache"]),
    "out_device": (lambda a: a.update(out=a["out"].to(META)), ValueError, ["out"]),
}


@pytest.mark.parametrize("case", list(DECODE_CASES))
def test_pa_decode_refusals(case):
    assert_refused(DECODE_CASES, case, decode_args, call_decode)


def test_pa_decode_query_scale_and_softmax_scale_refusals():
    a = decode_args()
    with pytest.raises(ValueError) as ei:
        call_decode(a, query_scale=torch.ones(2, dtype=torch.float32))
    H.err_names(ei, "query_scale")
    with pytest.raises(TypeError) as ei:
        call_decode(a, query_scale=torch.ones(3, dtype=torch.float64))
    H.err_names(ei, "query_scale")
    with pytest.raises(ValueError) as ei:
        call_decode(a, softmax_scale=float("nan"))
    H.err_names(ei, "softmax_scale")


def test_pa_decode_valid_baseline_runs():
    a = decode_args()
    call_decode(a)  # the baseline of every refusal above is itself accepted
    assert torch.isfinite(a["out"].float()).all()


# ---- index_topk -------------------------------------------------------------------------------------------------
def topk_args():
    return dict(idx_q=torch.randn(2, 1, 128).to(BF16), index_k_cache=rec(pages=3),
                block_table=torch.tensor([[0, 1, 2]], dtype=I32), row_request=torch.zeros(2, dtype=I32),
                row_position=torch.tensor([0, 200], dtype=I32))


def call_topk(a, **kw):
    return ops.index_topk(a["idx_q"], a["index_k_cache"], a["block_table"], a["row_request"], a["row_position"],
                          topk=kw.pop("topk", 4), backend="torch", **kw)


TOPK_CASES = {
    "head_dim_64": (lambda a: a.update(idx_q=torch.zeros(2, 1, 64, dtype=BF16)), ValueError, ["idx_q"]),
    "query_length_2": (lambda a: a.update(idx_q=torch.zeros(2, 2, 1, 128, dtype=BF16)), ValueError, ["idx_q"]),
    "idx_q_int": (lambda a: a.update(idx_q=torch.zeros(2, 1, 128, dtype=I32)), TypeError, ["idx_q"]),
    "block_table_i64": (lambda a: a.update(block_table=a["block_table"].long()), TypeError, ["block_table"]),
    "row_request_i64": (lambda a: a.update(row_request=a["row_request"].long()), TypeError, ["row_request"]),
    "row_position_i64": (lambda a: a.update(row_position=a["row_position"].long()), TypeError, ["row_position"]),
    "block_table_non_contiguous": (lambda a: a.update(block_table=torch.zeros(1, 6, dtype=I32)[:, ::2]),
                                   ValueError, ["block_table"]),
    "row_request_batch": (lambda a: a.update(row_request=torch.zeros(3, dtype=I32)), ValueError, ["row_request"]),
    "row_position_batch": (lambda a: a.update(row_position=torch.zeros(1, dtype=I32)), ValueError,
                           ["row_position"]),
    "row_request_out_of_range": (lambda a: a.update(row_request=torch.tensor([0, 1], dtype=I32)), ValueError,
                                 ["row_request"]),
    "block_table_device": (lambda a: a.update(block_table=a["block_table"].to(META)), ValueError, ["block_table"]),
    "cache_device": (lambda a: a.update(index_k_cache=a["index_k_cache"].to(META)), ValueError, ["index_k_cache"]),
    "cache_two_heads": (lambda a: a.update(index_k_cache=rec(pages=3, heads=2)), ValueError, ["index_k_cache"]),
    "cache_page_size": (lambda a: a.update(index_k_cache=rec(pages=3, size=4352)), ValueError, ["index_k_cache"]),
}


@pytest.mark.parametrize("case", list(TOPK_CASES))
def test_index_topk_refusals(case):
    assert_refused(TOPK_CASES, case, topk_args, call_topk)


def test_index_topk_bad_topk_and_baseline():
    a = topk_args()
    assert call_topk(a).shape == (1, 2, 4)
    with pytest.raises(ValueError) as ei:
        call_topk(a, topk=0)
    H.err_names(ei, "topk")


# ---- build_sparse_tables ------------------------------------------------------------------------------------------
def tables_args():
    return dict(topk_blocks=torch.tensor([[[0, -1], [0, 1]], [[0, -1], [1, -1]]], dtype=I32),
                block_table=torch.tensor([[4, 5]], dtype=I32), row_request=torch.zeros(2, dtype=I32),
                row_position=torch.tensor([3, 200], dtype=I32))


def call_tables(a, nkv=2):
    return ops.build_sparse_tables(a["topk_blocks"], a["block_table"], a["row_request"], a["row_position"],
                                   num_kv_heads=nkv, backend="torch")


TABLES_CASES = {
    "topk_i64": (lambda a: a.update(topk_blocks=a["topk_blocks"].long()), TypeError, ["topk_blocks"]),
    "topk_heads": (lambda a: a.update(topk_blocks=a["topk_blocks"][:1].contiguous()), ValueError, ["topk_blocks"]),
    "topk_rows": (lambda a: a.update(topk_blocks=torch.zeros(2, 3, 2, dtype=I32)), ValueError, []),
    "block_table_i64": (lambda a: a.update(block_table=a["block_table"].long()), TypeError, ["block_table"]),
    "block_table_non_contiguous": (lambda a: a.update(block_table=torch.zeros(1, 4, dtype=I32)[:, ::2]),
                                   ValueError, ["block_table"]),
    "row_position_batch": (lambda a: a.update(row_position=torch.zeros(3, dtype=I32)), ValueError,
                           ["row_position"]),
    "block_table_device": (lambda a: a.update(block_table=a["block_table"].to(META)), ValueError, ["block_table"]),
}


@pytest.mark.parametrize("case", list(TABLES_CASES))
def test_build_sparse_tables_refusals(case):
    assert_refused(TABLES_CASES, case, tables_args, call_tables)


def test_build_sparse_tables_baseline():
    tables, lens = call_tables(tables_args())
    # row 1 (position 200, own block 1): head 0 = full block 0 + own block 1 (73 tokens), head 1 = own block only
    assert tables.shape == (4, 2) and lens.tolist() == [4, 4, 128 + (200 - 128 + 1), 200 - 128 + 1]


# ---- fused_qknorm_rope_write ----------------------------------------------------------------------------------------
def write_args(T=3, nq=16, nkv=1, niq=1):
    width = qkv_width(nq, nkv, niq)
    w = torch.zeros(128, dtype=BF16)
    return dict(qkv=torch.randn(T, width).to(BF16), positions=torch.arange(T, dtype=I64), q_norm_weight=w,
                k_norm_weight=w, idx_q_norm_weight=w, idx_k_norm_weight=w,
                cos_sin_cache=torch.ones(16, 64, dtype=torch.float32), slot_mapping=torch.arange(T, dtype=I64),
                k_cache=rec(heads=nkv), v_cache=rec(heads=nkv), index_k_cache=rec(), num_q_heads=nq,
                num_kv_heads=nkv, num_index_heads=niq)


def call_write(a, **kw):
    a = dict(a)
    pos = [a.pop(n) for n in ("qkv", "positions", "q_norm_weight", "k_norm_weight", "idx_q_norm_weight",
                              "idx_k_norm_weight", "cos_sin_cache", "slot_mapping", "k_cache", "v_cache",
                              "index_k_cache")]
    return ops.fused_qknorm_rope_write(*pos, backend="torch", **a, **kw)


WRITE_CASES = {
    "qkv_width": (lambda a: a.update(qkv=torch.zeros(3, 19 * 128, dtype=BF16)), ValueError, ["qkv"]),
    "qkv_int": (lambda a: a.update(qkv=a["qkv"].to(I32)), TypeError, ["qkv"]),
    "qkv_non_contiguous": (lambda a: a.update(qkv=torch.zeros(3, 2 * 20 * 128, dtype=BF16)[:, ::2]), ValueError,
                           ["qkv"]),
    "positions_i32": (lambda a: a.update(positions=a["positions"].int()), TypeError, ["positions"]),
    "positions_batch": (lambda a: a.update(positions=torch.zeros(2, dtype=I64)), ValueError, ["positions"]),
    "positions_device": (lambda a: a.update(positions=a["positions"].to(META)), ValueError, ["positions"]),
    "slots_i32": (lambda a: a.update(slot_mapping=a["slot_mapping"].int()), TypeError, ["slot_mapping"]),
    "slots_batch": (lambda a: a.update(slot_mapping=torch.zeros(4, dtype=I64)), ValueError, ["slot_mapping"]),
    "weight_shape": (lambda a: a.update(q_norm_weight=torch.zeros(64, dtype=BF16)), ValueError, ["q_norm_weight"]),
    "cos_sin_fp64": (lambda a: a.update(cos_sin_cache=a["cos_sin_cache"].double()), TypeError, ["cos_sin_cache"]),
    "rotary_dim_odd": (lambda a: a.update(rotary_dim=63, cos_sin_cache=torch.ones(16, 63)), ValueError,
                       ["rotary_dim"]),
    "k_cache_page_size": (lambda a: a.update(k_cache=rec(size=4352)), ValueError, ["k_cache"]),
    "k_cache_heads": (lambda a: a.update(k_cache=rec(heads=2)), ValueError, ["k_cache"]),
    "k_cache_device": (lambda a: a.update(k_cache=a["k_cache"].to(META)), ValueError, ["k_cache"]),
    "index_cache_missing": (lambda a: a.update(index_k_cache=None), ValueError, ["index_k_cache"]),
    "scale_mode": (lambda a: a.update(scale_mode="round"), ValueError, ["scale_mode"]),
    "q_dtype_fp16": (lambda a: a.update(q_dtype=torch.float16), TypeError, ["q_dtype"]),
}


@pytest.mark.parametrize("case", list(WRITE_CASES))
def test_fused_write_refusals(case):
    assert_refused(WRITE_CASES, case, write_args, call_write)


def test_fused_write_group_over_16():
    a = write_args(nq=32, nkv=1)
    with pytest.raises(ValueError) as ei:
        call_write(a)
    H.err_names(ei, "num_q_heads", "16")


def test_fused_write_baseline():
    q, idx_q = call_write(write_args())
    assert q.shape == (3, 16, 128) and idx_q.shape == (3, 1, 128)


# ---- codec and backends -------------------------------------------------------------------------------------------
def test_codec_refusals():
    with pytest.raises(ValueError) as ei:
        quantize_mxfp4(torch.zeros(4, 48))  # D not a multiple of 32
    H.err_names(ei)
    with pytest.raises(TypeError) as ei:
        quantize_mxfp4(torch.zeros(4, 64, dtype=I32))
    H.err_names(ei)
    d, s = quantize_mxfp4(torch.randn(4, 64))
    with pytest.raises(ValueError) as ei:
        dequantize_mxfp4(d, s[:, :1])  # 1 scale for 64 elements
    H.err_names(ei)
    with pytest.raises(TypeError) as ei:
        dequantize_mxfp4(d.to(I32), s)
    H.err_names(ei)


CODEC_TENSOR_ARGS = {
    # name: (the call with that argument a Python list, the argument's name)
    "quantize_x": (lambda d, s: quantize_mxfp4([0.5] * 32), "x"),
    "dequantize_data": (lambda d, s: dequantize_mxfp4(d.tolist(), s), "data"),
    "dequantize_scale": (lambda d, s: dequantize_mxfp4(d, s.tolist()), "scale"),
    "scale_exponent_xb": (lambda d, s: scale_exponent([[0.5] * 32]), "xb"),
}


@pytest.mark.parametrize("case", list(CODEC_TENSOR_ARGS))
def test_codec_refuses_a_non_tensor(case):
    """A list was an AttributeError ('list' object has no attribute ...) from deep inside the codec."""
    call, name = CODEC_TENSOR_ARGS[case]
    d, s = quantize_mxfp4(torch.randn(2, 64))
    with pytest.raises(TypeError) as ei:
        call(d, s)
    assert str(ei.value) == f"{name} must be a tensor, got list"


def test_scale_exponent_refuses_a_non_fp32_block():
    """A bf16 xb was read through an int32 view of half its bytes: one scale for two blocks, no error."""
    with pytest.raises(TypeError) as ei:
        scale_exponent(torch.ones(2, 32, dtype=BF16))
    H.err_names(ei, "xb", "torch.float32", "torch.bfloat16")


@pytest.mark.parametrize("dtype", [I32, torch.uint8, torch.bool, torch.complex64, torch.float8_e4m3fn, "float32"],
                         ids=repr)
def test_dequantize_refuses_an_output_dtype_it_does_not_support(dtype):
    """Any dtype was accepted, integers included: int32 truncated every value (0.5 -> 0)."""
    d, s = quantize_mxfp4(torch.randn(2, 64))
    with pytest.raises(TypeError) as ei:
        dequantize_mxfp4(d, s, dtype=dtype)
    want = "dtype must be torch.float32, torch.bfloat16, torch.float16 or torch.float64"
    assert str(ei.value) == f"{want}, got {dtype!r}"


def test_backend_selection():
    assert "torch" in backends.available_backends("cpu")
    assert backends.resolve_backend(None, "cpu").name == backends.resolve_backend("torch", "cpu").name == "torch"
    with pytest.raises(ValueError) as ei:
        backends.resolve_backend("no-such-backend", "cpu")
    H.err_names(ei, "no-such-backend")
    with pytest.raises(RuntimeError):  # an explicit backend that cannot run here raises, never falls back
        backends.resolve_backend("flydsl", "cpu")


# ---- DESIGN §6: no input may make a kernel write outside its output or the slots it was given ----------------------
@pytest.mark.parametrize("slot", [2 * 128, 2 * 128 + 5, -2, -129])
def test_write_refuses_slots_outside_the_cache_and_writes_nothing(slot):
    a = write_args()  # caches of 2 pages: valid slots are -1 (skip) and [0, 256)
    a["slot_mapping"] = torch.tensor([0, 1, slot], dtype=I64)
    before = [a["k_cache"].clone(), a["v_cache"].clone(), a["index_k_cache"].clone()]
    with pytest.raises(ValueError) as ei:
        call_write(a)
    H.err_names(ei, "slot_mapping", str(slot))
    for got, want in zip((a["k_cache"], a["v_cache"], a["index_k_cache"]), before):
        assert torch.equal(got, want)


@pytest.mark.parametrize("lens, tables, name", [
    ([1, 2 * 128 + 1, 0], [[0, 0], [0, 1], [0, 0]], "context_lens"),  # more tokens than the table row addresses
    ([1, -5, 0], [[0, 0], [0, 1], [0, 0]], "context_lens"),
    ([1, 200, 0], [[0, 0], [0, 2], [0, 0]], "tables"),  # page 2 of a 2-page cache, read for tokens 128..199
    ([1, 2, 0], [[0, 0], [-1, 0], [0, 0]], "tables"),
])
def test_pa_decode_refuses_out_of_range_rows(lens, tables, name):
    a = decode_args()
    a["context_lens"] = torch.tensor(lens, dtype=I32)
    a["tables"] = torch.tensor(tables, dtype=I32)
    with pytest.raises(ValueError) as ei:
        call_decode(a)
    H.err_names(ei, name)
