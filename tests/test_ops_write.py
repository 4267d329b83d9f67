"""fused_qknorm_rope_write against the exact arithmetic of docs/api.md, redone in numpy float32 here.

Cache bytes must be bit-exact (every written token-head, and no other byte changed); q / idx_q bit-exact too.
"""

from __future__ import annotations


import numpy as np
import pytest
import torch

import _helpers as H

from atom_mxfp4 import ops
from atom_mxfp4.cache import MXFP4PageCache
from atom_mxfp4.format import ScaleMode
from atom_mxfp4.layout import qkv_width

F32 = np.float32


def cos_sin_cache(max_pos: int, rotary_dim: int, theta: float = 5e6) -> torch.Tensor:
    """[max_pos, rotary_dim] fp32 = [cos(rotary_dim/2) | sin(rotary_dim/2)] (DESIGN §2)."""
    half = rotary_dim // 2
    inv = 1.0 / theta ** (np.arange(half, dtype=np.float64) * 2 / rotary_dim)
    ang = np.arange(max_pos, dtype=np.float64)[:, None] * inv[None, :]
    return torch.from_numpy(np.concatenate([np.cos(ang), np.sin(ang)], axis=1).astype(np.float32))


def norm_rope(x_bf16: torch.Tensor, w: torch.Tensor, cs: np.ndarray, rotary_dim: int, eps: float) -> np.ndarray:
    """x [T, H, 128] bf16, w [128], cs [T, rotary_dim] fp32 rows of the cos/sin cache -> fp32 [T, H, 128]."""
    x32 = x_bf16.float().numpy()
    ms = ((x32.astype(np.float64) ** 2).sum(axis=-1, keepdims=True) / 128).astype(F32)  # exact fp64 sum, one rounding
    r = F32(1) / np.sqrt(ms + F32(eps))  # fp32, correctly rounded sqrt and division
    w32 = w.float().numpy()
    y = (x32 * r) * (F32(1) + w32)  # two fp32 roundings, in this order
    h = rotary_dim // 2
    c, s = cs[:, None, :h], cs[:, None, h:rotary_dim]
    y1, y2 = y[..., :h].copy(), y[..., h:rotary_dim].copy()
    out = y.copy()
    out[..., :h] = y1 * c - y2 * s  # each product rounded, then the difference: no FMA
    out[..., h:rotary_dim] = y2 * c + y1 * s
    return out.astype(F32)


def make_inputs(T, nq, nkv, niq, seed, max_pos=4096, rotary_dim=64, pages=None):
    gen = torch.Generator().manual_seed(seed)
    width = qkv_width(nq, nkv, niq)
    spread = torch.exp(torch.randn(width, generator=gen))  # per-channel magnitude spread
    qkv = (torch.randn(T, width, generator=gen) * spread).bfloat16()
    ws = [(torch.randn(H.D, generator=gen) * 0.3).bfloat16() for _ in range(4)]
    positions = torch.randint(0, max_pos, (T,), generator=gen, dtype=torch.int64)
    pages = pages or (T + 127) // 128 + 2
    slots = torch.randperm(pages * 128, generator=gen)[:T].to(torch.int64)
    slots[torch.rand(T, generator=gen) < 0.15] = -1  # some tokens are not written
    k = H.garbage_records(gen, pages, nkv)
    v = H.garbage_records(gen, pages, nkv)
    ik = H.garbage_records(gen, pages, 1) if niq else None
    return dict(qkv=qkv, positions=positions, w=ws, cs=cos_sin_cache(max_pos, rotary_dim), slots=slots,
                k=k, v=v, ik=ik, nq=nq, nkv=nkv, niq=niq, rotary_dim=rotary_dim)


