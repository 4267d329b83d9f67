"""The MXFP4 codec (OCP MX, block 32): the bit-exact reference every kernel is tested against.

Element: e2m1 code, magnitudes ``{0, 0.5, 1, 1.5, 2, 3, 4, 6}`` for codes 0-7, bit 3 is the sign; two codes per
byte, **low nibble = even element**; zero magnitude is always code 0 (never -0).
Scale: one e8m0 byte ``e`` per 32 consecutive elements, value ``2**(e - 127)``; writers emit ``e`` in [1, 254].
Dequantize: ``value = e2m1(code) * 2**(e - 127)`` (``e == 255`` is NaN, ``e == 0`` is ``2**-127``).

Scale selection (``ScaleMode``), with ``amax`` = max |x| over the finite x of the block, ``E``/``M`` the biased
exponent / mantissa fields of ``amax`` as fp32 (``E = 0`` for 0 and subnormals):

- ``FLOOR``: ``e = E - 2`` (the OCP rule: the exponent of amax minus 2; may clip to +-6);
- ``CEIL``:  ``e = E - 2 + (M > 0x400000)``, the smallest ``s`` with ``6 * 2**s >= amax`` (never clips);
- ``MSE``:   the one of FLOOR/CEIL with the smaller fp64 squared error over the finite inputs, ties to CEIL;

then ``e`` is clamped to [1, 254]. Elements round to the nearest code, ties to the even code, saturating at 6;
+-Inf encodes as +-6 * scale, NaN as code 0.
"""

from __future__ import annotations

import enum
import functools

import torch

from .errors import expect, expect_dtype, fail
from .layout import BLOCK, E8M0_MAX, E8M0_MIN  # noqa: F401  (elements per e8m0 scale; scale bytes writers emit)

E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
"""Value of each 4-bit code (index = code)."""


class ScaleMode(str, enum.Enum):
    """How the e8m0 scale of a 32-block is chosen (see the module docstring for the exact rules)."""

    CEIL = "ceil"
    FLOOR = "floor"
    MSE = "mse"

    @classmethod
    def parse(cls, value: "ScaleMode | str") -> "ScaleMode":
        if isinstance(value, cls):
            return value
        found = cls._value2member_map_.get(value.lower()) if isinstance(value, str) else None
        if found is None:  # the message made only on a refusal (every op parses its mode)
            names = [m.value for m in cls]
            fail("scale_mode", f"one of {names}", value)
        return found


DEFAULT_CACHE_SCALE_MODE = "mse"
"""The ScaleMode the cache writers (``fused_qknorm_rope_write``, the layer, the SGLang plugin) use by default:
chosen by the accuracy study in docs/accuracy.md (lower output error than CEIL in most cases, same decode cost).
``quantize_mxfp4`` keeps CEIL, the aiter / SGLang rule, as its default."""

DEQUANTIZE_DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64)
"""The output dtypes of ``dequantize_mxfp4``: its fp32 values cast to the dtype (bf16 and fp64 hold every one exactly;
fp16 only within its range, +-Inf past 65504). Not the fp8 dtypes (torch's casts give NaN past their range instead
of saturating), nor integers or bool (0.5 would truncate to 0)."""

# code thresholds on v = |x| / scale: code = sum of these comparisons (ties go to the even code)
_STRICT = (0.25, 1.25, 2.5, 5.0)  # v > t   (the tie stays on the lower, even code)
_INCLUSIVE = (0.75, 1.75, 3.5)  # v >= t  (the tie moves up to the even code)


def _expect_tensor(value, name: str) -> None:
    if not isinstance(value, torch.Tensor):
        fail(name, "a tensor", type(value).__name__, TypeError)


def _e8m0_to_float(e: torch.Tensor) -> torch.Tensor:
    """Exact ``2**(e - 127)`` as fp32 for e8m0 bytes (255 -> NaN), built from bits."""
    e = e.to(torch.int32)
    bits = torch.where(e == 0, torch.full_like(e, 0x00400000), e << 23)
    bits = torch.where(e == 255, torch.full_like(e, 0x7FC00000), bits)
    return bits.view(torch.float32)


