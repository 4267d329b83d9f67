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

Attribute checks run on every call, but their outcome depends only on each tensor's dtype, device, sizes and
strides and on the scalars: ``attributes`` remembers, per op, the tensors' signatures that passed (torch's C++
``TensorGuards``, as op replay keys its traces: about a microsecond for ten tensors, against several for the checks
written in Python) and runs the checks only for signatures not seen to pass.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from typing import Callable

import torch

from .op_replay import _guard

LIMIT = 4096
_passed: OrderedDict = OrderedDict()  # key -> weak references to the key's tensors
ATTRIBUTE_GUARDS = 8  # signatures remembered per (op, scalars), the oldest forgotten first
_attributes: dict = {}  # (op, scalars, their types, absent tensors) -> [guards of signatures that passed]


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


def attributes(name: str, scalars: tuple, tensors: tuple, check: Callable[[], None]) -> None:
    """Run ``check()`` (the attribute checks of op ``name``: raises on a bad argument) unless it passed for tensors
    of the same dtypes, devices, sizes and strides (None where absent alike) and equal ``scalars`` of the same types
    (module docstring). Anything that is not a plain tensor never matches a remembered signature."""
    present = [t for t in tensors if t is not None]
    key = (name, scalars, tuple(map(type, scalars)), len(present),
           tuple([i for i, t in enumerate(tensors) if t is None]) if len(present) < len(tensors) else ())
    try:
        guards = _attributes.get(key)
    except TypeError:  # an unhashable scalar (a list for a number): the checks name it
        check()
        return
    if guards is not None:
        for guard in guards:
            if guard.check(*present):
                return
    check()
    if not all(type(t) is torch.Tensor for t in present):
        return  # (a subclass or a stand-in that passed: checked again at every call)
    if guards is None:
        if len(_attributes) >= LIMIT:
            _attributes.clear()
        guards = _attributes[key] = []
    elif len(guards) >= ATTRIBUTE_GUARDS:
        del guards[0]
    guards.append(_guard(present))


def forget(*tensors) -> None:
    """Check these tensors' values again at their next use (after a write torch does not see: module docstring)."""
    ids = {id(t) for t in tensors}
    for key in [key for key in _passed if any(state[0] in ids for state in key[2:])]:
        del _passed[key]


def clear() -> None:
    """Forget every passed check (tests)."""
    _passed.clear()
    _attributes.clear()
