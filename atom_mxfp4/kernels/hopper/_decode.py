"""MXFP4 words -> bf16 MMA operand registers (Gluon, sm_90), with no shared-memory round trip.

Both decodes are one ``inline_asm_elementwise`` call per 32-bit word of codes (pack=1, int32 in, int32 = bf16x2
out), built on the bit placement of the Triton backend's PTX decode (docs/triton.md): for a 16-bit lane holding a
code nibble ``n`` at bits 0..3 (or 4..7), ``n * (2**6 + 2**12)`` (``* (2**2 + 2**8)``) masked with ``0x81C0`` is the
bf16 of ``e2m1(n) * 2**-126`` (magnitude bits -> exponent LSBs + mantissa MSB, sign -> bit 15; code 1 lands on the
bf16 subnormal 2**-127), then two exact ``mul.rn.bf16x2``: by 2**126 and by the scale ``2**(e - 127)`` (the scale
byte shifted into a bf16 exponent: ``e << 7``). Exactly the dequantized values (DESIGN §3), every code and scale
byte (tests/test_hopper_layout.py runs this PTX text through the numpy PTX interpreter of tests/_helpers.py).

Why two multiplies and not one by ``2**(e - 1)``: that constant leaves the bf16 range for scale bytes e >= 129
(blocks whose amax exceeds 12), which the writers do emit; docs/hopper.md.

What differs from the Triton decode is where the pairs go. A bf16x2 register of an ``mma.m16n8k16`` B operand holds
two consecutive K indices of one N column:
- K^T (QK): K = head dims, so a register may pair any two dims of one token: the pairs are
  ``(byte 0 lo, byte 1 lo), (byte 0 hi, byte 1 hi), (byte 2 lo, byte 3 lo), (byte 2 hi, byte 3 hi)`` of the word
  (``K_PAIR_OFFSETS``), and the operand's K order is ``layout.qk_dim`` (Q is loaded in the same order);
- V (PV): K = tokens, so a register pairs one head dim of two tokens (the even and the odd token of a pair): one call
  takes the same word of both tokens (``prmt`` puts byte ``beta`` of each into one 16-bit lane) and returns the 8
  (even, odd) pairs of the word's 8 elements (``V_PAIR_OFFSETS``).
The outputs are re-labelled into the operand with joins, a permutation and a reshape (``layout.K_CHAIN_*``,
``layout.V_CHAIN_*``); ``convert_layout(..., assert_trivial=True)`` then proves at compile time that the values are
already in the registers the MMA reads (no data movement), and the unpack of a bf16x2 word is a ``mov`` ptxas removes.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from . import layout as L

BF16X2_2_126 = 0x7E807E80  # bf16x2 (2**126, 2**126)
NIBBLE = {  # nibble -> (mask of that nibble in both 16-bit lanes, multiplier placing it at bits 6..8 + sign at 15)
    "lo": (0x000F000F, 0x1040),
    "hi": (0x00F000F0, 0x104),
}
BF16_FIELDS = 0x81C081C0  # sign, exponent bits 0..1, mantissa bit 6 of both lanes

# K: output m (= m0 + 2 m1) of a word holds elements (K_PAIR_OFFSETS[m][0], K_PAIR_OFFSETS[m][1]) of the word's 8
# (element e of a word = low nibble of byte e // 2 when e is even, high nibble when odd), low lane first
K_PAIR_SELECTORS = (0x4140, 0x4342)  # prmt: bytes (0, 1) / (2, 3) of the word into the two 16-bit lanes
K_PAIR_OFFSETS = ((0, 2), (1, 3), (4, 6), (5, 7))
# V: output 2 beta + nib holds element 2 beta + nib of the even token's word (low lane) and of the odd token's
V_PAIR_OFFSETS = tuple(2 * beta + nib for beta in range(4) for nib in range(2))


def _pair(x: str, nibble: str, scale: str, out: str, fast: bool) -> list[str]:
    mask, spread = NIBBLE[nibble]
    place = [f"and.b32 t, {x}, {mask:#010x};", f"mul.lo.u32 t, t, {spread:#x};", f"and.b32 t, t, {BF16_FIELDS:#010x};"]
    if fast:  # the scale pair carries the 2**126 and the window shift: one multiply
        return place + [f"mul.rn.bf16x2 {out}, t, {scale};"]
    return place + ["mul.rn.bf16x2 t, t, c;", f"mul.rn.bf16x2 {out}, t, {scale};"]


def _prologue(fast: bool) -> list[str]:
    return ["{", ".reg .b32 x, t;"] if fast else ["{", ".reg .b32 x, t, c;", f"mov.b32 c, {BF16X2_2_126:#010x};"]


def _k_asm(fast: bool) -> str:
    """$0..$3 = the 4 bf16x2 pairs (K_PAIR_OFFSETS) of word $4; $5 = (scale, scale) bf16x2 (``fast``: the window
    scale pair, see ``window_scale_bf16x2``)."""
    lines = _prologue(fast)
    for half, selector in enumerate(K_PAIR_SELECTORS):
        lines.append(f"prmt.b32 x, $4, 0, {selector:#06x};")
        lines += _pair("x", "lo", "$5", f"${2 * half}", fast)
        lines += _pair("x", "hi", "$5", f"${2 * half + 1}", fast)
    return "\n".join(lines + ["}"])


def _v_asm(fast: bool) -> str:
    """$0..$7 = (even, odd) bf16x2 of element 2 beta + nib of words $8 (even token) / $9 (odd token); $10 = (even
    scale, odd scale) bf16x2 (``fast``: window scale pairs)."""
    lines = _prologue(fast)
    for beta in range(4):
        # byte beta of $8 into bytes 0, 1 (lane 0) and byte beta of $9 into bytes 2, 3 (lane 1)
        selector = beta | beta << 4 | (4 + beta) << 8 | (4 + beta) << 12
        lines.append(f"prmt.b32 x, $8, $9, {selector:#06x};")
        lines += _pair("x", "lo", "$10", f"${2 * beta}", fast)
        lines += _pair("x", "hi", "$10", f"${2 * beta + 1}", fast)
    return "\n".join(lines + ["}"])


P_WINDOW_ASM = gl.constexpr("\n".join(["{", ".reg .b32 c;", f"mov.b32 c, {L.BF16X2_WINDOW:#010x};",
                                        "mul.rn.bf16x2 $0, $1, c;", "}"]))
K_DECODE_ASM = gl.constexpr(_k_asm(False))
V_DECODE_ASM = gl.constexpr(_v_asm(False))
K_FAST_ASM = gl.constexpr(_k_asm(True))
V_FAST_ASM = gl.constexpr(_v_asm(True))
# the one-multiply decode (docs/hopper.md "One multiply per pair"): Q and P carry 2**WINDOW_SHIFT, the decoded K and V
# 2**-WINDOW_SHIFT, so every product of both MMAs is unchanged
WINDOW_PAIR_BIAS = gl.constexpr(L.WINDOW_PAIR_BIAS)
WINDOW_FACTOR = gl.constexpr(float(2 ** L.WINDOW_SHIFT))
BYTE_TOPS = gl.constexpr(0x80808080 - 2 ** 32)  # bit 7 of every byte, as an int32
K_CHAIN_ORDER = gl.constexpr(L.K_CHAIN_ORDER)
V_CHAIN_ORDER = gl.constexpr(L.V_CHAIN_ORDER)
HEAD_DIM = gl.constexpr(L.HEAD_DIM)


@gluon.constexpr_function
def warp_map(name, warps):
    """``layout.WARP_MAPS[warps][name]``: the map ``name`` of a program of ``warps`` warps (gl.num_warps(): 4 or 8)."""
    if warps not in L.WARP_MAPS:
        raise ValueError(f"num_warps: expected one of {list(L.WARP_MAPS)}, got {warps}")
    return L.WARP_MAPS[warps][name]


@gluon.constexpr_function
def pair_layout(layout):
    """The layout of ``join(x, x)`` for ``x`` in the linear layout ``layout``, with the new trailing dim of size 2 as
    register bit 0: the two elements an ``inline_asm_elementwise(pack=2)`` call receives are then the two copies of
    one ``x``. (``join`` alone does not promise that: for a sliced input it reuses the parent's register order.)"""
    rank = len(layout.shape)

    def grow(bases):
        return [list(basis) + [0] for basis in bases]

    return gl.DistributedLinearLayout(reg_bases=[[0] * rank + [1]] + grow(layout.reg_bases),
                                      lane_bases=grow(layout.lane_bases), warp_bases=grow(layout.warp_bases),
                                      block_bases=grow(layout.block_bases), shape=list(layout.shape) + [2])


@gluon.jit
def unpack_bf16x2(x):
    """int32 [...] holding bf16x2 -> bf16 [..., 2] (element 0 = low 16 bits); a register rename (ptxas drops the mov).

    The doubled input is put in ``pair_layout`` explicitly (a register renaming, asserted free), so each pack=2 asm
    call gets (x, x) and returns x's two halves as the elements [..., 0] and [..., 1]."""
    doubled_layout: gl.constexpr = pair_layout(gl.to_linear_layout(x.type.layout, x.shape))
    doubled = gl.convert_layout(gl.join(x, x), doubled_layout, assert_trivial=True)
    return gl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r,r", [doubled], dtype=gl.bfloat16, is_pure=True,
                                     pack=2)