def _encode(xb: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    """xb [..., nb, 32] fp32, e [..., nb] int32 in [1, 254] -> codes [..., nb, 32] uint8 (sign in bit 3)."""
    inv_scale = _e8m0_to_float(254 - e).double()  # 2**(127 - e), exact in fp64
    v = xb.abs().double() * inv_scale.unsqueeze(-1)  # exact: a power-of-two multiply
    v = torch.nan_to_num(v, nan=0.0)  # NaN -> code 0; +Inf stays and saturates
    mag = torch.zeros_like(v, dtype=torch.uint8)
    for t in _STRICT:
        mag += (v > t).to(torch.uint8)
    for t in _INCLUSIVE:
        mag += (v >= t).to(torch.uint8)
    negative = (xb < 0) & (mag != 0)
    return mag | (negative.to(torch.uint8) << 3)


def _squared_error(xb: torch.Tensor, codes: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    """fp64 sum over the finite elements of (x - deq(code))**2 per block: [..., nb]."""
    table = torch.tensor(E2M1_VALUES, dtype=torch.float64, device=xb.device)
    deq = table[codes.long()] * _e8m0_to_float(e).double().unsqueeze(-1)
    err = (xb.double() - deq) ** 2
    return torch.where(torch.isfinite(xb), err, torch.zeros_like(err)).sum(-1)


def scale_exponent(xb: torch.Tensor, mode: ScaleMode = ScaleMode.CEIL) -> torch.Tensor:
    """The e8m0 byte of each block. xb [..., nb, 32] fp32 -> e [..., nb] int32 in [1, 254]."""
    _expect_tensor(xb, "xb")
    expect_dtype(xb, "xb", (torch.float32,))  # read through an int32 view: another width would mis-slice its bits
    mode = ScaleMode.parse(mode)
    finite = torch.isfinite(xb)
    amax = torch.where(finite, xb.abs(), torch.zeros_like(xb)).amax(dim=-1)
    bits = amax.contiguous().view(torch.int32)
    exp_field = (bits >> 23) & 0xFF
    mantissa = bits & 0x7FFFFF
    e_floor = (exp_field - 2).clamp(E8M0_MIN, E8M0_MAX)
    e_ceil = (exp_field - 2 + (mantissa > 0x400000).to(torch.int32)).clamp(E8M0_MIN, E8M0_MAX)
    if mode is ScaleMode.FLOOR:
        return e_floor
    if mode is ScaleMode.CEIL:
        return e_ceil
    err_floor = _squared_error(xb, _encode(xb, e_floor), e_floor)
    err_ceil = _squared_error(xb, _encode(xb, e_ceil), e_ceil)
    return torch.where(err_floor < err_ceil, e_floor, e_ceil)


def quantize_mxfp4(x: torch.Tensor, mode: ScaleMode = ScaleMode.CEIL) -> tuple[torch.Tensor, torch.Tensor]:
    """x [..., D] (float, D % 32 == 0) -> (data uint8 [..., D // 2], scale uint8 e8m0 [..., D // 32])."""
    _expect_tensor(x, "x")
    expect(x.is_floating_point(), "x", "a floating-point tensor", x.dtype, TypeError)
    expect(x.dim() >= 1 and x.shape[-1] % BLOCK == 0, "x.shape[-1]", f"a multiple of {BLOCK}", list(x.shape))
    lead, d = x.shape[:-1], x.shape[-1]
    xb = x.float().reshape(*lead, d // BLOCK, BLOCK)
    e = scale_exponent(xb, mode)
    codes = _encode(xb, e).reshape(*lead, d)
    data = codes[..., 0::2] | (codes[..., 1::2] << 4)
    return data.contiguous(), e.to(torch.uint8).contiguous()


@functools.cache
def _pair_table(device: torch.device) -> torch.Tensor:
    """byte -> (low, high) e2m1 values, [256, 2] fp32 on ``device``: made once per device (a host-to-device copy
    synchronises the GPU's stream, which a table made per call would do on every call)."""
    table = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=device)
    return torch.stack((table.repeat(16), table.repeat_interleave(16)), dim=-1)


def dequantize_mxfp4(data: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """(data uint8 [..., D // 2], scale uint8 [..., D // 32]) -> values [..., D] in ``dtype``, one of
    ``DEQUANTIZE_DTYPES``."""
    _expect_tensor(data, "data")
    _expect_tensor(scale, "scale")
    if dtype not in DEQUANTIZE_DTYPES:
        names = [str(d) for d in DEQUANTIZE_DTYPES]
        fail("dtype", f"{', '.join(names[:-1])} or {names[-1]}", repr(dtype), TypeError)
    expect_dtype(data, "data", (torch.uint8,))
    expect_dtype(scale, "scale", (torch.uint8,))
    expect(data.shape[:-1] == scale.shape[:-1] and data.shape[-1] == scale.shape[-1] * BLOCK // 2,
           "scale.shape", f"{list(data.shape[:-1]) + [data.shape[-1] * 2 // BLOCK]} to match data",
           list(scale.shape))
    values = _pair_table(data.device)[data.long()].flatten(-2)
    d = values.shape[-1]
    values = values.reshape(*values.shape[:-1], d // BLOCK, BLOCK) * _e8m0_to_float(scale).unsqueeze(-1)
    return values.reshape(*data.shape[:-1], d).to(dtype)
