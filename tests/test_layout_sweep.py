"""Every layout an op accepts gives the answer of its contiguous inputs, on every backend here.

The lesson of issue 11 as one sweep: a kernel reads its tensors by pointer, so a layout it cannot read must be refused,
never misread. For each op, and for the layer's step (``SparseMXFP4Attention.forward``: qkv, the metadata tensors,
the cache records), and each tensor argument (inputs, ``out`` and the caches it writes), the same values in
other layouts: stride 2 along the last dimension, rows of a wider buffer (row stride > row length), and a contiguous
view one element past an aligned base (storage offset 1). Each call must either raise ValueError / TypeError naming
the argument, or give the contiguous call's results bit for bit (same backend, same values; every output tensor and
every cache compared). A layout refused under ``check=True`` is run again under ``check=False``: it may raise (any
refusal), or must give the same bits (the launchers check what they read by pointer even unchecked).

The same for dtypes (``test_a_dtype_is_refused_or_read_right``): each tensor cast to another dtype a caller may
hold is refused naming it, or gives the torch backend's answer for the cast values.

Variants are built on the device the test runs on (a strided CPU tensor moved with ``.to()`` would land contiguous,
and a storage offset would be lost), so on the H200 the Hopper backend is swept too (``H.backends_here``).
"""

from __future__ import annotations

import functools
import os

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

import pytest

from atom_mxfp4 import ops
from atom_mxfp4.cache import FP8IndexKCache, MXFP4PageCache
from atom_mxfp4.layer import AttentionMetadata, LayerCaches, LayerConfig, SparseMXFP4Attention
from atom_mxfp4.synthetic import make_weights

import _helpers as H
from test_contracts_write import NIQ, NKV, NQ, PAGES, WEIGHTS, write_inputs

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
BACKENDS = H.backends_here(DEVICE)
SCALE = 128 ** -0.5
REFUSALS = (ValueError, TypeError)


# ---- the layouts ---------------------------------------------------------------------------------------------------
def strided(t):
    """Stride 2 along the last dimension."""
    wide = torch.zeros(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype, device=t.device)
    wide[..., ::2] = t
    return wide[..., ::2]


def padded_rows(t):
    """Rows of a buffer 16 elements wider: row stride > row length, each row contiguous."""
    wide = torch.zeros(*t.shape[:-1], t.shape[-1] + 16, dtype=t.dtype, device=t.device)
    wide[..., :t.shape[-1]] = t
    return wide[..., :t.shape[-1]]


def offset(t):
    """Contiguous, one element past the start of its storage (an unaligned base address for any element size)."""
    flat = torch.zeros(t.numel() + 1, dtype=t.dtype, device=t.device)
    flat[1:] = t.reshape(-1)
    return flat[1:].view(t.shape)


LAYOUTS = {"strided": strided, "padded rows": padded_rows, "offset": offset}


def layouts_of(t):
    """The layouts a tensor is swept in: padded rows only with rows to pad, none for an empty tensor."""
    names = ["strided", "offset"] + (["padded rows"] if t.dim() >= 2 else [])
    return [name for name in names if t.numel() > 0]


def bits(t):
    """The tensor's bits (NaN payloads, -0 and Inf compared exactly)."""
    t = t.detach().contiguous().cpu()
    if t.is_floating_point():
        return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])
    return t


# ---- the ops: each case builds fresh contiguous arguments on DEVICE and a call returning every result -------------
def _decode_case(seed, topk=None, ppb=1):
    """Requests of 300, 1 and 129 tokens, 2 KV heads, GQA group 3; garbage in every unowned page (H.attend_case)."""
    return H.attend_case(torch.Generator().manual_seed(seed), [300, 1, 129], nkv=2, group=3, topk=topk, ppb=ppb)


def decode_args(seed):
    case = _decode_case(seed)
    tables, lens = ops.dense_tables(case["block_table"], case["row_request"], case["row_position"], num_kv_heads=2)
    query_scale = torch.rand(tables.shape[0], generator=torch.Generator().manual_seed(seed)) + 0.5
    return dict(out=torch.full_like(case["q"], float("nan")), q=case["q"], k_cache=case["k"], v_cache=case["v"],
                tables=tables, context_lens=lens, query_scale=query_scale)


def decode_call(a, backend, check):
    out = ops.pa_decode(a["out"], a["q"], a["k_cache"], a["v_cache"], a["tables"], a["context_lens"],
                        softmax_scale=SCALE, query_scale=a["query_scale"], backend=backend, check=check)
    return [out, a["out"]]


def attend_args(seed, topk=None, ppb=1):
    case = _decode_case(seed, topk, ppb)
    args = dict(out=torch.full_like(case["q"], float("nan")), q=case["q"], k_cache=case["k"], v_cache=case["v"],
                block_table=case["block_table"], row_request=case["row_request"], row_position=case["row_position"])
    if topk is not None:
        args["topk_blocks"] = case["topk_blocks"]
    return args


