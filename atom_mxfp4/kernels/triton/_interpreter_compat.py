"""Make Triton's interpreter (TRITON_INTERPRET=1, used by the CPU tests) run these kernels as the GPU does.

Three fixes, all for the interpreter only (it is never used on the GPU path); 1 and 2 for 3.4-3.9, 3 for 3.9:

1. Loops with run-time bounds. The interpreter holds scalars as 1-element numpy arrays and converts a loop bound
   with ``int(array)``, which numpy >= 2.3 refuses for arrays of ndim 1 ("only 0-dimensional arrays can be converted
   to Python scalars"). This wraps that one conversion (set through ``_LangPatchScope`` since 3.6, directly by
   ``_patch_lang_tensor`` in 3.4 / 3.5: both paths are covered).
2. bf16 <-> fp32 conversions of subnormals. The interpreter's ``_convert_float`` normalizes a subnormal input's
   significand and then, because bf16 and fp32 share one exponent range, clamps the new exponent to 0 without
   shifting back: every one of the 254 non-zero bf16 subnormals (|x| < 2**-126) converts to a wrong fp32 value
   (0x0001 -> 0.0, 0x0003 -> 2**-127 instead of 3 * 2**-133), and fp32 subnormals convert to wrong bf16 bits.
   It also truncates fp32 -> bf16 where the GPU rounds to nearest even. Replaced for that one pair of types by the
   exact bit operations the hardware performs: bf16 -> fp32 is ``bits << 16``; fp32 -> bf16 rounds to nearest even
   (NaN -> 0x7FC0 with the input's sign). Every other conversion is left to the interpreter.
3. Masks held as integers. The interpreter types a comparison's result as its left operand's type (int32 for
   ``offs <= position``) over numpy booleans, so a splat of it (``visible & read`` with ``read`` a scalar) holds
   int32 data; 3.9's compiled ``load`` / ``store`` refuse a mask that is not numpy bool ("mask has unsupported
   dtype"), where 3.6's took it. The mask a masked load or store gets is cast to bool (0 / 1 either way).
"""

import numpy as np


def _bf16_fp32(convert):
    def convert_float(data, input_dtype, output_dtype, rounding_mode):
        import triton.language as tl

        if input_dtype == tl.bfloat16 and output_dtype == tl.float32:
            bits = np.frombuffer(np.ascontiguousarray(data).tobytes(), dtype=np.uint16)
            return (bits.astype(np.uint32) << 16).reshape(data.shape)
        if input_dtype == tl.float32 and output_dtype == tl.bfloat16:
            bits = np.frombuffer(np.ascontiguousarray(data).tobytes(), dtype=np.uint32).astype(np.uint64)
            rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # round to nearest even; carries into the exponent
            nan = (bits & 0x7FFFFFFF) > 0x7F800000
            rounded = np.where(nan, ((bits >> 16) & 0x8000) | 0x7FC0, rounded)
            return rounded.astype(np.uint16).reshape(data.shape)
        return convert(data, input_dtype, output_dtype, rounding_mode)

    convert_float._atom_mxfp4_patched = True
    return convert_float


def _bool_masks(builder) -> None:
    load, store = builder.create_masked_load, builder.create_masked_store

    def as_bool(mask):
        import triton.language as tl

        if mask is not None and mask.data.dtype != np.bool_:
            mask = type(mask)(mask.data.astype(np.bool_), tl.int1)
        return mask

    def create_masked_load(self, ptrs, mask, *args, **kwargs):
        return load(self, ptrs, as_bool(mask), *args, **kwargs)

    def create_masked_store(self, ptrs, value, mask, *args, **kwargs):
        return store(self, ptrs, value, as_bool(mask), *args, **kwargs)

    create_masked_load._atom_mxfp4_patched = True
    builder.create_masked_load, builder.create_masked_store = create_masked_load, create_masked_store


def patch_interpreter() -> None:
    try:
        from triton.runtime import interpreter
    except ImportError:  # pragma: no cover - triton without the interpreter
        return
    builder = getattr(interpreter, "InterpreterBuilder", None)
    if builder is not None and not getattr(builder.create_masked_load, "_atom_mxfp4_patched", False):
        _bool_masks(builder)
    convert = getattr(interpreter, "_convert_float", None)
    if convert is not None and not getattr(convert, "_atom_mxfp4_patched", False):
        interpreter._convert_float = _bf16_fp32(convert)
    scope = getattr(interpreter, "_LangPatchScope", None)
    if scope is not None and not getattr(scope.set_attr, "_atom_mxfp4_patched", False):  # 3.6+
        original = scope.set_attr

        def set_attr(self, obj, name, value):
            if name == "__index__":
                value = _index
            return original(self, obj, name, value)

        set_attr._atom_mxfp4_patched = True
        scope.set_attr = set_attr
    patch_tensor = getattr(interpreter, "_patch_lang_tensor", None)
    if scope is None and patch_tensor is not None and not getattr(patch_tensor, "_atom_mxfp4_patched", False):
        def _patch_lang_tensor(tensor):  # 3.4 / 3.5: the same conversion, set without a patch scope
            patch_tensor(tensor)
            tensor.__index__ = _index

        _patch_lang_tensor._atom_mxfp4_patched = True
        interpreter._patch_lang_tensor = _patch_lang_tensor


def _index(tensor) -> int:
    """A scalar held as a 1-element array, as a Python int (fix 1)."""
    return int(tensor.handle.data.reshape(-1)[0])
