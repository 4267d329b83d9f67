"""fp8 index-K device helpers (atom_mxfp4.index_k made exact): e4m3 elements, one e8m0 scale per 32.

Record of one page (one head): ``[128 tokens x 128 B e4m3][128 tokens x 4 B e8m0]`` = 16896 B; element ``d`` of a
token is byte ``d``, its scale is byte ``d // 32``. Encode and decode work on bits (no fp8 conversion instruction),
so the interpreter, NVIDIA and AMD give the same bytes as ``atom_mxfp4.index_k.quantize_fp8``.
"""

import triton
import triton.language as tl

from atom_mxfp4 import layout

from ._mxfp4 import HEAD_DIM, _pow2_f32, e8m0_value, slot_record

FP8_DATA_BYTES = tl.constexpr(layout.FP8_DATA_BYTES)  # 128 e4m3 bytes per token
FP8_SCALE_BYTES = tl.constexpr(layout.FP8_SCALE_BYTES)  # 4 e8m0 bytes per token
FP8_SCALE_OFFSET = tl.constexpr(layout.FP8_SCALE_OFFSET)  # 16384: where the scale bytes of a record start
FP8_RECORD_BYTES = tl.constexpr(layout.FP8_RECORD_BYTES)  # 16896


@triton.jit
def e4m3_code(v):
    """fp32 v with |v| <= 448 or +-Inf or NaN -> e4m3 byte int32: nearest, ties to even; Inf -> +-448; NaN and
    magnitude 0 -> 0 (never -0)."""
    a = tl.abs(v)
    bits = a.to(tl.int32, bitcast=True)
    normal = ((bits + (0x7FFFF + ((bits >> 20) & 1))) >> 20) - (120 << 3)  # a >= 2**-6: rebias 127 -> 7
    subnormal = ((a * 512.0 + 8388608.0) - 8388608.0).to(tl.int32)  # a < 2**-6: round(a / 2**-9), 0..8
    code = tl.where(a >= 0.015625, normal, subnormal)
    code = tl.minimum(code, 0x7E)  # saturate at 448 (Inf included)
    code = tl.where(a != a, 0, code)  # NaN -> 0
    sign = (v.to(tl.int32, bitcast=True) >> 24) & 0x80
    return tl.where(code == 0, 0, code | sign)


@triton.jit
def e4m3_value(byte):
    """e4m3 bytes (any int tensor, 0..255) -> fp32 values, exactly; 0x7F / 0xFF -> NaN (never written)."""
    b = byte.to(tl.int32)
    exp = (b >> 3) & 0xF
    man = b & 7
    normal = ((exp + 120) << 23 | (man << 20)).to(tl.float32, bitcast=True)
    subnormal = man.to(tl.float32) * 0.001953125  # man * 2**-9, exact
    value = tl.where(exp == 0, subnormal, normal)
    value = tl.where((b & 0x7F) == 0x7F, float("nan"), value)
    return tl.where((b & 0x80) != 0, -value, value)


@triton.jit
def store_fp8_tokens(cache_ptr, page_stride, slot, x_even, x_odd):
    """N token rows as (even, odd) fp32 [N, 4, 16] (row = 32-block, column = pair) -> 128 e4m3 bytes + 4 e8m0 bytes
    each, at token ``slot % 128`` of the record of page ``slot // 128`` (``cache_ptr + page * page_stride``); slot
    [N] int64, tokens with slot < 0 write nothing. Scale: ``e = E - 8 + (M > 0x600000)`` of amax (finite values),
    clamped to [1, 254]; elements ``x * 2**(127 - e)`` in fp32 (exact, or one rounding where it underflows, far
    below e4m3's smallest half-step: the same code as the exact product) then e4m3."""
    a_even = tl.abs(x_even)
    a_odd = tl.abs(x_odd)
    a_even = tl.where(a_even < float("inf"), a_even, 0.0)
    a_odd = tl.where(a_odd < float("inf"), a_odd, 0.0)
    amax = tl.max(tl.maximum(a_even, a_odd), axis=2)  # [N, 4]
    bits = amax.to(tl.int32, bitcast=True)
    e = ((bits >> 23) & 0xFF) - 8 + ((bits & 0x7FFFFF) > 0x600000).to(tl.int32)
    e = tl.minimum(tl.maximum(e, 1), 254)
    inv = _pow2_f32(127 - e)[:, :, None]  # e <= 247 for a finite amax: a normal fp32
    code_even = e4m3_code(x_even * inv)
    code_odd = e4m3_code(x_odd * inv)
    record, offset, write = slot_record(cache_ptr, page_stride, slot)  # [N]
    codes = tl.reshape(tl.join(code_even, code_odd), (x_even.shape[0], HEAD_DIM)).to(tl.uint8)  # element order
    base = (record + offset * FP8_DATA_BYTES)[:, None] + tl.arange(0, HEAD_DIM)[None, :]
    tl.store(base, codes, mask=write[:, None])
    scale_ptr = (record + FP8_SCALE_OFFSET + offset * FP8_SCALE_BYTES)[:, None] + tl.arange(0, 4)[None, :]
    tl.store(scale_ptr, e.to(tl.uint8), mask=write[:, None])