def expected(inp, mode: str, eps: float, q_dtype):
    """(q, idx_q, k records, v records, index-K records) by the api.md arithmetic."""
    qkv, nq, nkv, niq, rd = inp["qkv"], inp["nq"], inp["nkv"], inp["niq"], inp["rotary_dim"]
    T = qkv.shape[0]
    cs = inp["cs"].numpy()[inp["positions"].numpy()]
    parts = torch.split(qkv, [nq * H.D, nkv * H.D, nkv * H.D, niq * H.D, H.D if niq else 0], dim=1)
    q = norm_rope(parts[0].reshape(T, nq, H.D), inp["w"][0], cs, rd, eps)
    k = norm_rope(parts[1].reshape(T, nkv, H.D), inp["w"][1], cs, rd, eps)
    v = parts[2].reshape(T, nkv, H.D).float().numpy()
    k_rec, v_rec = inp["k"].clone(), inp["v"].clone()
    writes = [(k, k_rec), (v, v_rec)]
    idx_q = ik_rec = None
    if niq:
        idx_q = norm_rope(parts[3].reshape(T, niq, H.D), inp["w"][2], cs, rd, eps)
        idx_k = norm_rope(parts[4].reshape(T, 1, H.D), inp["w"][3], cs, rd, eps)
        ik_rec = inp["ik"].clone()
        writes.append((idx_k, ik_rec))
    for vals, rec in writes:
        data, scale = H.np_quantize(vals, mode)  # [T, heads, 64], [T, heads, 4]
        for t, slot in enumerate(inp["slots"].tolist()):
            if slot < 0:
                continue
            for h in range(rec.shape[1]):
                H.put_token(rec, slot // 128, h, slot % 128, data[t, h], scale[t, h])
    q_t = torch.from_numpy(q).to(q_dtype)
    idx_q_t = None if idx_q is None else torch.from_numpy(idx_q).to(torch.bfloat16)
    return q_t, idx_q_t, k_rec, v_rec, ik_rec


def call(inp, backend, mode=ScaleMode.CEIL, eps=1e-6, q_dtype=torch.bfloat16, as_cache=False, **kw):
    k, v, ik = inp["k"], inp["v"], inp["ik"]
    if as_cache:
        k, v = MXFP4PageCache(k.shape[0], k.shape[1], records=k), MXFP4PageCache(v.shape[0], v.shape[1], records=v)
        ik = None if ik is None else MXFP4PageCache(ik.shape[0], 1, records=ik)
    niq = inp["niq"]
    return ops.fused_qknorm_rope_write(
        inp["qkv"], inp["positions"], inp["w"][0], inp["w"][1], inp["w"][2] if niq else None,
        inp["w"][3] if niq else None, inp["cs"], inp["slots"], k, v, ik, num_q_heads=inp["nq"],
        num_kv_heads=inp["nkv"], num_index_heads=niq, rotary_dim=inp["rotary_dim"], eps=eps, scale_mode=mode,
        q_dtype=q_dtype, backend=backend, **kw)


def bytes_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


def first_record_diff(got: torch.Tensor, want: torch.Tensor) -> str:
    idx = (got != want).nonzero()
    if len(idx) == 0:
        return "equal"
    p, h, b = idx[0].tolist()
    where = f"token {b // 64} data byte {b % 64}" if b < 8192 else f"token {(b - 8192) // 4} scale {(b - 8192) % 4}"
    return f"{len(idx)} bytes differ; first page {p} head {h} {where}: got {got[p, h, b]}, want {want[p, h, b]}"


@pytest.mark.parametrize("backend", H.backends_here(large_shapes=True))
@pytest.mark.parametrize("mode", [ScaleMode.CEIL, ScaleMode.FLOOR, ScaleMode.MSE])
@pytest.mark.parametrize("T, nq, nkv, niq", [(1, 16, 1, 1), (37, 16, 1, 1), (130, 8, 2, 2)])
def test_sparse_layer_write_bit_exact(backend, mode, T, nq, nkv, niq):
    inp = make_inputs(T, nq, nkv, niq, seed=T * 7 + nq)
    want_q, want_iq, want_k, want_v, want_ik = expected(inp, mode.value, 1e-6, torch.bfloat16)
    q, idx_q = call(inp, backend, mode)
    assert q.shape == (T, nq, H.D) and q.dtype == torch.bfloat16
    assert idx_q.shape == (T, niq, H.D) and idx_q.dtype == torch.bfloat16
    assert bytes_equal(q, want_q), (q.float() - want_q.float()).abs().max()
    assert bytes_equal(idx_q, want_iq), (idx_q.float() - want_iq.float()).abs().max()
    assert torch.equal(inp["k"], want_k), "k_cache: " + first_record_diff(inp["k"], want_k)
    assert torch.equal(inp["v"], want_v), "v_cache: " + first_record_diff(inp["v"], want_v)
    assert torch.equal(inp["ik"], want_ik), "index_k_cache: " + first_record_diff(inp["ik"], want_ik)


@pytest.mark.parametrize("backend", H.backends_here(large_shapes=True))
def test_dense_layer_write_no_index(backend):
    inp = make_inputs(50, 16, 1, 0, seed=3)
    want_q, _, want_k, want_v, _ = expected(inp, "ceil", 1e-6, torch.bfloat16)
    q, idx_q = call(inp, backend, as_cache=True)
    assert idx_q is None
    assert bytes_equal(q, want_q)
    assert torch.equal(inp["k"], want_k), first_record_diff(inp["k"], want_k)
    assert torch.equal(inp["v"], want_v), first_record_diff(inp["v"], want_v)


@pytest.mark.parametrize("backend", H.backends_here(large_shapes=True))
def test_fp8_query_output(backend):
    inp = make_inputs(20, 16, 1, 1, seed=4)
    want_q, want_iq, want_k, *_ = expected(inp, "ceil", 1e-6, torch.float8_e4m3fn)
    q, idx_q = call(inp, backend, q_dtype=torch.float8_e4m3fn)
    assert q.dtype == torch.float8_e4m3fn and bytes_equal(q, want_q)
    assert idx_q.dtype == torch.bfloat16 and bytes_equal(idx_q, want_iq)
    assert torch.equal(inp["k"], want_k)


@pytest.mark.parametrize("backend", H.backends_here(large_shapes=True))
@pytest.mark.parametrize("rotary_dim, eps", [(128, 1e-6), (32, 1e-5)])
def test_other_rotary_dim_and_eps(backend, rotary_dim, eps):
    inp = make_inputs(9, 4, 1, 1, seed=5, rotary_dim=rotary_dim)
    want_q, want_iq, want_k, want_v, want_ik = expected(inp, "ceil", eps, torch.bfloat16)
    q, idx_q = call(inp, backend, eps=eps)
    assert bytes_equal(q, want_q) and bytes_equal(idx_q, want_iq)
    assert torch.equal(inp["k"], want_k) and torch.equal(inp["ik"], want_ik)


@pytest.mark.parametrize("backend", H.backends_here(large_shapes=True))
def test_all_slots_skipped_and_empty_batch(backend):
    inp = make_inputs(6, 16, 1, 1, seed=6)
    inp["slots"][:] = -1
    before = [inp["k"].clone(), inp["v"].clone(), inp["ik"].clone()]
    q, _ = call(inp, backend)
    assert q.shape == (6, 16, H.D)
    assert torch.equal(inp["k"], before[0]) and torch.equal(inp["v"], before[1]) and torch.equal(inp["ik"], before[2])
    empty = make_inputs(0, 16, 1, 1, seed=7, pages=2)
    before = empty["k"].clone()
    q, idx_q = call(empty, backend)
    assert q.shape == (0, 16, H.D) and idx_q.shape == (0, 1, H.D)
    assert torch.equal(empty["k"], before)


@pytest.mark.parametrize("backend", H.backends_here(large_shapes=True))
def test_zero_row_and_extreme_values(backend):
    # an all-zero head row normalises to 0 (rsqrt(eps) * 0) and is written as scale byte 1, codes 0
    inp = make_inputs(4, 16, 1, 1, seed=8)
    inp["qkv"][0] = 0
    inp["qkv"][1, :H.D * 16] = 1e18  # a huge q row (mean square 1e36, still fp32): rms-normalised, finite
    want_q, want_iq, want_k, want_v, want_ik = expected(inp, "ceil", 1e-6, torch.bfloat16)
    q, idx_q = call(inp, backend)
    assert bytes_equal(q, want_q) and bytes_equal(idx_q, want_iq)
    assert torch.equal(inp["k"], want_k) and torch.equal(inp["v"], want_v) and torch.equal(inp["ik"], want_ik)
    assert torch.isfinite(q.float()).all()
