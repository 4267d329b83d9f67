"""fused_qknorm_rope_write (Triton): Gemma QK-norm + partial NeoX RoPE + MXFP4 write of K, V, index-K, one launch.

One program per (token, head row) of the fused projection
``qkv[t] = [q (nq rows) | k (nkv) | v (nkv) | idx_q (niq) | idx_k (1 if niq)]``, each row 128 bf16 values.
Arithmetic is the exact one of docs/api.md, so cache bytes equal the torch backend's bit for bit:
fp64 sum of squares, ``tl.sqrt_rn`` / ``tl.div_rn``, fp32 products rounded one by one (the launch passes
``enable_fp_fusion=False``: no FMA), K / idx_K quantized from fp32, V from ``v.float()``.
Sentinel: ``slot_mapping[t] == -1`` skips the cache write of token t (q / idx_q are still written).
Layout: qkv rows may be strided (elements contiguous); positions, slot_mapping, cos_sin_cache and the weights must be
contiguous (the launcher refuses others, even under check=False).
Index-K dtype (``INDEX_FP8``): MXFP4 records (as K / V) or fp8 records (``_fp8.py``: 128 e4m3 + 4 e8m0 bytes per
token, 16896 B per page); the launcher checks the record width of the dtype it is given.
Not checked at run time: slots and positions in range, distinct slots (``atom_mxfp4.ops`` checks with check=True).
"""

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from atom_mxfp4.errors import expect, expect_contiguous
from atom_mxfp4.format import ScaleMode
from atom_mxfp4.layout import qkv_rows
from atom_mxfp4.index_k import IndexKDtype

from ._mxfp4 import DATA_BYTES, HEAD_DIM, PAGE_SIZE, RECORD_BYTES, SCALE_BYTES, SCALE_MODE_IDS, SCALE_OFFSET, \
    quantize_pair, to_output
from ._fp8 import store_fp8_token


@triton.jit
def _norm_rope_one(row_ptr, weight_ptr, cos_sin_ptr, position, x, d, inv_rms, ROTARY_DIM: tl.constexpr):
    """y = (x * r) * (1 + w), then NeoX RoPE on d < rotary_dim; x fp32 at element indices d (any shape)."""
    HALF: tl.constexpr = ROTARY_DIM // 2
    partner = tl.where(d < HALF, d + HALF, tl.where(d < ROTARY_DIM, d - HALF, d))
    x_partner = tl.load(row_ptr + partner).to(tl.float32)
    y = (x * inv_rms) * (1.0 + tl.load(weight_ptr + d).to(tl.float32))
    y_partner = (x_partner * inv_rms) * (1.0 + tl.load(weight_ptr + partner).to(tl.float32))
    rotary = d < ROTARY_DIM
    freq = d % HALF
    cos = tl.load(cos_sin_ptr + position * ROTARY_DIM + freq, mask=rotary, other=1.0)
    sin = tl.load(cos_sin_ptr + position * ROTARY_DIM + HALF + freq, mask=rotary, other=0.0)
    first = y * cos - y_partner * sin  # o1 = y1*c - y2*s  (d < h)
    second = y * cos + y_partner * sin  # o2 = y2*c + y1*s (h <= d < rotary_dim)
    return tl.where(d < HALF, first, tl.where(rotary, second, y))


@triton.jit
def _load_pair(row_ptr, weight_ptr, cos_sin_ptr, position, eps, d_even, HAS_WEIGHT: tl.constexpr,
               ROTARY_DIM: tl.constexpr):
    """Norm + RoPE of one 128-value head row, returned as (even, odd) fp32 [4, 16].

    d_even [4, 16] int32: the even element index of each pair. The RoPE partner of element d (d < rotary_dim) is
    d + h or d - h (h = rotary_dim / 2); it is loaded and normalized separately (same arithmetic, same r).
    """
    d_odd = d_even + 1
    x_even = tl.load(row_ptr + d_even).to(tl.float32)
    x_odd = tl.load(row_ptr + d_odd).to(tl.float32)
    if HAS_WEIGHT:
        sq = tl.sum(tl.sum(x_even.to(tl.float64) * x_even.to(tl.float64) + x_odd.to(tl.float64)
                           * x_odd.to(tl.float64), axis=1), axis=0)
        mean_square = (sq / HEAD_DIM).to(tl.float32)
        inv_rms = tl.div_rn(1.0, tl.sqrt_rn(mean_square + eps))
        y_even = _norm_rope_one(row_ptr, weight_ptr, cos_sin_ptr, position, x_even, d_even, inv_rms, ROTARY_DIM)
        y_odd = _norm_rope_one(row_ptr, weight_ptr, cos_sin_ptr, position, x_odd, d_odd, inv_rms, ROTARY_DIM)
        return y_even, y_odd
    else:
        return x_even, x_odd