@gluon.jit
def scale_bf16x2(low_byte, high_byte):
    """e8m0 bytes (int32 0..255) -> bf16x2 (2**(low - 127), 2**(high - 127)) as int32 (0 -> 0, 255 -> Inf)."""
    return (low_byte << 7) | (high_byte << 23)


@gluon.jit
def window_scale_bf16x2(low_byte, high_byte):
    """e8m0 bytes -> the scale pair of the one-multiply decode: bf16x2 (2**(low - 64), 2**(high - 64)) = 2**126 x the
    scale x 2**-WINDOW_SHIFT, exact for bytes <= layout.WINDOW_HIGH (and 0: zero-filled tokens decode to +0)."""
    return scale_bf16x2(low_byte, high_byte) + WINDOW_PAIR_BIAS


@gluon.jit
def window_misses(scale_words):
    """int32 words of 4 e8m0 bytes -> bit 7 of each byte set where the byte is outside the one-multiply decode's
    window (layout.window_miss): in [1, WINDOW_LOW - 1] or in [WINDOW_HIGH + 1, 255]; 0 is inside (zero-filled
    tokens). Callers OR the results together and test ``& 0x80808080`` once at the end."""
    high = scale_words & (scale_words << 1)  # bits 7 and 6 both set: >= 192
    borrow = (scale_words | BYTE_TOPS) - 0x01010101  # per byte b | 0x80 minus 1: no borrow crosses a byte
    low = ~scale_words & borrow & ~(borrow << 1)  # b < 128, b != 0 and bit 6 of b - 1 clear: 1 <= b <= 64
    return high | low