@triton.jit
def load_fp8_tokens(record_ptr, token, mask, BLOCK_N: tl.constexpr):
    """BLOCK_N tokens of one fp8 record -> values [BLOCK_N, 128] fp32 (exact; 0 where ~mask, bytes never read)."""
    dim = tl.arange(0, HEAD_DIM)
    data = tl.load(record_ptr + token[:, None] * FP8_DATA_BYTES + dim[None, :], mask=mask[:, None], other=0)
    scale = tl.load(record_ptr + FP8_SCALE_OFFSET + token[:, None] * FP8_SCALE_BYTES + dim[None, :] // 32,
                    mask=mask[:, None], other=0)
    return e4m3_value(data) * e8m0_value(scale)


@triton.jit
def fp8_query_blocks(q_rows_ptr, head_ok, BLOCK_H: tl.constexpr):
    """bf16 q rows (``q_rows_ptr + head * 128 + d``) -> the tuple of their four 32-channel blocks [BLOCK_H, 32] bf16:
    ``fp8_scores``'s operand, loaded once before the page loop (inside it, the pipeliner would copy it every page)."""
    ptr = q_rows_ptr + tl.arange(0, BLOCK_H)[:, None] * HEAD_DIM + tl.arange(0, 32)[None, :]
    ok = head_ok[:, None]
    return (tl.load(ptr, mask=ok, other=0.0), tl.load(ptr + 32, mask=ok, other=0.0),
            tl.load(ptr + 64, mask=ok, other=0.0), tl.load(ptr + 96, mask=ok, other=0.0))


@triton.jit
def fp8_scores(q_blocks, record_ptr, token, mask, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr):
    """GPU scorer: ``fp8_query_blocks`` . BLOCK_N tokens of one fp8 record -> [BLOCK_H, BLOCK_N] fp32. Per 32-channel
    block: the raw e4m3 bytes through the hardware conversion (exact in bf16, 0x7F / 0xFF -> NaN as ``e4m3_value``),
    one bf16 dot with fp32 accumulation, times the block's e8m0 scale in fp32. No per-element arithmetic beyond the
    conversion (the bit decode of ``load_fp8_tokens`` with a per-element scale gather was far slower on the H200:
    docs/triton.md "The fp8 index-K scorer"; ledger row "index_topk" / "triton fp8 bit-decode scorer").
    Equal to the dot of the scaled values whenever that dot is exact (the backends agree on exact scores;
    ``index_topk``'s contract). Every load is 4 B or wider per lane (a token's 4 scale bytes as one int32 word), so the
    pipeliner can make each one an async copy (cp.async needs >= 4 B)."""
    col = tl.arange(0, 32)
    words = tl.load((record_ptr + FP8_SCALE_OFFSET).to(tl.pointer_type(tl.int32)) + token, mask=mask, other=0)
    s = tl.zeros([BLOCK_H, BLOCK_N], tl.float32)
    for b in tl.static_range(HEAD_DIM // 32):
        k = tl.load(record_ptr + token[:, None] * FP8_DATA_BYTES + b * 32 + col[None, :], mask=mask[:, None], other=0)
        k = k.to(tl.float8e4nv, bitcast=True).to(tl.bfloat16)
        scale = e8m0_value((words >> (8 * b)) & 0xFF)  # byte b of the little-endian word
        s += tl.dot(q_blocks[b].to(tl.bfloat16), tl.trans(k)) * scale[None, :]
    return s
