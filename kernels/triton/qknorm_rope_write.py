"""fused_qknorm_rope_write (Triton): Gemma QK-norm + partial NeoX RoPE + MXFP4 write of K, V, index-K, one launch.

One program per (TOKENS_PER_PROGRAM tokens, head row) of the fused projection
``qkv[t] = [q (nq rows) | k (nkv) | v (nkv) | idx_q (niq) | idx_k (1 if niq)]``, each row 128 bf16 values: grid
``(cdiv(T, TPP), rows)``, one warp per token (``WriteConfig``), so the row kind (q / k / v / idx_q / idx_k) is the same
for the whole program; rows are ``[TPP, 128]`` (a warp holds one token's row: contiguous vector loads, in-warp sums),
viewed as ``[TPP, 4, 16]`` (even, odd) pairs to quantize; tokens past T are masked.
Arithmetic is the exact one of docs/api.md, so cache bytes equal the torch backend's bit for bit:
fp64 sum of squares, ``tl.sqrt_rn`` / ``tl.div_rn``, fp32 products rounded one by one (the launch passes
``enable_fp_fusion=False``: no FMA), K / idx_K quantized from fp32, V from ``v.float()``.
Sentinel: ``slot_mapping[t] == -1`` skips the cache write of token t alone (q / idx_q are still written).
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

from ._mxfp4 import DATA_BYTES, HEAD_DIM, RECORD_BYTES, SCALE_BYTES, SCALE_MODE_IDS, SCALE_OFFSET, \
    quantize_pair, slot_record, to_output
from ._fp8 import store_fp8_tokens


@triton.jit
def _partner(ptr, d, low, high, HALF: tl.constexpr, mask):
    """The NeoX RoPE partner of element d: ``ptr[d + h]`` where ``low`` (d < h), ``ptr[d - h]`` where ``high``
    (h <= d < rotary_dim), 0 elsewhere; two loads whose addresses stay contiguous along d (vector loads)."""
    up = tl.load(ptr + d + HALF, mask=low & mask, other=0.0)
    down = tl.load(ptr + d - HALF, mask=high & mask, other=0.0)
    return tl.where(low, up, down).to(tl.float32)


@triton.jit
def _norm_rope(row_ptr, weight_ptr, cos_sin_ptr, position, eps, valid, HAS_WEIGHT: tl.constexpr,
               ROTARY_DIM: tl.constexpr):
    """TPP head rows (``row_ptr``, position, valid: [TPP, 1]) -> fp32 [TPP, 128] in element order: the raw values
    (v), or y = (x * r) * (1 + w) then NeoX RoPE on d < rotary_dim. Each warp holds one token's row (128 contiguous
    values), so the sum of squares stays inside the warp. Tokens with ~valid read nothing (never stored)."""
    d = tl.arange(0, HEAD_DIM)[None, :]
    x = tl.load(row_ptr + d, mask=valid, other=0.0).to(tl.float32)
    if HAS_WEIGHT:
        sq = tl.sum(x.to(tl.float64) * x.to(tl.float64), axis=1, keep_dims=True)
        inv_rms = tl.div_rn(1.0, tl.sqrt_rn((sq / HEAD_DIM).to(tl.float32) + eps))  # [TPP, 1]
        HALF: tl.constexpr = ROTARY_DIM // 2
        low = d < HALF
        rotary = d < ROTARY_DIM
        high = rotary & (d >= HALF)
        w_ptr = weight_ptr + tl.zeros([x.shape[0], 1], tl.int32)  # [TPP, 1]: one copy per warp, in x's layout
        y = (x * inv_rms) * (1.0 + tl.load(w_ptr + d).to(tl.float32))
        x_partner = _partner(row_ptr, d, low, high, HALF, valid)
        y_partner = (x_partner * inv_rms) * (1.0 + _partner(w_ptr, d, low, high, HALF, True))
        cos_ptr = cos_sin_ptr + position * ROTARY_DIM + d % HALF
        cos = tl.load(cos_ptr, mask=rotary, other=1.0)
        sin = tl.load(cos_ptr + HALF, mask=rotary, other=0.0)
        first = y * cos - y_partner * sin  # o1 = y1*c - y2*s  (d < h)
        second = y * cos + y_partner * sin  # o2 = y2*c + y1*s (h <= d < rotary_dim)
        return tl.where(low, first, tl.where(rotary, second, y))
    else:
        return x


@triton.jit
def _pairs(y):
    """[N, 128] in element order -> (even, odd) [N, 4, 16] (row = 32-block, column = pair), no data movement."""
    return tl.split(tl.reshape(y, (y.shape[0], 4, 16, 2)))


@triton.jit
def _store_cache(cache_ptr, page_stride, head, slot, y, SCALE_MODE: tl.constexpr):
    """Quantize TPP rows y [TPP, 128] and write each at token ``slot`` [TPP] of head ``head``: 64 data bytes + 4
    scale bytes; tokens with slot < 0 write nothing."""
    x_even, x_odd = _pairs(y)
    data, scale = quantize_pair(x_even, x_odd, SCALE_MODE)  # [TPP, 4, 16], [TPP, 4]
    page_record, offset, write = slot_record(cache_ptr, page_stride, slot)
    record = page_record + head.to(tl.int64) * RECORD_BYTES  # [TPP]
    data_ptr = (record + offset * DATA_BYTES)[:, None] + tl.arange(0, DATA_BYTES)[None, :]
    tl.store(data_ptr, tl.reshape(data, (y.shape[0], DATA_BYTES)), mask=write[:, None])
    scale_ptr = (record + SCALE_OFFSET + offset * SCALE_BYTES)[:, None] + tl.arange(0, SCALE_BYTES)[None, :]
    tl.store(scale_ptr, scale, mask=write[:, None])


@triton.jit
def _store_output(out_ptr, token, heads, head, y, valid):
    """Rows y [TPP, 128] -> out [T, heads, 128] at (token [TPP, 1], head), rounded to out's dtype."""
    out = out_ptr + (token * heads + head) * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :]
    tl.store(out, to_output(y, out_ptr.dtype.element_ty), mask=valid)


