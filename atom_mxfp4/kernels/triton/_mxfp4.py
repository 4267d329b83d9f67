"""MXFP4 device helpers shared by the Triton kernels (DESIGN §3/§4 made exact, see docs/api.md "Codec arithmetic").

Cache record of one (page, head): ``[128 tokens x 64 B e2m1 codes][128 tokens x 4 B e8m0 scales]`` = 8704 B.
Element ``d`` of a token lives in byte ``d // 2`` (low nibble = even ``d``), its scale is byte ``d // 32``.

Tensors here are kept as *pairs* (even elements, odd elements) shaped ``[..., 4, 16]`` (any leading token dims):
row = 32-block, column = byte inside the block; that way one byte is ``even | odd << 4`` with no reshape and the
32-block reduction is ``axis=-1``.
"""

import enum
import os

import triton
import triton.language as tl

from atom_mxfp4 import layout

from ._interpreter_compat import patch_interpreter

patch_interpreter()  # the CPU interpreter behaves as the GPU does (a no-op on the GPU path)

# the ground floor's values as tl.constexpr so kernels may read them (Triton refuses plain globals); host code
# uses int(...)
PAGE_SIZE = tl.constexpr(layout.PAGE_SIZE)
HEAD_DIM = tl.constexpr(layout.HEAD_DIM)
DATA_BYTES = tl.constexpr(layout.DATA_BYTES)  # e2m1 bytes per token-head
SCALE_BYTES = tl.constexpr(layout.SCALE_BYTES)  # e8m0 bytes per token-head
SCALE_OFFSET = tl.constexpr(layout.SCALE_OFFSET)  # 8192: where the scale bytes of a record start
RECORD_BYTES = tl.constexpr(layout.RECORD_BYTES)  # 8704
NO_BLOCK = tl.constexpr(layout.NO_BLOCK)  # index_topk padding

SCALE_MODE_IDS = {"floor": 0, "ceil": 1, "mse": 2}  # constexpr ids of ScaleMode


# ---- quantize (writer side) -------------------------------------------------------------------------------------
@triton.jit
def _pow2_f32(k):
    """Exact 2**k as fp32 for integer k in [-126, 127] (built from bits)."""
    return ((k + 127) << 23).to(tl.float32, bitcast=True)


@triton.jit
def _e2m1_magnitude(v):
    """v = |x| / 2**(e - 127) as fp32 (>= 0, +Inf or NaN) -> nearest e2m1 magnitude code 0..7, ties to the even
    code, saturating at 6 (code 7); NaN -> 0; +Inf -> 7. From bits, not seven comparisons:
    v >= 1: round the fp32 mantissa to one bit (ties to even) and read ``2 * (E - 127) + 2 + m`` off the bits;
    v < 1: round(2 v) (0, 1 or 2; ties to even) by the fp32 adder against 2**23."""
    bits = v.to(tl.int32, bitcast=True)
    high = ((bits + (0x1FFFFF + ((bits >> 22) & 1))) >> 22) - 252
    low = ((v + v) + 8388608.0).to(tl.int32, bitcast=True) - 0x4B000000
    return tl.where(v == v, tl.where(v < 1.0, low, tl.minimum(high, 7)), 0)


@triton.jit
def _e2m1_magnitude_value(mag):
    """e2m1 magnitude codes 0..7 (int32) -> their values as fp32 (0, 0.5, 1, 1.5, 2, 3, 4, 6), from bits: codes 0 and
    1 are 0 and 0.5 (``mag * bits(0.5)``), codes 2..7 are ``2**((mag >> 1) - 1) * (1 + (mag & 1) / 2)``, whose fp32
    bits are ``(mag << 22) + bits(0.5)``. The writer's twin of the reader's ``e2m1_unscaled`` (signed nibbles through
    an fp16 conversion): on unsigned codes this form saves 16-18 SASS instructions per K / V row (large shape)."""
    return tl.where(mag < 2, mag * 0x3F000000, mag * 0x400000 + 0x3F000000).to(tl.float32, bitcast=True)


