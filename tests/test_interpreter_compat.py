"""bf16 subnormals through the Triton kernels (atom_mxfp4/kernels/triton/_interpreter_compat.py).

Triton 3.6's interpreter converts every non-zero bf16 subnormal to a wrong fp32 value (and fp32 subnormals to
wrong bf16 bits); the compat layer replaces that one conversion by the hardware's bit operations. These tests
pin the conversion itself over every bf16 bit pattern, then the bit-exact claims of the ops on inputs full of
subnormals (cache bytes and q of the fused write, the MXFP4 tile decode at every scale byte, top-k ids over
index-K values below 2**-126). On a GPU the same tests run the compiled kernels.
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

import pytest
import triton
import triton.language as tl

import atom_mxfp4.kernels.triton  # noqa: E402,F401  (installs the compat layer)
from atom_mxfp4 import ops
from atom_mxfp4.format import dequantize_mxfp4, quantize_mxfp4
from atom_mxfp4.kernels.triton._mxfp4 import load_tokens
from atom_mxfp4.layout import RECORD_BYTES, qkv_width

from _helpers import RECORD

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
ALL_BF16 = torch.arange(-(1 << 15), 1 << 15, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)


@triton.jit
def _convert_kernel(bf16_ptr, fp32_ptr, back_ptr, from_fp32_ptr, fp32_in_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    wide = tl.load(bf16_ptr + i).to(tl.float32)
    tl.store(fp32_ptr + i, wide)
    tl.store(back_ptr + i, wide.to(tl.bfloat16))
    tl.store(from_fp32_ptr + i, tl.load(fp32_in_ptr + i).to(tl.bfloat16))


def _same(a, b):
    return bool(((a.view(torch.int16) == b.view(torch.int16)) | (torch.isnan(a) & torch.isnan(b))).all())


def test_bf16_fp32_conversions_are_exact_for_every_bf16_and_round_to_nearest_even():
    gen = torch.Generator().manual_seed(0)
    fp32 = torch.randint(-(1 << 31), (1 << 31) - 1, (1 << 16,), generator=gen, dtype=torch.int64).to(torch.int32)
    fp32[: 1 << 12] &= 0x807FFFFF  # fp32 subnormals
    fp32[1 << 12: 1 << 13] = (fp32[1 << 12: 1 << 13] & ~0xFFFF) | 0x8000  # exact ties
    fp32 = fp32.view(torch.float32)
    n = ALL_BF16.numel()
    wide = torch.empty(n, dtype=torch.float32, device=DEVICE)
    back = torch.empty(n, dtype=torch.bfloat16, device=DEVICE)
    narrow = torch.empty(n, dtype=torch.bfloat16, device=DEVICE)
    _convert_kernel[(1,)](ALL_BF16.to(DEVICE), wide, back, narrow, fp32.to(DEVICE), N=n)
    want = ALL_BF16.float()
    assert bool(((wide.cpu() == want) | torch.isnan(want)).all()), "bf16 -> fp32 differs from torch"
    subnormal = (ALL_BF16.view(torch.int16) & 0x7F80) == 0
    assert bool((wide.cpu()[subnormal] == want[subnormal]).all())  # the 254 non-zero subnormals above all
    assert _same(back.cpu(), ALL_BF16), "bf16 -> fp32 -> bf16 is not the identity"
    assert _same(narrow.cpu(), fp32.to(torch.bfloat16)), "fp32 -> bf16 is not torch's round to nearest even"


@triton.jit
def _dequant_kernel(records, out, OUT_BF16: tl.constexpr):
    page = tl.program_id(0).to(tl.int64)
    token = tl.arange(0, 128)
    values = load_tokens(records + page * RECORD_BYTES, token, token < 128, 128, OUT_BF16, 1)
    tl.store(out + page * 128 * 128 + token[:, None] * 128 + tl.arange(0, 128)[None, :], values)


@pytest.mark.parametrize("out_bf16", [False, True], ids=["fp32", "bf16"])
def test_tile_decode_bit_exact_at_every_scale_byte_including_subnormal_values(out_bf16):
    """Scale byte 1 makes code 1 the subnormal 2**-127: the tile decode (Triton decode, as the CPU runs it) must
    give format.dequantize_mxfp4's values for every code byte and every scale byte the writers emit."""
    pages = 4
    gen = torch.Generator().manual_seed(3)
    rec = torch.empty(pages, 1, RECORD, dtype=torch.uint8)
    rec[:, 0, :8192] = torch.stack([torch.randperm(256, generator=gen) for _ in range(32 * pages)]).view(pages, 8192)
    rec[:, 0, 8192:] = (torch.arange(pages * 512) % 254 + 1).view(pages, 512).to(torch.uint8)  # bytes 1..254
    dtype = torch.bfloat16 if out_bf16 else torch.float32
    out = torch.empty(pages, 128, 128, dtype=dtype, device=DEVICE)
    _dequant_kernel[(pages,)](rec.to(DEVICE), out, OUT_BF16=out_bf16)
    ref = dequantize_mxfp4(rec[:, 0, :8192].view(pages, 128, 64), rec[:, 0, 8192:].view(pages, 128, 4), dtype)
    view = torch.int16 if out_bf16 else torch.int32
    assert torch.equal(out.cpu().view(view), ref.view(view))


def _subnormals(gen, shape):
    """bf16 subnormals (and zeros) of random sign: exponent field 0, random 7-bit mantissa."""
    bits = torch.randint(0, 128, shape, generator=gen, dtype=torch.int32) | (
        torch.randint(0, 2, shape, generator=gen, dtype=torch.int32) << 15)
    return bits.to(torch.int16).view(torch.bfloat16)


