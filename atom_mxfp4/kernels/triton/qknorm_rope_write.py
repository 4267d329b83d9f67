"""fused_qknorm_rope_write (Triton): Gemma QK-norm + partial NeoX RoPE + MXFP4 write of K, V, index-K, one launch.

The fused projection ``qkv[t] = [q (nq rows) | k (nkv) | v (nkv) | idx_q (niq) | idx_k (1 if niq)]`` holds rows of
128 bf16 values. Grid ``(cdiv(T, TPP), groups)`` (``WriteConfig``): along axis 1 a program takes ``HPP`` q heads
(or idx_q heads) of TPP tokens, rows ``[TPP * HPP, 128]``, or one k / v / idx_k head row of TPP tokens, rows
``[TPP, 128]``; the row kind is the same for the whole program. A row is spread over 16 lanes (8 values each) once a
program holds two rows per warp, so the per-row work (fp64 reduction, sqrt, division) is shared by 8 values per lane,
not 4; rows are viewed as ``[N, 4, 16]`` (even, odd) pairs to quantize; tokens past T and heads past nq are masked.
q / idx_q rows are held as RoPE halves where rotary_dim is 64 or 128 (``_norm_rope_halves``: each pair in one
thread, nothing recomputed), k / idx_k rows in element order (the quantizer's 32-blocks).
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

import functools
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from atom_mxfp4.errors import expect, expect_contiguous, fail
from atom_mxfp4.format import ScaleMode
from atom_mxfp4.index_k import IndexKDtype
from atom_mxfp4.launch import cdiv, launcher, pow2_at_least
from atom_mxfp4.layout import qkv_rows

from ._mxfp4 import DATA_BYTES, HEAD_DIM, RECORD_BYTES, SCALE_BYTES, SCALE_MODE_IDS, SCALE_OFFSET, \
    mma_bf16, quantize_pair, slot_record, to_output
from ._fp8 import store_fp8_tokens
from ._options import UNFUSED

assert int(HEAD_DIM) & (int(HEAD_DIM) - 1) == 0  # 1 / HEAD_DIM is exact
INV_HEAD_DIM = tl.constexpr(1.0 / int(HEAD_DIM))
HEAD_DIM_WIDTH, RECORD_WIDTH = int(HEAD_DIM), int(RECORD_BYTES)  # the launcher's ints (a constexpr's int() is a call)


@triton.jit
def _inv_rms(sq, eps):
    """1 / sqrt(sum / 128 + eps) from the fp64 sum of squares: ``sq * 2**-7`` is ``sq / 128`` bit for bit (a power of
    two), without fp64 division's Newton steps; then fp32, correctly rounded."""
    return tl.div_rn(1.0, tl.sqrt_rn((sq * INV_HEAD_DIM).to(tl.float32) + eps))


@triton.jit
def _norm_rope(row_ptr, weight_ptr, cos_sin_ptr, position, eps, valid, HAS_WEIGHT: tl.constexpr,
               ROTARY_DIM: tl.constexpr, EARLY_LOADS: tl.constexpr = False):
    """N head rows (``row_ptr``, position, valid: [N, 1]) -> fp32 [N, 128] in element order: the raw values (v), or
    y = (x * r) * (1 + w) then NeoX RoPE on d < rotary_dim. A row lies in one warp (16 or 32 lanes), so its sum of
    squares needs no barrier. Rows with ~valid read nothing (never stored). Any rotary_dim (``_norm_rope_halves`` is
    the faster form where rotary_dim is 64 or 128). EARLY_LOADS: every load is issued before the norm (``WriteConfig``).

    RoPE reads each element's partner (``d + h`` below h = rotary_dim / 2, ``d - h`` up to rotary_dim, itself past
    it: unused) with one load whose offsets stay contiguous in runs of 8 (vector loads), and computes
    ``y * cos + y_partner * (-sin)`` below h: ``a + b * (-s)`` is ``a - b * s`` bit for bit."""
    d = tl.arange(0, HEAD_DIM)[None, :]
    x = tl.load(row_ptr + d, mask=valid, other=0.0).to(tl.float32)
    if HAS_WEIGHT:
        HALF: tl.constexpr = ROTARY_DIM // 2
        low = d < HALF
        rotary = d < ROTARY_DIM
        partner = tl.where(low, d + HALF, tl.where(rotary, d - HALF, d))
        if EARLY_LOADS:
            w, x_partner, w_partner, cos, sin = _rope_partner_operands(row_ptr, weight_ptr, cos_sin_ptr, position,
                                                                       valid, d, partner, rotary, ROTARY_DIM)
        inv_rms = _inv_rms(tl.sum(x.to(tl.float64) * x.to(tl.float64), axis=1, keep_dims=True), eps)  # [N, 1]
        if not EARLY_LOADS:
            w, x_partner, w_partner, cos, sin = _rope_partner_operands(row_ptr, weight_ptr, cos_sin_ptr, position,
                                                                       valid, d, partner, rotary, ROTARY_DIM)
        y = (x * inv_rms) * (1.0 + w.to(tl.float32))
        y_partner = (x_partner.to(tl.float32) * inv_rms) * (1.0 + w_partner.to(tl.float32))
        sin = tl.where(low, -sin, sin)  # o1 = y1*c - y2*s (d < h), o2 = y2*c + y1*s (h <= d < rotary_dim)
        return tl.where(rotary, y * cos + y_partner * sin, y)
    else:
        return x