@triton.jit
def _qknorm_rope_write_kernel(
    qkv_ptr, positions_ptr, slot_ptr, cos_sin_ptr,
    q_weight_ptr, k_weight_ptr, iq_weight_ptr, ik_weight_ptr,
    k_cache_ptr, v_cache_ptr, ik_cache_ptr, q_out_ptr, iq_out_ptr,
    num_tokens, qkv_row_stride, kv_page_stride, ik_page_stride, eps,
    NUM_Q: tl.constexpr, NUM_IQ: tl.constexpr,
    K_START: tl.constexpr, V_START: tl.constexpr, IQ_START: tl.constexpr, IK_START: tl.constexpr,
    ROTARY_DIM: tl.constexpr, SCALE_MODE: tl.constexpr, INDEX_FP8: tl.constexpr, TOKENS_PER_PROGRAM: tl.constexpr,
):
    token = tl.program_id(0).to(tl.int64) * TOKENS_PER_PROGRAM + tl.arange(0, TOKENS_PER_PROGRAM)  # [TPP]
    row = tl.program_id(1)  # head row inside the fused projection: the same for every token of the program
    valid = token < num_tokens
    position = tl.load(positions_ptr + token, mask=valid, other=0)[:, None]
    slot = tl.load(slot_ptr + token, mask=valid, other=-1)  # tokens past the end: skipped as slot -1
    row_ptr = (qkv_ptr + token * qkv_row_stride + row.to(tl.int64) * HEAD_DIM)[:, None]
    token2 = token[:, None]
    valid2 = valid[:, None]
    # head-row starts of k / v / idx_q / idx_k: atom_mxfp4.layout.qkv_rows, passed in by the launcher
    if row < K_START:  # q -> q_out [T, nq, 128] (q_dtype)
        y = _norm_rope(row_ptr, q_weight_ptr, cos_sin_ptr, position, eps, valid2, True, ROTARY_DIM)
        _store_output(q_out_ptr, token2, NUM_Q, row, y, valid2)
    elif row < V_START:  # k -> k_cache head (row - nq)
        y = _norm_rope(row_ptr, k_weight_ptr, cos_sin_ptr, position, eps, valid2, True, ROTARY_DIM)
        _store_cache(k_cache_ptr, kv_page_stride, row - K_START, slot, y, SCALE_MODE)
    elif row < IQ_START:  # v (raw) -> v_cache head (row - nq - nkv)
        x = _norm_rope(row_ptr, q_weight_ptr, cos_sin_ptr, position, eps, valid2, False, ROTARY_DIM)
        _store_cache(v_cache_ptr, kv_page_stride, row - V_START, slot, x, SCALE_MODE)
    elif row < IK_START:  # idx_q -> iq_out [T, niq, 128] bf16
        y = _norm_rope(row_ptr, iq_weight_ptr, cos_sin_ptr, position, eps, valid2, True, ROTARY_DIM)
        _store_output(iq_out_ptr, token2, NUM_IQ, row - IQ_START, y, valid2)
    else:  # idx_k -> index-K cache (one head)
        y = _norm_rope(row_ptr, ik_weight_ptr, cos_sin_ptr, position, eps, valid2, True, ROTARY_DIM)
        if INDEX_FP8:  # one head: the record of page slot // 128
            y_even, y_odd = _pairs(y)
            store_fp8_tokens(ik_cache_ptr, ik_page_stride, slot, y_even, y_odd)
        else:
            _store_cache(ik_cache_ptr, ik_page_stride, row - IK_START, slot, y, SCALE_MODE)