def test_fused_write_bit_exact_with_bf16_subnormals():
    """q, K, V and index-K rows made of bf16 subnormals (and mixed with normal values): the Triton cache bytes
    and q equal the torch backend's bit for bit."""
    gen = torch.Generator().manual_seed(5)
    tokens, nq, nkv, niq, pages = 6, 2, 1, 1, 2
    width = qkv_width(nq, nkv, niq)
    qkv = _subnormals(gen, (tokens, width))  # every value a subnormal (or zero)
    qkv[::2, ::3] = torch.randn(tokens // 2, (width + 2) // 3, generator=gen).bfloat16()  # mixed rows
    weights = [_subnormals(gen, (128,)) for _ in range(4)]
    angles = torch.rand(8, 32, generator=gen) * 6
    cos_sin = torch.cat([angles.cos(), angles.sin()], 1).contiguous()
    positions = torch.randint(0, 8, (tokens,), generator=gen)
    slots = torch.randperm(pages * 128, generator=gen)[:tokens]
    results = {}
    for backend in ("torch", "triton"):
        caches = [torch.zeros(pages, h, RECORD, dtype=torch.uint8, device=DEVICE) for h in (nkv, nkv, 1)]
        q, idx_q = ops.fused_qknorm_rope_write(
            qkv.to(DEVICE), positions.to(DEVICE), *(w.to(DEVICE) for w in weights), cos_sin.to(DEVICE),
            slots.to(DEVICE), *caches, num_q_heads=nq, num_kv_heads=nkv, num_index_heads=niq, backend=backend)
        results[backend] = [q.cpu(), idx_q.cpu()] + [c.cpu() for c in caches]
    for name, a, b in zip(("q", "idx_q", "k_cache", "v_cache", "index_k_cache"), results["triton"],
                          results["torch"]):
        view = torch.uint8 if a.dtype == torch.uint8 else torch.int16
        assert torch.equal(a.view(view), b.view(view)), f"{name} differs from the torch backend"


def test_index_topk_ids_with_subnormal_index_keys():
    """Index-K at scale byte 1 (values down to the subnormal 2**-127) and dyadic queries: every score is exact in
    fp32, so the Triton ids must equal the torch ids; a flushed 2**-127 changes the scores and the order."""
    gen = torch.Generator().manual_seed(9)
    pages, blocks = 6, 6
    keys = torch.randint(-2, 3, (pages * 128, 128), generator=gen).float() * 2.0 ** -127  # codes 0, +-1, +-2
    data, scale = quantize_mxfp4(keys)
    assert bool((scale == 1).all())
    records = torch.zeros(pages, 1, RECORD, dtype=torch.uint8)
    records[:, 0, :8192] = data.view(pages, 8192)
    records[:, 0, 8192:] = scale.view(pages, 512)
    block_table = torch.randperm(pages, generator=gen)[:blocks].view(1, blocks).int()
    rows = 5
    idx_q = (torch.randint(-4, 5, (rows, 1, 128), generator=gen).float() * 2.0 ** 100).bfloat16()
    row_position = torch.full((rows,), blocks * 128 - 1, dtype=torch.int32)
    args = (idx_q, records, block_table, torch.zeros(rows, dtype=torch.int32), row_position)
    ids = {b: ops.index_topk(*(a.to(DEVICE) for a in args), topk=3, local_blocks=0, backend=b).cpu()
           for b in ("torch", "triton")}
    assert torch.equal(ids["triton"], ids["torch"]), f"{ids}"


@triton.jit
def _masked_copy_kernel(src_ptr, dst_ptr, first, last, n):
    for i in tl.range(0, n):
        read = (i >= first) & (i <= last)  # a scalar comparison: typed int32 by the interpreter over numpy bools
        offset = i * 4 + tl.arange(0, 4)
        mask = (tl.arange(0, 4) <= i) & read  # its splat holds int32 data
        tl.store(dst_ptr + offset, tl.load(src_ptr + offset, mask=mask, other=-1), mask=mask)


def test_masks_from_scalar_comparisons_load_and_store_as_on_the_gpu():
    """The index scorer's mask shape (``visible & read``): 3.9's interpreter refused its int32 data ("mask has
    unsupported dtype") until the compat layer cast masks to bool; the GPU reads it as a predicate either way."""
    src = torch.arange(16, dtype=torch.int32, device=DEVICE)
    dst = torch.full((16,), -7, dtype=torch.int32, device=DEVICE)
    _masked_copy_kernel[(1,)](src, dst, 1, 2, 4)
    want = torch.full((16,), -7, dtype=torch.int32)
    for i in (1, 2):
        want[i * 4:i * 4 + i + 1] = torch.arange(i * 4, i * 4 + i + 1, dtype=torch.int32)
    assert torch.equal(dst.cpu(), want), dst


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter's builder (CPU only)")
def test_masked_load_and_store_get_bool_masks():
    import numpy as np
    from triton.runtime.interpreter import TensorHandle

    from atom_mxfp4.kernels.triton._interpreter_compat import _bool_masks

    seen = []

    class Builder:  # the two methods _bool_masks wraps, recording the mask each receives
        def create_masked_load(self, ptrs, mask, other, *rest):
            seen.append(mask)
            return mask

        def create_masked_store(self, ptrs, value, mask, *rest):
            seen.append(mask)

    _bool_masks(Builder)
    ints = TensorHandle(np.array([0, 1, 2], dtype=np.int32), tl.int32)
    Builder().create_masked_load(None, ints, None, None, False)
    Builder().create_masked_store(None, None, ints, None)
    assert [m.data.dtype for m in seen] == [np.bool_, np.bool_] and [m.dtype for m in seen] == [tl.int1, tl.int1]
    assert seen[0].data.tolist() == [False, True, True]
