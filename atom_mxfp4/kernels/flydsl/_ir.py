"""Thin IR helpers for the FlyDSL kernels: raw pointers, typed loads/stores, the gfx950 intrinsics.

Kernels take plain int64 addresses (``tensor.data_ptr()``), never tensor descriptors, so one compiled kernel
serves every shape (no shape-valued specialization on the decode hot path) and offsets are 64-bit: a KV cache
may exceed 4 GiB, which 32-bit buffer offsets cannot address. Must be called while a kernel is traced.
"""

from __future__ import annotations

import flydsl.expr as fx
from flydsl._mlir import ir
from flydsl._mlir.dialects import llvm, vector
from flydsl.expr import rocdl

_GEP_DYNAMIC = -2147483648  # LLVM GEPOp marker: "this index is the next dynamic operand"


def val(x):
    """The ir.Value behind a DSL value (or the value itself)."""
    return x.ir_value() if hasattr(x, "ir_value") else x


def i8():
    return ir.IntegerType.get_signless(8)


def i32():
    return ir.IntegerType.get_signless(32)


def f32():
    return ir.F32Type.get()


def bf16():
    return ir.BF16Type.get()


def vec(n, elem):
    return ir.VectorType.get([n], elem)


# ---- pointers --------------------------------------------------------------------------------------------------
def global_ptr(address):
    """!llvm.ptr<1> from an int64 device address."""
    return llvm.inttoptr(ir.Type.parse("!llvm.ptr<1>"), val(fx.Int64(address)))


def _gep(ptr, byte_offset):
    return llvm.GEPOp(ptr.type, ptr, [val(byte_offset)], [_GEP_DYNAMIC], i8(), 0).result


def load(ptr, byte_offset, ty, align):
    """Load ``ty`` at ``ptr + byte_offset`` (global: int64 offset; LDS: int32 offset)."""
    return llvm.LoadOp(ty, _gep(ptr, byte_offset), alignment=align).result


def store(value, ptr, byte_offset, align):
    llvm.StoreOp(val(value), _gep(ptr, byte_offset), alignment=align)


def lds_base(num_bytes):
    """!llvm.ptr<3> to a fresh static LDS allocation of ``num_bytes``."""
    return fx.SharedAllocator().allocate(num_bytes)._ptr.llvm_ptr


def wave_fence():
    """Order this wave's LDS writes before its other lanes' reads (and reads before the next overwrite).

    A wave executes its LDS operations in order; the fence and the wave barrier (no instruction) keep the
    compiler from reordering memory operations or scheduling across this point.
    """
    fx.memory_fence(syncscope="wavefront", ordering=fx.AtomicOrdering.AcqRel)
    llvm.call_intrinsic(None, "llvm.amdgcn.wave.barrier", [], [], [])


# ---- scalars and vectors -----------------------------------------------------------------------------------------
def const_i32(x):
    return fx.Int32(x)


def const_f32(x):
    return fx.Float32(x)


def extract(v, i):
    return vector.extract(val(v), static_position=[i], dynamic_position=[])


def from_elements(ty, elems):
    return vector.from_elements(ty, [val(e) for e in elems])


def bitcast(ty, v):
    return llvm.bitcast(ty, val(v))


def select(cond, a, b):
    from flydsl._mlir.dialects import arith

    return arith.select(val(cond), val(a), val(b))


def truncf(ty, v):
    """fp32 vector -> bf16 vector, round to nearest even (v_cvt_pk_bf16_f32 on gfx950)."""
    from flydsl._mlir.dialects import arith

    return arith.truncf(ty, val(v))


def exp2(x):
    """v_exp_f32: 2**x (exp2(-inf) = 0)."""
    return fx.Float32(llvm.call_intrinsic(f32(), "llvm.amdgcn.exp2.f32", [val(x)], [], []))


def shuffle_xor(x, offset):
    from flydsl.expr import gpu

    return fx.Float32(gpu.shuffle_xor(x, offset, 64))


def perm(hi, lo, selector):
    """v_perm_b32: bytes 0-3 from ``lo``, 4-7 from ``hi``, picked by ``selector``."""
    return llvm.call_intrinsic(i32(), "llvm.amdgcn.perm", [val(hi), val(lo), val(fx.Int32(selector))], [], [])


# ---- gfx950 matrix / convert instructions ------------------------------------------------------------------------
FMT_FP8_E4M3 = 0
FMT_FP4_E2M1 = 4


def mfma_scale_fp4_fp8(a_fp4, b_fp8, acc, scale_a, scale_b):
    """v_mfma_scale_f32_16x16x128_f8f6f4, A e2m1 (4 x i32) with e8m0 ``scale_a``, B e4m3 (8 x i32)."""
    return rocdl.mfma_scale_f32_16x16x128_f8f6f4(
        vec(4, f32()),
        [val(a_fp4), val(b_fp8), val(acc), FMT_FP4_E2M1, FMT_FP8_E4M3, 0, val(scale_a), 0, val(scale_b)],
    )


def mfma_bf16(a, b, acc):
    """v_mfma_f32_16x16x32_bf16: 8 bf16 of A and B per lane."""
    return rocdl.mfma_f32_16x16x32_bf16(vec(4, f32()), [val(a), val(b), val(acc)])


def cvt_fp4_to_bf16x2(word, scale_f32, byte_select):
    """v_cvt_scalef32_pk_bf16_fp4: the two e2m1 codes of byte ``byte_select`` of ``word`` times ``scale``."""
    return rocdl.cvt_scalef32_pk_bf16_fp4(vec(2, bf16()), val(word), val(scale_f32), byte_select)


def cvt_f32_to_fp8x2(lo, hi, old, high_word):
    """v_cvt_pk_fp8_f32 (OCP e4m3 on gfx950): two floats into the low or high 16 bits of ``old``."""
    return rocdl.cvt_pk_fp8_f32(i32(), val(lo), val(hi), val(old), high_word)
