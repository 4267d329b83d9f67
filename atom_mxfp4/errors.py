"""The one place error messages for bad user input are built.

Messages read ``"<argument> must be <expected>, got <actual>"`` so a person can act on them.
``assert`` is for kernel invariants only, never for user input.
"""

from __future__ import annotations

import math
from typing import NoReturn


class InvalidArgument(Exception):
    """What ``fail`` / ``expect`` raise, as a ``ValueError`` or ``TypeError`` subclass: input a person can fix.

    The ``atom-mxfp4`` command prints these as one line (exit 1); any other exception is a bug and keeps its traceback.
    """


class InvalidValue(InvalidArgument, ValueError):
    pass


class InvalidType(InvalidArgument, TypeError):
    pass


_TAGGED = {ValueError: InvalidValue, TypeError: InvalidType}


def must_be(expected: str, actual: object) -> str:
    """``must be <expected>, got <actual>``: the tail of every message (argparse puts the flag in front of it)."""
    return f"must be {expected}, got {actual}"


def fail(name: str, expected: str, actual: object, exc: type[Exception] = ValueError) -> NoReturn:
    raise _TAGGED.get(exc, exc)(f"{name} {must_be(expected, actual)}")


def expect(cond: bool, name: str, expected: str, actual: object, exc: type[Exception] = ValueError) -> None:
    """Raise ``exc`` naming the argument, the expected and the actual value unless ``cond`` holds."""
    if not cond:
        fail(name, expected, actual, exc)


# The helpers below build their message only when the check fails: they run on every call of every op, where an
# f-string formatted for nothing costs as much as the check (issue 39).
def expect_dtype(tensor, name: str, allowed) -> None:
    if tensor.dtype not in allowed:
        fail(name, f"of dtype {' or '.join(str(d) for d in allowed)}", tensor.dtype, TypeError)


def expect_shape(tensor, name: str, shape: tuple) -> None:
    """``shape`` entries may be ``None`` (any size)."""
    actual = tensor.shape
    if len(actual) == len(shape) and all(s is None or s == a for s, a in zip(shape, actual)):
        return
    want = "[" + ", ".join("*" if s is None else str(s) for s in shape) + "]"
    fail(name, f"of shape {want}", list(actual))


def expect_device(tensor, name: str, device) -> None:
    if tensor.device != device:
        fail(name, f"on device {device}", tensor.device)


def expect_contiguous(tensor, name: str) -> None:
    if not tensor.is_contiguous():
        fail(name, "contiguous", f"strides {tuple(tensor.stride())}")


def expect_aligned(tensor, name: str, alignment: int, why: str) -> None:
    """The tensor's first element at an address that is a multiple of ``alignment`` bytes (a kernel reading it in
    ``alignment``-byte vectors or copies; ``why`` says which)."""
    address = tensor.data_ptr()
    if address % alignment:
        fail(f"{name} address", f"{alignment}-byte aligned ({why})",
             f"{address:#x} (storage offset {tensor.storage_offset()})")


def is_number(value) -> bool:
    """A real Python number (int or float), not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def expect_int(value, name: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """An int (not a bool) in [minimum, maximum] (either bound optional); returns it."""
    ok = isinstance(value, int) and not isinstance(value, bool)
    ok = ok and (minimum is None or value >= minimum) and (maximum is None or value <= maximum)
    if ok:
        return value
    if minimum is not None and maximum is not None:
        want = f"an int in [{minimum}, {maximum}]"
    else:
        want = "an int" + (f" >= {minimum}" if minimum is not None else f" <= {maximum}" if maximum is not None else "")
    fail(name, want, repr(value))


def expect_positive(value, name: str) -> float:
    """A finite number > 0 (an int is accepted); returns it as a float."""
    if not (is_number(value) and math.isfinite(value) and value > 0):
        fail(name, "a finite number > 0", repr(value))
    return float(value)
