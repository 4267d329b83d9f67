"""Value checks once per batch: a check that reads tensor data (a device -> host sync) runs once for the same tensors.

``check=True`` on the public ops and the layer validates two kinds of things. Attributes (dtype, shape, device,
strides, sizes) cost a few host microseconds and run on every call. Values (slots and page ids in range, distinct
slots, positions inside the RoPE table, lengths inside the tables, top-k ids canonical) need the data on the host:
a sync per check. Those run through ``once``: a value check that passed for these very tensor objects, unchanged
since, is not run again. A batch's metadata (positions, slot_mapping, block_table, tables, context_lens, ...) is
then checked by the first op or layer that reads it, and every later layer of the step, sharing the same tensors,
pays only the attribute checks: no sync.

"Unchanged" is what torch can see: the same object (held by a weak reference, so a new tensor at a recycled address
is a new tensor), the same version counter (every in-place torch op on the tensor or a view of it bumps it: ``copy_``,
``fill_``, indexing assignment, an ``out=`` op), the same address and shape. What torch cannot see is a write through
the tensor's pointer outside torch: a custom kernel, or a CUDA graph replay refilling a captured buffer. A caller
whose metadata is refilled that way and who wants it checked again calls ``forget(tensor)`` (or passes a new tensor).
At most ``LIMIT`` passed checks are remembered (the oldest forgotten first).
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from typing import Callable

LIMIT = 4096
_passed: OrderedDict = OrderedDict()  # key -> weak references to the key's tensors


def _state(tensor) -> tuple:
    return id(tensor), tensor._version, tensor.data_ptr(), tensor.shape


def once(name: str, tensors: tuple, bounds: tuple, check: Callable[[], None]) -> None:
    """Run ``check()`` (raises on bad values) unless the check ``name`` passed for the same ``tensors``, unchanged
    since (module docstring), and the same ``bounds`` (the scalars it compares against: sizes, pages)."""
    key = (name, bounds, *[_state(t) for t in tensors])
    refs = _passed.get(key)
    if refs is not None and all(ref() is t for ref, t in zip(refs, tensors)):
        return
    check()
    _passed[key] = [weakref.ref(t) for t in tensors]
    if len(_passed) > LIMIT:
        _passed.popitem(last=False)


def forget(*tensors) -> None:
    """Check these tensors' values again at their next use (after a write torch does not see: module docstring)."""
    ids = {id(t) for t in tensors}
    for key in [key for key in _passed if any(state[0] in ids for state in key[2:])]:
        del _passed[key]


def clear() -> None:
    """Forget every passed check (tests)."""
    _passed.clear()
