"""pa_decode (DESIGN §5) against a dense fp64 softmax per row over the dequantized cache tokens.

Every record starts as poison (random codes, scale bytes 255 = NaN, 254 = Inf in fp32, 0); only the tokens a row
owns (t < context_lens[r]) are then written with valid codes. The output is filled with NaN first: every element
must come back finite and equal to the oracle within OUT_RTOL * |ref| + OUT_ATOL * max|V|.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import _helpers as H

from atom_mxfp4 import ops
from atom_mxfp4.cache import MXFP4PageCache

# bf16 output: one rounding = 2**-9 relative; allow two roundings (fp32 accumulate then bf16 store)
OUT_RTOL = 2.0 ** -8
# fp32 softmax / accumulation error relative to the largest |V| (~1e-6 per op over <= 2049 terms, with a band)
OUT_ATOL = 1e-4


def make_problem(lens, group, nkv, seed, width=None, q_dtype=torch.bfloat16, extra_pages=2):
    """Rows with contexts ``lens``, each with its own shuffled folded pages of a [P, nkv, 8704] cache.

    Returns dict with k, v records, tables [R, W] i32 (unused entries 0), context_lens [R] i32, q [R, G, D].
    """
    gen = torch.Generator().manual_seed(seed)
    need = [(n + 127) // 128 for n in lens]
    width = width or max(max(need), 1)
    folded_total = sum(need) + extra_pages * nkv
    pages = (folded_total + nkv - 1) // nkv
    k = H.garbage_records(gen, pages, nkv)
    v = H.garbage_records(gen, pages, nkv)
    perm = torch.randperm(pages * nkv, generator=gen).tolist()
    tables = torch.zeros(len(lens), width, dtype=torch.int32)
    used = 0
    for r, n in enumerate(lens):
        ids = perm[used:used + need[r]]
        used += need[r]
        tables[r, :len(ids)] = torch.tensor(ids, dtype=torch.int32)
        for recs, lo, hi in ((k, 124, 128), (v, 122, 130)):
            data, scale = H.random_codes(gen, n, lo, hi)
            flat = recs.reshape(-1, H.RECORD)
            for t in range(n):
                fid, off = ids[t // 128], t % 128
                flat[fid, off * 64:(off + 1) * 64] = data[t]
                flat[fid, 8192 + off * 4:8192 + (off + 1) * 4] = scale[t]
    q = torch.randn(len(lens), group, H.D, generator=gen).to(q_dtype)
    return dict(k=k, v=v, tables=tables, lens=torch.tensor(lens, dtype=torch.int32), q=q)


def reference(prob, softmax_scale, query_scale=None) -> np.ndarray:
    q = prob["q"].double().numpy()
    if query_scale is not None:
        qs = torch.as_tensor(query_scale, dtype=torch.float64).numpy()
        q = q * (qs.reshape(-1, 1, 1) if qs.ndim else qs)
    return H.attention_rows(q, prob["k"], prob["v"], prob["tables"], prob["lens"], softmax_scale)


def run(prob, backend, softmax_scale, **kw):
    out = torch.full(prob["q"].shape, math.nan, dtype=torch.bfloat16)  # poison: every element must be written
    ret = ops.pa_decode(out, prob["q"], prob.pop("k_arg", prob["k"]), prob.pop("v_arg", prob["v"]), prob["tables"],
                        prob["lens"], softmax_scale=softmax_scale, backend=backend, **kw)
    assert ret is out or ret is None or ret.data_ptr() == out.data_ptr()
    return out


def check_close(out: torch.Tensor, ref: np.ndarray, vmax: float):
    got = out.double().numpy()
    assert np.isfinite(got).all(), f"{(~np.isfinite(got)).sum()} output elements not finite (unwritten or garbage)"
    err = np.abs(got - ref)
    tol = OUT_RTOL * np.abs(ref) + OUT_ATOL * vmax
    bad = np.argwhere(err > tol)
    assert len(bad) == 0, (f"{len(bad)} elements off; first {bad[0].tolist()}: got {got[tuple(bad[0])]}, "
                           f"want {ref[tuple(bad[0])]}")


def vmax_of(prob) -> float:
    return 6.0 * 2.0 ** (130 - 127)


SCALE = 1.0 / math.sqrt(128)


@pytest.mark.parametrize("backend", H.backends_here(large_shapes=True))
@pytest.mark.parametrize("lens, group, nkv", [
    ([2049], 16, 1),  # batch 1, long
    ([1], 1, 1),
    ([1, 97, 128, 129, 2049, 0, 255, 256, 3, 640, 0, 131, 384, 129, 64, 1000, 700], 16, 4),  # batch 17
    ([97, 129, 0, 300], 5, 2),  # odd group
])
def test_against_dense_softmax(backend, lens, group, nkv):
    prob = make_problem(lens, group, nkv, seed=len(lens) * 31 + group)
    out = run(prob, backend, SCALE)
    check_close(out, reference(prob, SCALE), vmax_of(prob))
    for r, n in enumerate(lens):
        if n == 0:
            assert (out[r] == 0).all(), "context 0 must write zeros"


@pytest.mark.parametrize("backend", H.backends_here(large_shapes=True))
def test_wide_table_and_cache_object(backend):
    # tables wider than needed (unused entries 0 -> page 0 holds poison / another row's tokens)
    prob = make_problem([129, 5, 1000], 8, 2, seed=3, width=12)
    pages, nkv = prob["k"].shape[0], prob["k"].shape[1]
    prob["k_arg"] = MXFP4PageCache(pages, nkv, records=prob["k"])
    prob["v_arg"] = MXFP4PageCache(pages, nkv, records=prob["v"])
    out = run(prob, backend, 0.3)
    check_close(out, reference(prob, 0.3), vmax_of(prob))


@pytest.mark.parametrize("backend", H.backends_here(large_shapes=True))
def test_fp8_query_with_query_scale(backend):
    prob = make_problem([200, 97, 0, 1], 16, 1, seed=4, q_dtype=torch.float8_e4m3fn)
    out = run(prob, backend, SCALE, query_scale=0.25)
    check_close(out, reference(prob, SCALE, 0.25), vmax_of(prob))
    qs = torch.tensor([0.5, 2.0, 1.0, 0.125], dtype=torch.float32)
    out = run(prob, backend, SCALE, query_scale=qs)
    check_close(out, reference(prob, SCALE, qs), vmax_of(prob))


@pytest.mark.parametrize("backend", H.backends_here(large_shapes=True))
def test_bf16_query_with_query_scale(backend):
    prob = make_problem([300, 64], 4, 1, seed=5)
    out = run(prob, backend, SCALE, query_scale=1.5)
    check_close(out, reference(prob, SCALE, 1.5), vmax_of(prob))


@pytest.mark.parametrize("backend", H.backends_here(large_shapes=True))
def test_dense_layer_tables_share_pages(backend):
    # dense layers: every (request, head) row reads the request's whole block table, folded page*nkv + h
    gen = torch.Generator().manual_seed(6)
    nkv, group, lens = 4, 16, [97, 2049, 128]
    max_blocks = max((n + 127) // 128 for n in lens)
    pages = sum((n + 127) // 128 for n in lens) + 1
    k, v = H.garbage_records(gen, pages, nkv), H.garbage_records(gen, pages, nkv)
    perm = torch.randperm(pages, generator=gen).tolist()
    bt = torch.zeros(len(lens), max_blocks, dtype=torch.int32)
    used = 0
    for b, n in enumerate(lens):
        nb = (n + 127) // 128
        bt[b, :nb] = torch.tensor(perm[used:used + nb], dtype=torch.int32)
        used += nb
        for recs in (k, v):
            for h in range(nkv):
                data, scale = H.random_codes(gen, n, 124, 128)
                for t in range(n):
                    H.put_token(recs, int(bt[b, t // 128]), h, t % 128, data[t], scale[t])
    tables = (bt[:, None, :] * nkv + torch.arange(nkv, dtype=torch.int32)[None, :, None]).reshape(-1, max_blocks)
    prob = dict(k=k, v=v, tables=tables.contiguous(),
                lens=torch.tensor(lens, dtype=torch.int32).repeat_interleave(nkv),
                q=torch.randn(len(lens) * nkv, group, H.D, generator=gen).bfloat16())
    out = run(prob, backend, SCALE)
    check_close(out, reference(prob, SCALE), 6.0 * 2.0)


@pytest.mark.parametrize("backend", H.backends_here(large_shapes=True))
def test_plan_and_check_false_give_the_same_output(backend):
    prob = make_problem([129, 0, 2049, 7], 16, 1, seed=7)
    base = run(dict(prob), backend, SCALE)
    plan = ops.plan_pa_decode(4, prob["tables"].shape[1], 16, torch.device("cpu"), backend=backend)
    with_plan = run(dict(prob), backend, SCALE, plan=plan)
    unchecked = run(dict(prob), backend, SCALE, check=False)
    assert torch.equal(base, with_plan) and torch.equal(base, unchecked)
    # the plan is reusable across calls with other contexts
    prob2 = make_problem([5, 300, 0, 128], 16, 1, seed=8)
    out2 = run(prob2, backend, SCALE, plan=plan)
    check_close(out2, reference(prob2, SCALE), vmax_of(prob2))


@pytest.mark.parametrize("backend", H.backends_here(large_shapes=True))
def test_garbage_only_in_unowned_bytes_changes_nothing(backend):
    # the same owned tokens with two different poison patterns elsewhere must give identical outputs
    prob = make_problem([97, 129, 1], 16, 1, seed=9, width=3)
    a = run(dict(prob), backend, SCALE)
    gen = torch.Generator().manual_seed(99)
    k2, v2 = prob["k"].clone(), prob["v"].clone()
    for recs in (k2, v2):
        flat = recs.reshape(-1, H.RECORD)
        owned = torch.zeros_like(flat, dtype=torch.bool)
        for r, n in enumerate(prob["lens"].tolist()):
            for t in range(n):
                fid, off = int(prob["tables"][r, t // 128]), t % 128
                owned[fid, off * 64:(off + 1) * 64] = True
                owned[fid, 8192 + off * 4:8192 + (off + 1) * 4] = True
        noise = H.garbage_records(gen, recs.shape[0], recs.shape[1]).reshape(-1, H.RECORD)
        flat.copy_(torch.where(owned, flat, noise))
    b = run(dict(prob, k=k2, v=v2), backend, SCALE)
    assert torch.equal(a, b)


@pytest.mark.parametrize("backend", H.backends_here())
@pytest.mark.parametrize("rows, width", [(3, 0), (0, 4), (0, 0)])
def test_empty_tables_or_rows_write_zeros(backend, rows, width):
    """A zero-width table (a sparse layer with topk 0 selects nothing) or no rows: valid input, zeros out, on every
    backend (the torch backend used to reduce over an empty token axis and raise)."""
    q = torch.randn(rows, 4, 128).bfloat16()
    out = torch.full_like(q, float("nan"))
    cache = torch.zeros(2, 1, 8704, dtype=torch.uint8)
    tables = torch.zeros(rows, width, dtype=torch.int32)
    ops.pa_decode(out, q, cache, cache.clone(), tables, torch.zeros(rows, dtype=torch.int32), softmax_scale=0.1,
                  backend=backend)
    assert torch.equal(out, torch.zeros_like(out))