def attend_call(a, backend, check, ppb=1):
    out = ops.attend(a["out"], a["q"], a["k_cache"], a["v_cache"], a["block_table"], a["row_request"],
                     a["row_position"], num_kv_heads=2, topk_blocks=a.get("topk_blocks"), pages_per_block=ppb,
                     softmax_scale=SCALE, backend=backend, check=check)
    return [out, a["out"]]


def index_args(seed, index_k_dtype):
    idx_q, records, block_table, row_request, row_position = H.index_case(
        torch.Generator().manual_seed(seed), rows=5, max_blocks=3, requests=2, index_k_dtype=index_k_dtype, heads=2)
    return dict(idx_q=idx_q, index_k_cache=records, block_table=block_table, row_request=row_request,
                row_position=row_position)


def index_call(a, backend, check, index_k_dtype):
    return [ops.index_topk(a["idx_q"], a["index_k_cache"], a["block_table"], a["row_request"], a["row_position"],
                           topk=2, init_blocks=1, local_blocks=1, index_k_dtype=index_k_dtype, backend=backend,
                           check=check)]


def tables_args(seed):
    case = _decode_case(seed, topk=2, ppb=2)
    return dict(topk_blocks=case["topk_blocks"], block_table=case["block_table"], row_request=case["row_request"],
                row_position=case["row_position"])


def tables_call(a, backend, check):
    return list(ops.build_sparse_tables(a["topk_blocks"], a["block_table"], a["row_request"], a["row_position"],
                                        num_kv_heads=2, pages_per_block=2, backend=backend, check=check))


def write_args(seed):
    inputs = write_inputs(seed)
    caches = {name: torch.zeros(PAGES, heads, H.RECORD, dtype=torch.uint8)
              for name, heads in (("k_cache", NKV), ("v_cache", NKV), ("index_k_cache", 1))}
    return inputs | caches


def write_call(a, backend, check):
    q, idx_q = ops.fused_qknorm_rope_write(
        a["qkv"], a["positions"], *(a[name] for name in WEIGHTS), a["cos_sin_cache"], a["slot_mapping"],
        a["k_cache"], a["v_cache"], a["index_k_cache"], num_q_heads=NQ, num_kv_heads=NKV, num_index_heads=NIQ,
        index_k_dtype="mxfp4", backend=backend, check=check)
    return [q, idx_q, a["k_cache"], a["v_cache"], a["index_k_cache"]]


LAYER = LayerConfig(num_q_heads=4, num_kv_heads=1, num_index_heads=1, topk=2, max_position=1024)  # fp8 index-K


@functools.lru_cache(maxsize=None)
def _layer_step(seed):
    """A sparse layer's step on the CPU: request 1 holds a 130-token prefix (written by the torch layer), then 3 new
    tokens of request 0 and 2 decode tokens of request 1; the caches as that prefix left them."""
    gen = torch.Generator().manual_seed(seed)
    block_table = torch.tensor([[3, 1, 4], [0, 2, 5]], dtype=torch.int32)
    caches = LayerCaches.allocate(LAYER, 7)
    layer = SparseMXFP4Attention(LAYER, make_weights(LAYER, seed), backend="torch")
    layer(torch.randn(130, LAYER.qkv_width, generator=gen).bfloat16(),
          AttentionMetadata.for_requests(block_table[1:], [0], [130]), caches)
    meta = AttentionMetadata.for_requests(block_table, [0, 130], [3, 2])
    return {"qkv": torch.randn(5, LAYER.qkv_width, generator=gen).bfloat16(), "positions": meta.positions,
            "slot_mapping": meta.slot_mapping, "token_request": meta.token_request, "block_table": meta.block_table,
            "caches.k": caches.k.records, "caches.v": caches.v.records, "caches.index_k": caches.index_k.records}


def layer_args(seed):
    return {name: t.clone() for name, t in _layer_step(seed).items()}


def layer_call(a, backend, check):
    """SparseMXFP4Attention.forward (validate, write, index_topk, attend): its output and the three caches."""
    layer = SparseMXFP4Attention(LAYER, make_weights(LAYER, 0), backend=backend)
    meta = AttentionMetadata(a["positions"], a["slot_mapping"], a["token_request"], a["block_table"])
    caches = LayerCaches(MXFP4PageCache(records=a["caches.k"]), MXFP4PageCache(records=a["caches.v"]),
                         FP8IndexKCache(records=a["caches.index_k"]))
    return [layer(a["qkv"], meta, caches, check=check), a["caches.k"], a["caches.v"], a["caches.index_k"]]