@dataclass(frozen=True)
class WriteConfig:
    tokens_per_program: int = 2  # tokens of one head row per program, one warp each (a power of 2)

    @property
    def num_warps(self) -> int:
        return self.tokens_per_program


def write_config(num_tokens: int) -> WriteConfig:
    """Tuning: one warp per token of a 128-value row (4 x 16 pairs); several tokens of the same head row per program
    so that a program is more than one warp (Hopper keeps at most 32 blocks per SM: 1-warp programs cap occupancy at
    half) and the weights are read once per program. H200 sweep (2026-12-03, bit-identical outputs at every setting,
    docs/triton.md "The fused write"): 2 tokens per program fastest from T = 64 (T = 8192: 60.5 us against 102.5 us
    at 1, 61.8 at 4, 63.4 at 8); below 64 tokens one per program (not measured there)."""
    return WriteConfig(tokens_per_program=1 if num_tokens < 64 else 2)


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
    tpp = cfg.tokens_per_program
    _qknorm_rope_write_kernel[(triton.cdiv(tokens, tpp), rows.heads)](
        qkv, positions, slot_mapping, cos_sin_cache,
        q_norm_weight, k_norm_weight, iq_weight, ik_weight,
        k_cache, v_cache, ik, q_out, iq_out if niq else q_out,
        tokens, qkv.stride(0), k_cache.stride(0), ik.stride(0), float(eps),
        NUM_Q=nq, NUM_IQ=niq, K_START=rows.k.start, V_START=rows.v.start, IQ_START=rows.idx_q.start,
        IK_START=rows.idx_k.start, ROTARY_DIM=rotary_dim, SCALE_MODE=mode,
        INDEX_FP8=bool(niq) and index_dtype is IndexKDtype.FP8, TOKENS_PER_PROGRAM=tpp,
        num_warps=cfg.num_warps, enable_fp_fusion=False,
    )
    return q_out, iq_out
