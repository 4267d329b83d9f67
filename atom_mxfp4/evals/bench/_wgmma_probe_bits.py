"""The wgmma decision probe's bit-level facts, shared by the script (wgmma_probe.py) and its kernel
(_wgmma_probe_kernels.py) without either importing the other: the e2m1 -> e4m3 placement, the operand orders, the
V half-word decode. No triton import at module level (the CPU tests read it)."""

from __future__ import annotations

SIGN_MASK = 0x80808080  # bit 7 of every byte: the sign of an e4m3 byte
MAG_MASK = 0x1C1C1C1C  # bits 2..4 of every byte: where e2m1's 3 magnitude bits land (exponent LSBs + mantissa MSB)
PLACEMENT_EXPONENT = -6  # e4m3_byte(code) holds E2M1_VALUES[code] x 2**-6 exactly; the score side multiplies 2**6 back
K_REGISTERS, K_SHARED = 0, 1  # where the decoded K goes (the kernel's K_SOURCE constexpr)


# ---- the e2m1 -> e4m3 placement (the kernel's _e4m3_words, on Python ints) ----------------------------------------
def e4m3_byte(code: int) -> int:
    """e2m1 code s.e1e0.m -> the e4m3 byte of E2M1_VALUES[code] x 2**-6: sign to bit 7, the 3 magnitude bits to bits
    2..4 (e4m3 exponent field 0..3 with the mantissa MSB: code 1 (0.5) lands on the e4m3 subnormal 2**-7 = 0.5 x
    2**-6, codes 2..7 on the normals 2**-6 .. 6 x 2**-6)."""
    return ((code & 8) << 4) | ((code & 7) << 2)


def e4m3_words(word: int) -> tuple[int, int]:
    """A 32-bit word of 8 codes (byte b: element 2b low nibble, 2b + 1 high) -> (even, odd) words of e4m3 bytes: byte
    i of even = element 2i, of odd = element 2i + 1 (what the kernel computes with shifts and masks)."""
    even = ((word << 2) & MAG_MASK) | ((word << 4) & SIGN_MASK)
    odd = ((word >> 2) & MAG_MASK) | (word & SIGN_MASK)
    return even & 0xFFFFFFFF, odd & 0xFFFFFFFF


def qk_dim(k: int) -> int:
    """Head dim (inside its 32-group) of column k of a group's K operand: k = 16 par + 4 c + i -> 8 c + 2 i + par."""
    return 8 * ((k >> 2) & 3) + 2 * (k & 3) + (k >> 4)


def pv_dim(m: int) -> int:
    """Head dim of row m of the V^T operand and of O^T: m = 64 beta + 16 w + 8 nib + g -> 4 (8 w + g) + 2 beta + nib."""
    return 32 * ((m >> 4) & 3) + 4 * (m & 7) + 2 * (m >> 6) + ((m >> 3) & 1)


def v_half_asm() -> str:
    """$0..$3 = (even, odd) bf16x2 of dims 2 beta + nib of the half-words $4 (even token) / $5 (odd token), scale pair
    $6 (window: values x 2**-63): the shipped one-multiply decode (_decode._pair) on 2 bytes."""
    from atom_mxfp4.kernels.hopper._decode import _pair, _prologue
    lines = _prologue(True)
    for beta in range(2):
        lines.append(f"prmt.b32 x, $4, $5, {beta | beta << 4 | (4 + beta) << 8 | (4 + beta) << 12:#06x};")
        lines += _pair("x", "lo", "$6", f"${2 * beta}", True) + _pair("x", "hi", "$6", f"${2 * beta + 1}", True)
    return "\n".join(lines + ["}"])