@triton.jit
def _block_sq_error(v_even, mag_even, f_even, v_odd, mag_odd, f_odd):
    """Per 32-block: the fp64 sum over the finite elements (f_*) of (v - e2m1(mag))**2 -> [..., 4]; v_* fp32
    [..., 4, 16] (|x| in units of the candidate scale), mag_* their codes.

    The difference is taken in fp32 and is exact: ``e2m1(mag)`` is v's nearest grid value (or 6 where v saturates,
    v < 8), so it is 0 (d = v) or within [v / 2, 2 v] (Sterbenz). Its square (<= 48 significant bits) is exact in
    fp64, so ``fma(d_odd, d_odd, d_even**2)`` is the rounded sum of the two exact squares."""
    d_even = tl.where(f_even, v_even - _e2m1_magnitude_value(mag_even), 0.0).to(tl.float64)
    d_odd = tl.where(f_odd, v_odd - _e2m1_magnitude_value(mag_odd), 0.0).to(tl.float64)
    return tl.sum(tl.fma(d_odd, d_odd, d_even * d_even), axis=-1)


@triton.jit
def quantize_pair(x_even, x_odd, SCALE_MODE: tl.constexpr):
    """Token-head rows as (even, odd) fp32 [..., 4, 16] (one row: [4, 16]; N rows: [N, 4, 16]) -> (data bytes
    uint8 [..., 4, 16], scale bytes uint8 [..., 4]); each row's bytes depend on that row alone.

    Scale rule (ScaleMode): amax over finite values; E/M = fp32 exponent/mantissa fields of amax;
    FLOOR e = E - 2, CEIL e = E - 2 + (M > 0x400000), MSE = the smaller fp64 squared error (ties to CEIL);
    e clamped to [1, 254].

    docs/api.md computes v = |x| / 2**(e - 127) in fp64; here it is ``|x| * 2**(127 - e)`` in fp32, the same codes:
    e <= 253 (E <= 254 for a finite amax), so the factor is a normal fp32 power of two and the product is exact
    unless it underflows, which only values far below the first threshold (0.25) do, and finite |x| <= amax keeps
    v < 8 (no overflow). MSE sums each candidate's squared errors in its own scale's units (fp32 differences, exact;
    fp64 squares and sums: ``_block_sq_error``) and brings CEIL's sum to FLOOR's units by an exact factor 4 where its
    scale is twice FLOOR's: every term is the docs' term times one power of two, so the comparison and its ties are
    the same. (A value below 2**-126 of its scale underflows fp32 and enters rounded: code 0 under both candidates,
    its square < 2**-252, while a block whose candidates differ has a term >= 2**-42 in each sum, so neither sum
    moves; where they do not differ both sums are the same computation.) No fp64 conversion of |x| or of the grid
    values (docs/triton.md "The fused write: 16 lanes per row", "Quantizers without fp64 conversions"): 11% fewer
    instructions in a K or V row.
    """
    a_even = tl.abs(x_even)
    a_odd = tl.abs(x_odd)
    amax = tl.max(tl.maximum(tl.where(a_even < float("inf"), a_even, 0.0),
                             tl.where(a_odd < float("inf"), a_odd, 0.0)), axis=-1)  # [..., 4] fp32
    bits = amax.to(tl.int32, bitcast=True)
    exp_field = (bits >> 23) & 0xFF
    mantissa = bits & 0x7FFFFF
    e_floor = tl.minimum(tl.maximum(exp_field - 2, 1), 254)
    e_ceil = tl.minimum(tl.maximum(exp_field - 2 + (mantissa > 0x400000).to(tl.int32), 1), 254)
    if SCALE_MODE == 0:
        e = e_floor
    else:
        e = e_ceil
    inv = tl.expand_dims(_pow2_f32(127 - e), -1)
    v_even = a_even * inv
    v_odd = a_odd * inv
    mag_even = _e2m1_magnitude(v_even)
    mag_odd = _e2m1_magnitude(v_odd)
    if SCALE_MODE == 2:  # (mag_*: the CEIL codes) against the FLOOR codes
        inv_floor = tl.expand_dims(_pow2_f32(127 - e_floor), -1)  # e_floor <= 252: a normal fp32
        vf_even = a_even * inv_floor  # exact but where it underflows (< 2**-126: code 0 under both scales)
        vf_odd = a_odd * inv_floor
        floor_even = _e2m1_magnitude(vf_even)
        floor_odd = _e2m1_magnitude(vf_odd)
        f_even = a_even < float("inf")  # finite (NaN compares false)
        f_odd = a_odd < float("inf")
        err_floor = _block_sq_error(vf_even, floor_even, f_even, vf_odd, floor_odd, f_odd)
        # CEIL's sum in its own units, times 4 (exact) where its scale is twice FLOOR's: in floor units
        err_ceil = _block_sq_error(v_even, mag_even, f_even, v_odd, mag_odd, f_odd) * tl.where(e_ceil > e_floor,
                                                                                             4.0, 1.0)
        use_floor = err_floor < err_ceil
        e = tl.where(use_floor, e_floor, e_ceil)
        mag_even = tl.where(tl.expand_dims(use_floor, -1), floor_even, mag_even)
        mag_odd = tl.where(tl.expand_dims(use_floor, -1), floor_odd, mag_odd)
    code_even = mag_even | (((x_even < 0) & (mag_even != 0)).to(tl.int32) << 3)
    code_odd = mag_odd | (((x_odd < 0) & (mag_odd != 0)).to(tl.int32) << 3)
    data = (code_even | (code_odd << 4)).to(tl.uint8)
    return data, e.to(tl.uint8)