OPS = {  # name: (arguments of a seed, call(arguments, backend, check) -> results)
    "pa_decode": (decode_args, decode_call),
    "attend dense": (attend_args, attend_call),
    "attend sparse": (lambda s: attend_args(s, topk=2, ppb=2), lambda a, b, c: attend_call(a, b, c, ppb=2)),
    "index_topk mxfp4": (lambda s: index_args(s, "mxfp4"), lambda a, b, c: index_call(a, b, c, "mxfp4")),
    "index_topk fp8": (lambda s: index_args(s, "fp8"), lambda a, b, c: index_call(a, b, c, "fp8")),
    "build_sparse_tables": (tables_args, tables_call),
    "fused_qknorm_rope_write": (write_args, write_call),
    "layer": (layer_args, layer_call),
}
ALIASES = {  # what an op's message may call a layer's cache (the launchers name their own arguments)
    "caches.k": ("caches.k", "k_cache", "records"), "caches.v": ("caches.v", "v_cache", "records"),
    "caches.index_k": ("caches.index_k", "index_k_cache", "records"),
}


def on_device(args):
    return {name: t.to(DEVICE) for name, t in args.items()}


def cases():
    for op, (make, _) in OPS.items():
        for name, t in make(0).items():
            for layout in layouts_of(t):
                yield op, name, layout


def _checked_or_unchecked(op, name, variant, backend, what):
    """The op's results on fresh ``variant()`` arguments under check=True; refused, the refusal must name the argument
    (or an alias of it), and the unchecked call's results are returned instead: None when it is refused too (any
    error: nothing was read wrong)."""
    call = OPS[op][1]
    try:
        return call(variant(), backend, True)
    except REFUSALS as error:
        assert any(alias in str(error) for alias in ALIASES.get(name, (name,))), \
            f"{op} refused {what} {name} without naming it: {error}"
    try:
        return call(variant(), backend, False)
    except (*REFUSALS, RuntimeError):
        return None


_WANT: dict = {}


def _contiguous_results(op, backend):
    """The results of the op's contiguous arguments (once per op and backend: the interpreter is slow)."""
    if (op, backend) not in _WANT:
        make, call = OPS[op]
        _WANT[op, backend] = [bits(t) for t in call(on_device(make(0)), backend, True)]
    return _WANT[op, backend]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op, name, layout", list(cases()))
def test_a_layout_is_refused_or_read_right(op, name, layout, backend):
    make = OPS[op][0]
    want = _contiguous_results(op, backend)

    def variant():
        args = on_device(make(0))
        args[name] = LAYOUTS[layout](args[name])
        return args

    assert torch.equal(bits(variant()[name]), bits(make(0)[name]))  # the same values, another layout
    got = _checked_or_unchecked(op, name, variant, backend, layout)
    if got is None:
        return  # unchecked, still refused: never misread
    for i, (g, w) in enumerate(zip(got, want)):
        assert torch.equal(bits(g), w), f"{op} on {backend}: {layout} {name} accepted but result {i} differs"


# ---- dtypes: the same sweep over the other dtypes a caller may hold ----------------------------------------------
ALT_DTYPES = {torch.int32: (torch.int64, torch.int16), torch.int64: (torch.int32,),
              torch.bfloat16: (torch.float16, torch.float32), torch.float32: (torch.float64, torch.bfloat16)}
APPROX = {"pa_decode": 2, "attend dense": 2, "attend sparse": 2, "layer": 1}  # leading results compared with tolerance


def dtype_cases():
    for op, (make, _) in OPS.items():
        for name, t in make(0).items():
            for dtype in ALT_DTYPES.get(t.dtype, ()):
                yield op, name, dtype


def _agree(op, got, want):
    """Every result equal bit for bit, the attention outputs within H.ATTN_REL_TOL of the reference's."""
    for i, (g, w) in enumerate(zip(got, want)):
        if i < APPROX.get(op, 0):
            g, w = g.detach().float().cpu(), w.detach().float().cpu()
            rel = float((g - w).norm() / w.norm())
            if not rel < H.ATTN_REL_TOL:
                return f"result {i}: relative difference {rel:.2e}"
        elif not torch.equal(bits(g), bits(w)):
            return f"result {i} differs"
    return None


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op, name, dtype", list(dtype_cases()), ids=str)
def test_a_dtype_is_refused_or_read_right(op, name, dtype, backend):
    """Each tensor argument cast to another dtype a caller may hold (int64 / int16 indices, fp16 / fp32 activations,
    fp64 / bf16 tables and scales): refused naming the argument, or the torch backend's answer for the same
    (cast) values: bit for bit, attention outputs within the oracle tolerance. Refused under check=True, it is run
    again unchecked: refused (any error: nothing was read wrong), or that answer. A kernel that reads a tensor of
    another dtype as the dtype it was written for (the Triton write read a bf16 RoPE table that way) fails here."""
    make, call = OPS[op]

    def cast_args():
        args = on_device(make(0))
        args[name] = args[name].to(dtype)
        return args

    try:
        want = call(cast_args(), "torch", False)
    except RuntimeError:  # the torch twin cannot compute with it: the values are exact in both dtypes here
        assert dtype in (torch.float64, torch.int64), (op, name, dtype)
        want = call(on_device(make(0)), "torch", True)
    got = _checked_or_unchecked(op, name, cast_args, backend, dtype)
    if got is None:
        return
    problem = _agree(op, got, want)
    assert problem is None, f"{op} on {backend}: {name} as {dtype} accepted, but {problem}"