@triton.jit
def _store_cache(cache_ptr, page_stride, head, slot, x_even, x_odd, SCALE_MODE: tl.constexpr):
    """Quantize one row and write it at token ``slot`` (>= 0) of head ``head``: 64 data bytes + 4 scale bytes."""
    data, scale = quantize_pair(x_even, x_odd, SCALE_MODE)
    page = slot // PAGE_SIZE
    offset = slot % PAGE_SIZE
    record = cache_ptr + page * page_stride + head.to(tl.int64) * RECORD_BYTES
    block = tl.arange(0, 4)
    byte = tl.arange(0, 16)
    tl.store(record + offset * DATA_BYTES + block[:, None] * 16 + byte[None, :], data)
    tl.store(record + SCALE_OFFSET + offset * SCALE_BYTES + block, scale)


@triton.jit
def _qknorm_rope_write_kernel(
    qkv_ptr, positions_ptr, slot_ptr, cos_sin_ptr,
    q_weight_ptr, k_weight_ptr, iq_weight_ptr, ik_weight_ptr,
    k_cache_ptr, v_cache_ptr, ik_cache_ptr, q_out_ptr, iq_out_ptr,
    qkv_row_stride, kv_page_stride, ik_page_stride, eps,
    NUM_Q: tl.constexpr, NUM_IQ: tl.constexpr,
    K_START: tl.constexpr, V_START: tl.constexpr, IQ_START: tl.constexpr, IK_START: tl.constexpr,
    ROTARY_DIM: tl.constexpr, SCALE_MODE: tl.constexpr, INDEX_FP8: tl.constexpr,
):
    token = tl.program_id(0).to(tl.int64)
    row = tl.program_id(1)  # head row inside the fused projection
    block = tl.arange(0, 4)
    byte = tl.arange(0, 16)
    d_even = block[:, None] * 32 + byte[None, :] * 2  # [4, 16]
    row_ptr = qkv_ptr + token * qkv_row_stride + row.to(tl.int64) * HEAD_DIM
    position = tl.load(positions_ptr + token)
    slot = tl.load(slot_ptr + token)
    # head-row starts of k / v / idx_q / idx_k: atom_mxfp4.layout.qkv_rows, passed in by the launcher
    if row < K_START:  # q -> q_out [T, nq, 128] (q_dtype)
        y_even, y_odd = _load_pair(row_ptr, q_weight_ptr, cos_sin_ptr, position, eps, d_even, True, ROTARY_DIM)
        out = q_out_ptr + (token * NUM_Q + row) * HEAD_DIM
        tl.store(out + d_even, to_output(y_even, q_out_ptr.dtype.element_ty))
        tl.store(out + d_even + 1, to_output(y_odd, q_out_ptr.dtype.element_ty))
    elif row < V_START:  # k -> k_cache head (row - nq)
        y_even, y_odd = _load_pair(row_ptr, k_weight_ptr, cos_sin_ptr, position, eps, d_even, True, ROTARY_DIM)
        if slot >= 0:
            _store_cache(k_cache_ptr, kv_page_stride, row - K_START, slot, y_even, y_odd, SCALE_MODE)
    elif row < IQ_START:  # v (raw) -> v_cache head (row - nq - nkv)
        x_even, x_odd = _load_pair(row_ptr, q_weight_ptr, cos_sin_ptr, position, eps, d_even, False, ROTARY_DIM)
        if slot >= 0:
            _store_cache(v_cache_ptr, kv_page_stride, row - V_START, slot, x_even, x_odd, SCALE_MODE)
    elif row < IK_START:  # idx_q -> iq_out [T, niq, 128] bf16
        y_even, y_odd = _load_pair(row_ptr, iq_weight_ptr, cos_sin_ptr, position, eps, d_even, True, ROTARY_DIM)
        out = iq_out_ptr + (token * NUM_IQ + (row - IQ_START)) * HEAD_DIM
        tl.store(out + d_even, to_output(y_even, iq_out_ptr.dtype.element_ty))
        tl.store(out + d_even + 1, to_output(y_odd, iq_out_ptr.dtype.element_ty))
    else:  # idx_k -> index-K cache (one head)
        y_even, y_odd = _load_pair(row_ptr, ik_weight_ptr, cos_sin_ptr, position, eps, d_even, True, ROTARY_DIM)
        if slot >= 0:
            if INDEX_FP8:  # one head: the record of page slot // 128
                record = ik_cache_ptr + (slot // PAGE_SIZE) * ik_page_stride
                store_fp8_token(record, slot % PAGE_SIZE, y_even, y_odd)
            else:
                _store_cache(ik_cache_ptr, ik_page_stride, row - IK_START, slot, y_even, y_odd, SCALE_MODE)


@dataclass(frozen=True)
class WriteConfig:
    num_warps: int = 1


def write_config(num_tokens: int) -> WriteConfig:
    """Tuning: one warp per 128-value row (the row is 4 x 16 pairs; more warps only add reduction traffic)."""
    return WriteConfig(num_warps=1)


def fused_qknorm_rope_write(qkv, positions, q_norm_weight, k_norm_weight, idx_q_norm_weight, idx_k_norm_weight,
                            cos_sin_cache, slot_mapping, k_cache, v_cache, index_k_cache, *, num_q_heads,
                            num_kv_heads, num_index_heads, rotary_dim, eps, scale_mode, q_dtype,
                            index_k_dtype=IndexKDtype.MXFP4, config=None):
    # ---- validate (kernel invariants the launch relies on; user input was checked by atom_mxfp4.ops)
    expect(qkv.stride(-1) == 1, "qkv.stride(-1)", "1", qkv.stride(-1))  # rows may be strided (qkv_row_stride)
    for name, tensor in (("positions", positions), ("slot_mapping", slot_mapping), ("cos_sin_cache", cos_sin_cache),
                         ("q_norm_weight", q_norm_weight), ("k_norm_weight", k_norm_weight)) + (
            (("idx_q_norm_weight", idx_q_norm_weight), ("idx_k_norm_weight", idx_k_norm_weight))
            if num_index_heads else ()):
        expect_contiguous(tensor, name)  # read by pointer with unit stride
    expect(rotary_dim % 2 == 0 and 2 <= rotary_dim <= int(HEAD_DIM), "rotary_dim", f"even in [2, {int(HEAD_DIM)}]", rotary_dim)
    index_dtype = IndexKDtype.parse(index_k_dtype)
    for name, cache, width in (("k_cache", k_cache, int(RECORD_BYTES)), ("v_cache", v_cache, int(RECORD_BYTES)),
                               ("index_k_cache", index_k_cache, index_dtype.record_bytes)):
        if cache is not None:
            expect(cache.dtype == torch.uint8 and cache.dim() == 3 and cache.shape[2] == width
                   and cache.stride(1) == width and cache.stride(2) == 1, f"{name} layout",
                   f"uint8 [pages, heads, {width}] records", f"{cache.dtype} {list(cache.shape)} strides "
                   f"{tuple(cache.stride())}")
    # ---- flatten
    nq, nkv, niq = num_q_heads, num_kv_heads, num_index_heads
    tokens = qkv.shape[0]
    device = qkv.device
    mode = SCALE_MODE_IDS[ScaleMode.parse(scale_mode).value]
    # ---- allocate outputs
    q_out = torch.empty(tokens, nq, int(HEAD_DIM), dtype=q_dtype, device=device)
    iq_out = torch.empty(tokens, niq, int(HEAD_DIM), dtype=torch.bfloat16, device=device) if niq else None
    # ---- early return
    if tokens == 0:
        return q_out, iq_out
    # ---- tuning
    cfg = write_config(tokens) if config is None else config
    # ---- launch
    rows = qkv_rows(nq, nkv, niq)
    ik = index_k_cache if niq else k_cache  # never dereferenced when niq == 0
    ik_weight = idx_k_norm_weight if niq else k_norm_weight
    iq_weight = idx_q_norm_weight if niq else q_norm_weight
    _qknorm_rope_write_kernel[(tokens, rows.heads)](
        qkv, positions, slot_mapping, cos_sin_cache,
        q_norm_weight, k_norm_weight, iq_weight, ik_weight,
        k_cache, v_cache, ik, q_out, iq_out if niq else q_out,
        qkv.stride(0), k_cache.stride(0), ik.stride(0), float(eps),
        NUM_Q=nq, NUM_IQ=niq, K_START=rows.k.start, V_START=rows.v.start, IQ_START=rows.idx_q.start,
        IK_START=rows.idx_k.start, ROTARY_DIM=rotary_dim, SCALE_MODE=mode,
        INDEX_FP8=bool(niq) and index_dtype is IndexKDtype.FP8,
        num_warps=cfg.num_warps, enable_fp_fusion=False,
    )
    return q_out, iq_out
