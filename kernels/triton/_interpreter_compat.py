"""Make Triton 3.6's interpreter (TRITON_INTERPRET=1, used by the CPU tests) run loops with run-time bounds.

The interpreter holds scalars as 1-element numpy arrays and converts a loop bound with ``int(array)``, which
numpy >= 2.3 refuses for arrays of ndim 1 ("only 0-dimensional arrays can be converted to Python scalars").
This wraps that one conversion; it changes nothing on the GPU path (the interpreter is not used there).
"""


def patch_interpreter_index() -> None:
    try:
        from triton.runtime import interpreter
    except ImportError:  # pragma: no cover - triton without the interpreter
        return
    scope = getattr(interpreter, "_LangPatchScope", None)
    if scope is None or getattr(scope.set_attr, "_atom_mxfp4_patched", False):
        return
    original = scope.set_attr

    def set_attr(self, obj, name, value):
        if name == "__index__":
            value = lambda tensor: int(tensor.handle.data.reshape(-1)[0])  # noqa: E731
        return original(self, obj, name, value)

    set_attr._atom_mxfp4_patched = True
    scope.set_attr = set_attr
