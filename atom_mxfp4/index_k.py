"""The index-K cache dtype (``index_k_dtype``): MXFP4 (the default) or fp8, its codec and its page record.

The index-K feeds only ``index_topk`` (block selection), never the attention itself, so it may be stored finer than
K / V. Two dtypes, both one head per page (DESIGN §4: index heads share one index-K):

- ``mxfp4``: the MXFP4 record of K / V (``atom_mxfp4.cache``): ``[128 tokens x 64 B e2m1][128 tokens x 4 B e8m0]``
  = 8704 B per page, **68 B per token**.
- ``fp8``: ``[128 tokens x 128 B e4m3][128 tokens x 4 B e8m0]`` = 16896 B per page, **132 B per token**. Element d of
  a token is byte d (float8_e4m3fn: 1 sign, 4 exponent bits (bias 7), 3 mantissa bits; 0x7F / 0xFF are NaN and
  never written), scaled by the e8m0 byte ``d // 32`` of the token: ``value = e4m3(byte) * 2**(e - 127)``. Per-32
  e8m0 scales were chosen over one fp32 scale per token (same bytes: 4 per token) by the accuracy study
  (docs/accuracy.md): at least as accurate, and the decoded value ``e4m3 * 2**k`` is exact in bf16, so the scorer
  stays a plain bf16 dot as for MXFP4.

fp8 encoding (bit-exact in every backend): ``amax`` = max |x| over the finite x of the 32-block, ``E`` / ``M`` its
fp32 exponent / mantissa fields; ``e = E - 8 + (M > 0x600000)``, clamped to [1, 254]: the smallest power-of-two
scale with ``448 * 2**(e - 127) >= amax`` (never clips; 448 = 1.75 * 2**8 is the largest e4m3). Elements:
``v = x * 2**(127 - e)`` (exact), rounded to the nearest e4m3, ties to even (``torch``'s ``.to(float8_e4m3fn)``);
+-Inf saturates to +-448, NaN and magnitude 0 encode as byte 0 (never -0).
"""

from __future__ import annotations

import enum

import torch

from .errors import expect, expect_dtype, fail
from .format import BLOCK, E8M0_MAX, E8M0_MIN, _e8m0_to_float
from .layout import FP8_DATA_BYTES, FP8_RECORD_BYTES, FP8_SCALE_BYTES, HEAD_DIM, PAGE_SIZE, RECORD_BYTES  # noqa: F401

FP8_MAX = 448.0  # largest finite float8_e4m3fn


class IndexKDtype(str, enum.Enum):
    """How the index-K cache stores a token (see the module docstring for the records)."""

    MXFP4 = "mxfp4"
    FP8 = "fp8"

    @classmethod
    def parse(cls, value: "IndexKDtype | str", name: str = "index_k_dtype") -> "IndexKDtype":
        if isinstance(value, cls):
            return value
        found = cls._value2member_map_.get(value.lower()) if isinstance(value, str) else None
        if found is None:  # the message made only on a refusal (every op parses its mode)
            names = [m.value for m in cls]
            fail(name, f"one of {names}", repr(value))
        return found

    @property
    def record_bytes(self) -> int:
        """Bytes of one page record (128 tokens, one head)."""
        return RECORD_BYTES if self is IndexKDtype.MXFP4 else FP8_RECORD_BYTES

    @property
    def bytes_per_token(self) -> int:
        """Bytes per token of the index-K cache (one head): mxfp4 68, fp8 132."""
        return self.record_bytes // PAGE_SIZE


DEFAULT_INDEX_K_DTYPE = "fp8"
"""The index-K dtype of the layer and the SGLang plugin by default (docs/accuracy.md, "Index-K dtype")."""


# ---- codec ------------------------------------------------------------------------------------------------------
def fp8_scale_exponent(xb: torch.Tensor) -> torch.Tensor:
    """xb [..., nb, 32] fp32 -> e8m0 bytes [..., nb] int32 in [1, 254]: ``E - 8 + (M > 0x600000)`` of amax."""
    amax = torch.where(torch.isfinite(xb), xb.abs(), torch.zeros_like(xb)).amax(dim=-1)
    bits = amax.contiguous().view(torch.int32)
    exp_field, mantissa = (bits >> 23) & 0xFF, bits & 0x7FFFFF
    return (exp_field - 8 + (mantissa > 0x600000).to(torch.int32)).clamp(E8M0_MIN, E8M0_MAX)


def quantize_fp8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [..., D] float (D % 32 == 0) -> (data uint8 e4m3 [..., D], scale uint8 e8m0 [..., D // 32])."""
    expect(x.is_floating_point(), "x", "a floating-point tensor", x.dtype, TypeError)
    expect(x.dim() >= 1 and x.shape[-1] % BLOCK == 0, "x.shape[-1]", f"a multiple of {BLOCK}", list(x.shape))
    lead, d = x.shape[:-1], x.shape[-1]
    xb = x.float().reshape(*lead, d // BLOCK, BLOCK)
    e = fp8_scale_exponent(xb)
    inv_scale = _e8m0_to_float(254 - e).double()  # 2**(127 - e), exact in fp64
    v = (xb.double() * inv_scale.unsqueeze(-1)).float()  # exact except below 2**-126 (byte 0 either way)
    v = torch.nan_to_num(v, nan=0.0).clamp(-FP8_MAX, FP8_MAX)  # NaN -> 0, +-Inf -> +-448
    codes = v.to(torch.float8_e4m3fn).view(torch.uint8)
    codes = torch.where(codes == 0x80, torch.zeros_like(codes), codes)  # -0 -> 0
    return codes.reshape(*lead, d).contiguous(), e.to(torch.uint8).contiguous()


def dequantize_fp8(data: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """(data uint8 e4m3 [..., D], scale uint8 e8m0 [..., D // 32]) -> values [..., D] in ``dtype``."""
    expect_dtype(data, "data", (torch.uint8,))
    expect_dtype(scale, "scale", (torch.uint8,))
    expect(data.shape[:-1] == scale.shape[:-1] and data.shape[-1] == scale.shape[-1] * BLOCK, "scale.shape",
           f"{list(data.shape[:-1]) + [data.shape[-1] // BLOCK]} to match data", list(scale.shape))
    d = data.shape[-1]
    values = data.contiguous().view(torch.float8_e4m3fn).float().reshape(*data.shape[:-1], d // BLOCK, BLOCK)
    return (values * _e8m0_to_float(scale).unsqueeze(-1)).reshape(data.shape).to(dtype)


def fp8_data_view(records: torch.Tensor) -> torch.Tensor:
    """records [pages, heads, 16896] -> data [pages, heads, 128, 128] uint8 e4m3 (a view)."""
    pages, heads, _ = records.shape
    return records.as_strided((pages, heads, PAGE_SIZE, FP8_DATA_BYTES),
                              (heads * FP8_RECORD_BYTES, FP8_RECORD_BYTES, FP8_DATA_BYTES, 1), records.storage_offset())


def fp8_scale_view(records: torch.Tensor) -> torch.Tensor:
    """records [pages, heads, 16896] -> scale [pages, heads, 128, 4] uint8 e8m0 (a view)."""
    pages, heads, _ = records.shape
    return records.as_strided((pages, heads, PAGE_SIZE, FP8_SCALE_BYTES),
                              (heads * FP8_RECORD_BYTES, FP8_RECORD_BYTES, FP8_SCALE_BYTES, 1),
                              records.storage_offset() + PAGE_SIZE * FP8_DATA_BYTES)