@gluon.jit
def window_query(q):
    """Q (bf16) x 2**WINDOW_SHIFT, exact while |q| < 2**(128 - WINDOW_SHIFT) (the caller checks WINDOW_QUERY_MAX)."""
    return (q.to(gl.float32) * WINDOW_FACTOR).to(gl.bfloat16)


@gluon.jit
def window_probabilities(p):
    """P (bf16, <= 2**layout.RESCALE_SLACK) x 2**WINDOW_SHIFT in bf16x2 (exact: a power of two, no overflow, the
    result is normal or 0)."""
    return gl.inline_asm_elementwise(P_WINDOW_ASM, "=r,r", [p],
                                     dtype=gl.bfloat16, is_pure=True, pack=2)


@gluon.jit
def decode_k_operand(words, scale_pair, operand_layout: gl.constexpr, FAST: gl.constexpr):
    """words int32 [w, 128 / w, 4, 4] (layout.k_words_bases(w), w = the program's warps), scale_pair int32 same shape
    and layout ((s, s) bf16x2 of the word's 32-block; FAST: ``window_scale_bf16x2``) -> K^T bf16 [w, 128, 128 / w] in
    ``operand_layout`` (row k = head dim layout.qk_dim(k)); FAST: the values x 2**-WINDOW_SHIFT."""
    asm: gl.constexpr = K_FAST_ASM if FAST else K_DECODE_ASM
    p0, p1, p2, p3 = gl.inline_asm_elementwise(asm, "=r,=r,=r,=r,r,r", [words, scale_pair],
                                               dtype=(gl.int32, gl.int32, gl.int32, gl.int32), is_pure=True, pack=1)
    pairs = gl.join(gl.join(unpack_bf16x2(p0), unpack_bf16x2(p1)), gl.join(unpack_bf16x2(p2), unpack_bf16x2(p3)))
    WARPS: gl.constexpr = gl.num_warps()
    kt = gl.permute(gl.reshape(pairs, warp_map("k_chain_shape", WARPS)), K_CHAIN_ORDER.value)
    kt = gl.reshape(kt, [WARPS, HEAD_DIM, warp_map("tokens_per_warp", WARPS)])
    return gl.convert_layout(kt, operand_layout, assert_trivial=True)


@gluon.jit
def decode_v_operand(even_words, odd_words, scale_pair, operand_layout: gl.constexpr, FAST: gl.constexpr):
    """even / odd words int32 [w, 64 / w, 8, 2] (token (128 / w) x warp + 2 p + {0, 1}, chunk g, word), scale_pair
    int32 same shape ((even, odd) bf16x2 of the chunk's 32-block; FAST: ``window_scale_bf16x2``) -> V bf16
    [w, 128 / w, 128] in ``operand_layout`` (column n = head dim layout.pv_dim(n)); FAST: the values x
    2**-WINDOW_SHIFT."""
    asm: gl.constexpr = V_FAST_ASM if FAST else V_DECODE_ASM
    r0, r1, r2, r3, r4, r5, r6, r7 = gl.inline_asm_elementwise(
        asm, "=r,=r,=r,=r,=r,=r,=r,=r,r,r,r", [even_words, odd_words, scale_pair],
        dtype=(gl.int32, gl.int32, gl.int32, gl.int32, gl.int32, gl.int32, gl.int32, gl.int32), is_pure=True, pack=1)
    beta0 = gl.join(unpack_bf16x2(r0), unpack_bf16x2(r1))  # [..., par, nib]
    beta1 = gl.join(unpack_bf16x2(r2), unpack_bf16x2(r3))
    beta2 = gl.join(unpack_bf16x2(r4), unpack_bf16x2(r5))
    beta3 = gl.join(unpack_bf16x2(r6), unpack_bf16x2(r7))
    pairs = gl.join(gl.join(beta0, beta1), gl.join(beta2, beta3))  # [w, p, g, word, par, nib, beta0, beta1]
    WARPS: gl.constexpr = gl.num_warps()
    v = gl.permute(gl.reshape(pairs, warp_map("v_chain_shape", WARPS)), V_CHAIN_ORDER.value)
    v = gl.reshape(v, [WARPS, warp_map("tokens_per_warp", WARPS), HEAD_DIM])
    return gl.convert_layout(v, operand_layout, assert_trivial=True)