@triton.jit
def slot_record(cache_ptr, page_stride, slot):
    """Cache-write addressing of tokens ``slot`` [N] (page ``slot // 128``, token ``slot % 128``): (the page's
    record pointer [N], the token offset in it [N], whether to write [N]); slot < 0 (skipped) points at page 0."""
    write = slot >= 0
    token = tl.where(write, slot, 0)
    return cache_ptr + (token // PAGE_SIZE) * page_stride, token % PAGE_SIZE, write


# ---- dequantize (reader side) -----------------------------------------------------------------------------------
@triton.jit
def e2m1_unscaled(nibble):
    """4-bit e2m1 codes (any int tensor, values 0..15) -> their values as fp32, exactly.

    The code's bits ``s ee m`` are placed into an fp16 (sign -> bit 15, ``ee m`` -> bits 11..9), which reads as
    ``e2m1 * 2**-14`` for every code (code 1 lands on the fp16 subnormal 2**-15); the fp16 -> fp32 conversion is
    exact and the final multiply by 2**14 is exact.
    """
    n = nibble.to(tl.int16)
    bits = ((n & 7) << 9) | ((n & 8) << 12)
    return bits.to(tl.float16, bitcast=True).to(tl.float32) * 16384.0


@triton.jit
def e8m0_value(scale_byte):
    """e8m0 bytes -> 2**(e - 127) fp32 (e in [1, 254] exact; 255 -> Inf; 0 -> 0; never fed by writers)."""
    return (scale_byte.to(tl.int32) << 23).to(tl.float32, bitcast=True)


class Decode(enum.IntEnum):
    """How a kernel turns e2m1 codes and e8m0 scales into values: the ``DECODE`` constexpr (passed as ``.value``).

    Both give the exact dequantized values (tests/gpu: bit for bit against ``format.dequantize_mxfp4``)."""

    TRITON = 1  # e2m1_unscaled x e8m0_value in Triton arithmetic: the interpreter's (and any non-CUDA device's) path
    PTX = 2  # the inline PTX of E2M1_BF16X2_ASM: NVIDIA GPUs only (DecodeConfig.asm / IndexConfig.asm, the default)


PTX_DECODE = tl.constexpr(Decode.PTX.value)


def decode_variant(asm: bool) -> Decode:
    """The decode a launch uses: the PTX one when asked for and the kernel runs on the GPU, else the Triton one."""
    return Decode.PTX if asm and mma_bf16() else Decode.TRITON


@triton.jit
def load_tokens(record_ptr, token, mask, BLOCK_N: tl.constexpr, OUT_BF16: tl.constexpr, DECODE: tl.constexpr):
    """Dequantize BLOCK_N tokens of one record.

    record_ptr: uint8 pointer to the record start (int64 offsets already applied); token [BLOCK_N] int32 offsets
    in the page (0..127); mask [BLOCK_N] (False -> the token's bytes are never read, its values are 0).
    Returns values [BLOCK_N, 128] in element order: fp32, or bf16 (exact) when OUT_BF16 (halves the bytes the
    join / layout change moves). DECODE: a ``Decode`` value.
    """
    block = tl.arange(0, 4)
    byte = tl.arange(0, 16)
    data_ptr = record_ptr + token[:, None, None] * DATA_BYTES + block[None, :, None] * 16 + byte[None, None, :]
    data = tl.load(data_ptr, mask=mask[:, None, None], other=0)  # [N, 4, 16] uint8
    scale_ptr = record_ptr + SCALE_OFFSET + token[:, None] * SCALE_BYTES + block[None, :]
    scale_byte = tl.load(scale_ptr, mask=mask[:, None], other=0)  # [N, 4] uint8
    if DECODE == PTX_DECODE:  # bf16 out
        low, high = decode_bytes_asm(data, scale_byte)
    else:
        scale = e8m0_value(scale_byte)  # fp32
        low = e2m1_unscaled(data & 0xF) * scale[:, :, None]
        high = e2m1_unscaled(data >> 4) * scale[:, :, None]
    if OUT_BF16:
        low = low.to(tl.bfloat16)
        high = high.to(tl.bfloat16)
    values = tl.join(low, high)  # [N, 4, 16, 2]: element d = 32 * block + 2 * byte + nibble
    return tl.reshape(values, (BLOCK_N, HEAD_DIM))


# e2m1 codes -> bf16 values times e8m0 scales, 4 bytes (8 elements) per instance, with integer SIMD-in-register work
# instead of per-element conversions (GPU only: the interpreter cannot run PTX). For a pair of bytes moved into the
# two 16-bit lanes of x (prmt), the nibble n of each lane becomes the bf16 bits of e2m1(n) * 2**-126 with one
# multiply: n * (2**6 + 2**12) puts the magnitude bits at 6..8 (exponent LSBs + mantissa MSB) and the sign at 15;
# the mask keeps those bits (code 1 lands on the bf16 subnormal 2**-127). Then two exact bf16x2 multiplies: by
# 2**126, then by the scale 2**(e - 127). Outputs: low nibbles ($0, $1) and high nibbles ($2, $3) of the 4 bytes.
def _e2m1_bf16x2_asm() -> str:
    lines = ["{", ".reg .b32 x, t, c;", "mov.b32 c, 0x7E807E80;"]  # c = bf16x2 (2**126, 2**126)
    for pair, (selector, scale) in enumerate(((0x4140, "$5"), (0x4342, "$6"))):  # bytes 0, 1 / 2, 3 -> the lanes
        lines.append(f"prmt.b32 x, $4, 0, {selector:#06x};")
        for nibble_mask, spread, out in ((0x000F000F, 0x1040, pair), (0x00F000F0, 0x104, pair + 2)):  # low, high
            lines += [f"and.b32 t, x, {nibble_mask:#010x};", f"mul.lo.u32 t, t, {spread:#x};",
                      "and.b32 t, t, 0x81C081C0;", "mul.rn.bf16x2 t, t, c;", f"mul.rn.bf16x2 ${out}, t, {scale};"]
    return "\n".join(lines + ["}"])


E2M1_BF16X2_ASM = tl.constexpr(_e2m1_bf16x2_asm())


@triton.jit
def decode_bytes_asm(data, scale_byte):
    """(codes [N, 4, 16] uint8, scales [N, 4] uint8) -> (even, odd) element values [N, 4, 16] bf16, exact (GPU)."""
    scale = (scale_byte.to(tl.int16) << 7).to(tl.bfloat16, bitcast=True)  # 2**(e - 127); e = 0 -> 0, 255 -> Inf
    scale = tl.broadcast_to(scale[:, :, None], data.shape)
    return tl.inline_asm_elementwise(E2M1_BF16X2_ASM, "=r,=r,=r,=r,r,r,r", [data, scale],
                                     dtype=(tl.bfloat16, tl.bfloat16), is_pure=True, pack=4)


@triton.jit
def qk_tile(q, record, offset, valid, BLOCK_N: tl.constexpr, MMA_BF16: tl.constexpr, DECODE: tl.constexpr):
    """q [BLOCK_H, D] (bf16 values) . K^T of BLOCK_N tokens of one record -> [BLOCK_H, N] fp32 (0 where invalid)."""
    k = load_tokens(record, offset, valid, BLOCK_N, MMA_BF16, DECODE)  # [N, D]
    return tl.dot(q, tl.trans(mma_operand(k, MMA_BF16)))


# ---- rounding ---------------------------------------------------------------------------------------------------
@triton.jit
def to_bf16_rne(x):
    """fp32 -> bf16, round to nearest even, from bits (Inf stays Inf, NaN stays NaN).

    Written out because the Triton interpreter (TRITON_INTERPRET=1, the CPU tests) truncates in ``.to(bf16)``;
    on the GPU this is the same rounding as the hardware conversion.
    """
    bits = x.to(tl.int32, bitcast=True)
    rounded = (bits + (0x7FFF + ((bits >> 16) & 1))) >> 16
    rounded = tl.where(x != x, 0x7FC0, rounded)
    return rounded.to(tl.int16).to(tl.bfloat16, bitcast=True)


@triton.jit
def to_e4m3_rne(x):
    """fp32 -> float8_e4m3fn, round to nearest even, saturating at +-448 (Inf too), NaN -> NaN; from bits.

    Same results as torch's ``.to(torch.float8_e4m3fn)``; written out for the same interpreter reason as above.
    """
    a = tl.abs(x)
    bits = a.to(tl.int32, bitcast=True)
    normal = ((bits + (0x7FFFF + ((bits >> 20) & 1))) >> 20) - (120 << 3)  # a >= 2**-6: rebias 127 -> 7
    subnormal = ((a * 512.0 + 8388608.0) - 8388608.0).to(tl.int32)  # a < 2**-6: round(a / 2**-9), 0..8
    code = tl.where(a >= 0.015625, normal, subnormal)
    code = tl.minimum(code, 0x7E)
    code = tl.where(a != a, 0x7F, code)
    sign = (x.to(tl.int32, bitcast=True) >> 24) & 0x80
    return (code | sign).to(tl.uint8).to(tl.float8e4nv, bitcast=True)


@triton.jit
def to_output(x, dtype: tl.constexpr, HW_BF16: tl.constexpr = False):
    """fp32 -> bf16 or float8_e4m3fn with round-to-nearest-even. HW_BF16 (on a GPU, never under the interpreter):
    bf16 through the hardware conversion (``cvt.rn.bf16.f32``, two values per instruction instead of ~5 integer
    instructions each): the same bits but for a NaN's payload (the canonical 0x7FFF where ``to_bf16_rne`` keeps
    0x7FC0)."""
    if dtype == tl.bfloat16:
        if HW_BF16:
            return x.to(tl.bfloat16, fp_downcast_rounding="rtne")
        else:
            return to_bf16_rne(x)
    else:
        tl.static_assert(dtype == tl.float8e4nv, "outputs are bf16 or float8_e4m3fn")
        return to_e4m3_rne(x)


@triton.jit
def mma_operand(x, MMA_BF16: tl.constexpr):
    """A tl.dot operand holding bf16 values: bf16 on the GPU (tensor cores, fp32 accumulate); under the interpreter
    the same bf16-rounded values kept in fp32, because the interpreter multiplies bf16 bit patterns as integers."""
    if MMA_BF16:
        return x.to(tl.bfloat16)
    else:
        return to_bf16_rne(x.to(tl.float32)).to(tl.float32)


def mma_bf16() -> bool:
    """True unless running under the Triton interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET") != "1"