@triton.jit
def _rope_partner_operands(row_ptr, weight_ptr, cos_sin_ptr, position, valid, d, partner, rotary,
                           ROTARY_DIM: tl.constexpr):
    """``_norm_rope``'s loads besides x: (w, x_partner, w_partner, cos, sin), [N, 128] each, in x's layout (cos / sin
    masked to the rotary dims)."""
    HALF: tl.constexpr = ROTARY_DIM // 2
    w_ptr = weight_ptr + tl.zeros(valid.shape, tl.int32)  # [N, 1]: in x's layout
    cos_ptr = cos_sin_ptr + position * ROTARY_DIM + d % HALF
    return (tl.load(w_ptr + d), tl.load(row_ptr + partner, mask=valid, other=0.0), tl.load(w_ptr + partner),
            tl.load(cos_ptr, mask=rotary, other=1.0), tl.load(cos_ptr + HALF, mask=rotary, other=0.0))


@triton.jit
def _halves(ROTARY_DIM: tl.constexpr):
    """Where rotary_dim is 64 or 128 (h = rotary_dim / 2 a multiple of 32), a row is held as two halves (lo, hi)
    [N, 64]: column ``c`` of lo is element ``rotary_dim * (c // h) + c % h``, hi holds the element h after it, so
    every RoPE pair (d, d + h) sits in one thread (lo and hi are loaded with the same offsets + 0 / h, hence in the
    same layout). Returns lo's element offsets [1, 64]."""
    HALF: tl.constexpr = ROTARY_DIM // 2
    c = tl.arange(0, HEAD_DIM // 2)
    return (c // HALF * ROTARY_DIM + c % HALF)[None, :]


@triton.jit
def _norm_rope_halves(row_ptr, weight_ptr, cos_sin_ptr, position, eps, valid, ROTARY_DIM: tl.constexpr,
                      EARLY_LOADS: tl.constexpr):
    """``_norm_rope`` (with weight) on rows held as halves (``_halves``; row_ptr, position, valid: [N, 1]) ->
    (lo, hi) fp32 [N, 64], the same values: each element normalised once (no partner recomputed), the cos / sin of
    a pair loaded once, and a row spread over half the lanes of the [N, 128] form (8 lanes of 16 values on
    write_config's medium and large shapes). EARLY_LOADS: the weights and cos / sin are loaded before the norm
    (``WriteConfig``)."""
    HALF: tl.constexpr = ROTARY_DIM // 2
    d = _halves(ROTARY_DIM)
    x_lo = tl.load(row_ptr + d, mask=valid, other=0.0).to(tl.float32)
    x_hi = tl.load(row_ptr + d + HALF, mask=valid, other=0.0).to(tl.float32)
    c = tl.arange(0, HEAD_DIM // 2)[None, :]
    rotary = c < HALF  # lo's first h columns (all of them when rotary_dim is 128), at element c
    if EARLY_LOADS:
        w_lo, w_hi, cos, sin = _rope_half_operands(weight_ptr, cos_sin_ptr, position, valid, d, c, rotary, ROTARY_DIM,
                                                   True)
    x_lo64 = x_lo.to(tl.float64)
    x_hi64 = x_hi.to(tl.float64)
    sq = tl.fma(x_hi64, x_hi64, x_lo64 * x_lo64)  # the squares are exact: the same sum as a separate add
    inv_rms = _inv_rms(tl.sum(sq, axis=1, keep_dims=True), eps)  # [N, 1]
    if not EARLY_LOADS:
        w_lo, w_hi, cos, sin = _rope_half_operands(weight_ptr, cos_sin_ptr, position, valid, d, c, rotary, ROTARY_DIM,
                                                   False)
    y_lo = (x_lo * inv_rms) * (1.0 + w_lo.to(tl.float32))
    y_hi = (x_hi * inv_rms) * (1.0 + w_hi.to(tl.float32))
    # o1 = y1*c - y2*s as y1*c + y2*(-s) (bit for bit), o2 = y2*c + y1*s
    return (tl.where(rotary, y_lo * cos + y_hi * (-sin), y_lo), tl.where(rotary, y_hi * cos + y_lo * sin, y_hi))


@triton.jit
def _rope_half_operands(weight_ptr, cos_sin_ptr, position, valid, d, c, rotary, ROTARY_DIM: tl.constexpr,
                        EARLY: tl.constexpr):
    """``_norm_rope_halves``' loads besides x: (w_lo, w_hi, cos, sin), [N, 64] each, in x's layout (cos / sin
    masked to the rotary columns, or, EARLY, unmasked)."""
    HALF: tl.constexpr = ROTARY_DIM // 2
    w_ptr = weight_ptr + tl.zeros(valid.shape, tl.int32)  # [N, 1]: in x's layout
    cos_ptr = cos_sin_ptr + position * ROTARY_DIM + c % HALF  # in the table for every column (used below h only)
    if EARLY:  # unmasked: a predicate the scheduler would wait for before issuing the loads
        return tl.load(w_ptr + d), tl.load(w_ptr + d + HALF), tl.load(cos_ptr), tl.load(cos_ptr + HALF)
    else:
        return (tl.load(w_ptr + d), tl.load(w_ptr + d + HALF), tl.load(cos_ptr, mask=rotary, other=1.0),
                tl.load(cos_ptr + HALF, mask=rotary, other=0.0))


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
def _store_output(out_ptr, token, heads, head, y, d, valid, HW_BF16: tl.constexpr):
    """Values y -> out [T, heads, 128] at (token, head, d) (broadcast to y's shape), rounded to out's dtype."""
    out = out_ptr + (token * heads + head) * HEAD_DIM + d
    tl.store(out, to_output(y, out_ptr.dtype.element_ty, HW_BF16), mask=valid)


@triton.jit
def _query_rows(qkv_ptr, positions_ptr, weight_ptr, cos_sin_ptr, out_ptr, num_tokens, qkv_row_stride, eps, first,
                group, FIRST_ROW: tl.constexpr, NUM_HEADS: tl.constexpr, ROTARY_DIM: tl.constexpr,
                TPP: tl.constexpr, HPP: tl.constexpr, HW_BF16: tl.constexpr, EARLY_LOADS: tl.constexpr):
    """q / idx_q heads ``group * HPP ..`` (HPP of them, masked past NUM_HEADS) of tokens ``first ..`` (TPP): QK-norm +
    RoPE -> out [T, NUM_HEADS, 128]. Rows are (token, head) pairs, token-major: [TPP * HPP, 128]."""
    r = tl.arange(0, TPP * HPP)
    token = first + r // HPP
    head = group * HPP + r % HPP
    valid = (token < num_tokens) & (head < NUM_HEADS)
    position = tl.load(positions_ptr + token, mask=valid, other=0)
    row_ptr = qkv_ptr + token * qkv_row_stride + (FIRST_ROW + head).to(tl.int64) * HEAD_DIM
    if ROTARY_DIM % 64 == 0:  # rows as halves
        token, head, valid = token[:, None], head[:, None], valid[:, None]
        lo, hi = _norm_rope_halves(row_ptr[:, None], weight_ptr, cos_sin_ptr, position[:, None], eps, valid,
                                   ROTARY_DIM, EARLY_LOADS)
        d = _halves(ROTARY_DIM)
        _store_output(out_ptr, token, NUM_HEADS, head, lo, d, valid, HW_BF16)
        _store_output(out_ptr, token, NUM_HEADS, head, hi, d + ROTARY_DIM // 2, valid, HW_BF16)
    else:
        y = _norm_rope(row_ptr[:, None], weight_ptr, cos_sin_ptr, position[:, None], eps, valid[:, None], True,
                       ROTARY_DIM, EARLY_LOADS)
        _store_output(out_ptr, token[:, None], NUM_HEADS, head[:, None], y, tl.arange(0, HEAD_DIM)[None, :],
                      valid[:, None], HW_BF16)


@triton.jit(do_not_specialize=("num_tokens",))
def _qknorm_rope_write_kernel(
    qkv_ptr, positions_ptr, slot_ptr, cos_sin_ptr,
    q_weight_ptr, k_weight_ptr, iq_weight_ptr, ik_weight_ptr,
    k_cache_ptr, v_cache_ptr, ik_cache_ptr, q_out_ptr, iq_out_ptr,
    num_tokens, qkv_row_stride, kv_page_stride, ik_page_stride, eps,
    NUM_Q: tl.constexpr, NUM_KV: tl.constexpr, NUM_IQ: tl.constexpr,
    K_ROW: tl.constexpr, V_ROW: tl.constexpr, IQ_ROW: tl.constexpr, IK_ROW: tl.constexpr,
    ROTARY_DIM: tl.constexpr, SCALE_MODE: tl.constexpr, INDEX_FP8: tl.constexpr, TOKENS_PER_PROGRAM: tl.constexpr,
    HEADS_PER_PROGRAM: tl.constexpr, INDEX_HEADS_PER_PROGRAM: tl.constexpr, HW_BF16: tl.constexpr,
    EARLY_LOADS: tl.constexpr,
):
    TPP: tl.constexpr = TOKENS_PER_PROGRAM
    HPP: tl.constexpr = HEADS_PER_PROGRAM
    IHPP: tl.constexpr = INDEX_HEADS_PER_PROGRAM  # min(HPP, next power of 2 of NUM_IQ): no all-masked rows
    # *_ROW: the head rows' starts in qkv (atom_mxfp4.layout.qkv_rows, passed in by the launcher). Program groups
    # along axis 1: q in groups of HPP heads, one program per k head, per v head, idx_q in groups of IHPP heads, one
    # for idx_k (WriteConfig.groups)
    Q_GROUPS: tl.constexpr = (NUM_Q + HPP - 1) // HPP
    K_GROUP: tl.constexpr = Q_GROUPS
    V_GROUP: tl.constexpr = K_GROUP + NUM_KV
    IQ_GROUP: tl.constexpr = V_GROUP + NUM_KV
    IK_GROUP: tl.constexpr = IQ_GROUP + (NUM_IQ + IHPP - 1) // IHPP
    first = tl.program_id(0).to(tl.int64) * TPP
    group = tl.program_id(1)
    if group < K_GROUP:  # q -> q_out [T, nq, 128] (q_dtype)
        _query_rows(qkv_ptr, positions_ptr, q_weight_ptr, cos_sin_ptr, q_out_ptr, num_tokens, qkv_row_stride, eps,
                    first, group, 0, NUM_Q, ROTARY_DIM, TPP, HPP, HW_BF16, EARLY_LOADS)
    elif group < IQ_GROUP or group >= IK_GROUP:  # k / v / idx_k: one head row of TPP tokens -> its cache
        token = first + tl.arange(0, TPP)  # [TPP]
        valid = token < num_tokens
        position = tl.load(positions_ptr + token, mask=valid, other=0)[:, None]
        slot = tl.load(slot_ptr + token, mask=valid, other=-1)  # tokens past the end: skipped as slot -1
        token_ptr = qkv_ptr + token * qkv_row_stride
        valid2 = valid[:, None]
        if group < V_GROUP:  # k -> k_cache head (group - K_GROUP)
            head = group - K_GROUP
            row_ptr = (token_ptr + (K_ROW + head).to(tl.int64) * HEAD_DIM)[:, None]
            y = _norm_rope(row_ptr, k_weight_ptr, cos_sin_ptr, position, eps, valid2, True, ROTARY_DIM, EARLY_LOADS)
            _store_cache(k_cache_ptr, kv_page_stride, head, slot, y, SCALE_MODE)
        elif group < IQ_GROUP:  # v (raw) -> v_cache head (group - V_GROUP)
            head = group - V_GROUP
            row_ptr = (token_ptr + (V_ROW + head).to(tl.int64) * HEAD_DIM)[:, None]
            x = _norm_rope(row_ptr, q_weight_ptr, cos_sin_ptr, position, eps, valid2, False, ROTARY_DIM)
            _store_cache(v_cache_ptr, kv_page_stride, head, slot, x, SCALE_MODE)
        else:  # idx_k -> index-K cache (one head)
            row_ptr = (token_ptr + IK_ROW * HEAD_DIM)[:, None]
            y = _norm_rope(row_ptr, ik_weight_ptr, cos_sin_ptr, position, eps, valid2, True, ROTARY_DIM, EARLY_LOADS)
            if INDEX_FP8:  # one head: the record of page slot // 128
                y_even, y_odd = _pairs(y)
                store_fp8_tokens(ik_cache_ptr, ik_page_stride, slot, y_even, y_odd)
            else:
                _store_cache(ik_cache_ptr, ik_page_stride, group - IK_GROUP, slot, y, SCALE_MODE)  # head 0
    else:  # idx_q -> iq_out [T, niq, 128] bf16
        _query_rows(qkv_ptr, positions_ptr, iq_weight_ptr, cos_sin_ptr, iq_out_ptr, num_tokens, qkv_row_stride, eps,
                    first, group - IQ_GROUP, IQ_ROW, NUM_IQ, ROTARY_DIM, TPP, IHPP, HW_BF16, EARLY_LOADS)


@dataclass(frozen=True)
class WriteConfig:
    """Launch shape of the fused write: a program takes ``tokens_per_program`` tokens of one head row of k / v /
    idx_k, or of ``heads_per_program`` q (idx_q) heads; ``num_warps`` warps share its rows (16 lanes per 128-value
    row once a program holds >= 2 rows per warp: a lane then owns 8 values, so each row's reduction, sqrt and
    division are shared by twice the values of a 32-lane row). Powers of 2."""
    tokens_per_program: int = 8
    heads_per_program: int = 2
    num_warps: int = 4
    maxnreg: int | None = None  # register cap per thread (None: the compiler's choice)
    # every row's weights, cos / sin (and RoPE partner) loaded before its norm instead of after it: the norm's sqrt /
    # division are calls the compiler does not move loads across, so without it a program waits on two load round
    # trips (x, then the rest). Pays where latency rules (H200 sweeps: T = 1 .. 512 -2% to -13%), not at T >= 8192
    # (within 1%, worse at 32768): write_config's choice (docs/triton.md "The fused write: 16 lanes per row")
    early_loads: bool = False

    def index_heads_per_program(self, num_index_heads: int) -> int:
        """idx_q heads per program: heads_per_program, or fewer where there are fewer index heads (a power of 2)."""
        return min(self.heads_per_program, pow2_at_least(max(num_index_heads, 1)))

    def groups(self, num_q_heads: int, num_kv_heads: int, num_index_heads: int) -> int:
        """Programs along the launch's second axis (the kernel's group map)."""
        ihpp = self.index_heads_per_program(num_index_heads)
        return (-(-num_q_heads // self.heads_per_program) + 2 * num_kv_heads + -(-num_index_heads // ihpp)
                + (1 if num_index_heads else 0))


def write_config(num_tokens: int) -> WriteConfig:
    """Tuning, from the H200 sweeps of the launch shape (a scratch sweep, then sweep_write.py; docs/triton.md "The fused
    write: 16 lanes per row"; every config's outputs equal to the previous kernel's; the current times are in the
    ledger, docs/results/ledger.csv, the sweeps' in its "fused_write" rows of the backends named here): below 64 tokens
    one token per one-warp program (as fast as the best shape at T = 1 / 8 within the spread: "triton (1, 2, 1)");
    from 64, 8 tokens x 2 q heads on 4 warps (the best at T = 512: "triton (8, 2, 4)"); from 8192, 4 tokens x 2 q
    heads on 2 warps with 56 registers (36 resident warps per SM instead of 28 at MSE's 72 registers: faster with MSE /
    fp8 index-K at T = 8192 and 32768, CEIL unchanged: "triton (4, 2, 2, 56)"). Below 8192 tokens every load is issued
    before the norm (``early_loads``; same outputs; faster at every T from 1 to 512, CEIL and MSE: "triton (1, 2, 1)
    early_loads" and "triton (8, 2, 4) early_loads"); at 8192 and 32768 no faster or slower, so not there ("triton
    (4, 2, 2, 64) early_loads")."""
    if num_tokens < 64:
        return _FEW_TOKENS
    if num_tokens < 8192:
        return _SOME_TOKENS
    return _MANY_TOKENS


# write_config's three answers, made once (a frozen dataclass built per launch costs microseconds of host time)
_FEW_TOKENS = WriteConfig(tokens_per_program=1, heads_per_program=2, num_warps=1, early_loads=True)
_SOME_TOKENS = WriteConfig(early_loads=True)
_MANY_TOKENS = WriteConfig(tokens_per_program=4, heads_per_program=2, num_warps=2, maxnreg=56)


def _records_ok(cache, width: int) -> bool:
    """uint8 ``[pages, heads, width]`` records, heads and bytes dense (the kernel addresses page ``slot // 128``)."""
    return (cache.dtype == torch.uint8 and cache.dim() == 3 and cache.shape[2] == width and cache.stride(1) == width
            and cache.stride(2) == 1)


def _check_launch(qkv, positions, slot_mapping, cos_sin_cache, weights, caches, rotary_dim):
    """The kernel invariants the launch relies on (user input was checked by atom_mxfp4.ops; these also under
    check=False): one expression when they hold, the named checks only to say which does not."""
    if (qkv.stride(-1) == 1 and positions.is_contiguous() and slot_mapping.is_contiguous()
            and cos_sin_cache.is_contiguous() and all([w.is_contiguous() for _, w in weights])
            and cos_sin_cache.dtype == torch.float32 and rotary_dim % 2 == 0 and 2 <= rotary_dim <= HEAD_DIM_WIDTH
            and all([cache is None or _records_ok(cache, width) for _, cache, width in caches])):
        return
    expect(qkv.stride(-1) == 1, "qkv.stride(-1)", "1", qkv.stride(-1))  # rows may be strided (qkv_row_stride)
    for name, tensor in (("positions", positions), ("slot_mapping", slot_mapping), ("cos_sin_cache", cos_sin_cache),
                         *weights):
        expect_contiguous(tensor, name)  # read by pointer with unit stride
    # the rotated values must be fp32 (the quantizers' bit operations assume it), so the RoPE table must be: a bf16
    # table gave q and the caches wrong under check=False (q 27x off in the interpreter), an fp64 one did not compile
    expect(cos_sin_cache.dtype == torch.float32, "cos_sin_cache.dtype", "torch.float32", cos_sin_cache.dtype, TypeError)
    expect(rotary_dim % 2 == 0 and 2 <= rotary_dim <= HEAD_DIM_WIDTH, "rotary_dim", f"even in [2, {HEAD_DIM_WIDTH}]",
           rotary_dim)
    for name, cache, width in caches:
        if cache is not None and not _records_ok(cache, width):
            fail(f"{name} layout", f"uint8 [pages, heads, {width}] records",
                 f"{cache.dtype} {list(cache.shape)} strides {tuple(cache.stride())}")


@functools.lru_cache(maxsize=256)
def _launch_decisions(cfg: WriteConfig, nq: int, nkv: int, niq: int, rotary_dim: int, mode: int, index_fp8: bool,
                      hw_bf16: bool) -> tuple[int, dict]:
    """(programs along the grid's second axis, the kernel's constexpr and option keywords) of a launch: a function of
    the geometry and the config only, so made once per process for each (callers never change the dict)."""
    rows = qkv_rows(nq, nkv, niq)
    constexprs = dict(
        NUM_Q=nq, NUM_KV=nkv, NUM_IQ=niq, K_ROW=rows.k.start, V_ROW=rows.v.start, IQ_ROW=rows.idx_q.start,
        IK_ROW=rows.idx_k.start, ROTARY_DIM=rotary_dim, SCALE_MODE=mode, INDEX_FP8=index_fp8,
        TOKENS_PER_PROGRAM=cfg.tokens_per_program, HEADS_PER_PROGRAM=cfg.heads_per_program,
        INDEX_HEADS_PER_PROGRAM=cfg.index_heads_per_program(niq), HW_BF16=hw_bf16, EARLY_LOADS=cfg.early_loads,
        num_warps=cfg.num_warps, **UNFUSED, **({"maxnreg": cfg.maxnreg} if cfg.maxnreg is not None else {}))
    return cfg.groups(nq, nkv, niq), constexprs


def fused_qknorm_rope_write(qkv, positions, q_norm_weight, k_norm_weight, idx_q_norm_weight, idx_k_norm_weight,
                            cos_sin_cache, slot_mapping, k_cache, v_cache, index_k_cache, *, num_q_heads,
                            num_kv_heads, num_index_heads, rotary_dim, eps, scale_mode, q_dtype,
                            index_k_dtype=IndexKDtype.MXFP4, config=None):
    # ---- validate (kernel invariants the launch relies on; user input was checked by atom_mxfp4.ops)
    nq, nkv, niq = num_q_heads, num_kv_heads, num_index_heads
    index_dtype = IndexKDtype.parse(index_k_dtype)
    weights = (("q_norm_weight", q_norm_weight), ("k_norm_weight", k_norm_weight)) + (
        (("idx_q_norm_weight", idx_q_norm_weight), ("idx_k_norm_weight", idx_k_norm_weight)) if niq else ())
    _check_launch(qkv, positions, slot_mapping, cos_sin_cache, weights,
                  (("k_cache", k_cache, RECORD_WIDTH), ("v_cache", v_cache, RECORD_WIDTH),
                   ("index_k_cache", index_k_cache, index_dtype.record_bytes)), rotary_dim)
    # ---- flatten
    tokens = qkv.shape[0]
    device = qkv.device
    # ---- allocate outputs
    q_out = torch.empty(tokens, nq, HEAD_DIM_WIDTH, dtype=q_dtype, device=device)
    iq_out = torch.empty(tokens, niq, HEAD_DIM_WIDTH, dtype=torch.bfloat16, device=device) if niq else None
    # ---- early return
    if tokens == 0:
        return q_out, iq_out
    # ---- tuning (decided once per geometry and config: _launch_decisions)
    cfg = write_config(tokens) if config is None else config
    groups, constexprs = _launch_decisions(cfg, nq, nkv, niq, rotary_dim, SCALE_MODE_IDS[ScaleMode.parse(
        scale_mode).value], bool(niq) and index_dtype is IndexKDtype.FP8, mma_bf16())
    # ---- launch
    ik = index_k_cache if niq else k_cache  # never dereferenced when niq == 0
    ik_weight = idx_k_norm_weight if niq else k_norm_weight
    iq_weight = idx_q_norm_weight if niq else q_norm_weight
    launcher(_qknorm_rope_write_kernel)[(cdiv(tokens, cfg.tokens_per_program), groups)](
        qkv, positions, slot_mapping, cos_sin_cache,
        q_norm_weight, k_norm_weight, iq_weight, ik_weight,
        k_cache, v_cache, ik, q_out, iq_out if niq else q_out,
        tokens, qkv.stride(0), k_cache.stride(0), ik.stride(0), float(eps), **constexprs,
    )
    return q_out, iq_out
