"""A public op called again with the same signatures, replayed: its launches, nothing left to decide (issue 39).

A single op's host path (the backend's invariants, its split policy, grids, compiled-kernel lookups, argument
packing) decides everything from the tensors' shapes, strides, dtypes, devices and 16-byte alignment and the
scalar arguments: no tensor data is read (``check=False``, and ``check=True`` once its value checks ran before the
backend, in ``atom_mxfp4.ops``). So the backend part of an op called with a key it was called with before is the
same launches with other addresses. ``run`` keeps, per key, what those launches were finally given
(``launch.tracing``) and replays them: per launch the traced values with this call's addresses put in, and the C
launch. The key: the op, the backend, every scalar argument (the plan by identity: a plan never changes, and its
workspace is its own; a trace holds it by a weak reference, so no plan is kept alive, and a trace whose plan is gone
is dropped), each tensor argument's signature (shape, strides, dtype, device, 16-byte alignment), the stream and
whether launches are only recorded (``launch.recording``: such a trace names kernels, it has none to launch). The
tensors' part is checked by torch's C++ ``TensorGuards`` (dtype, device, sizes, strides, dispatch keys: what
``torch.compile`` guards on) and their addresses' alignments compared, under a hashed head of the rest and the first
tensor's shape: about a quarter of the cost of building and hashing the signatures in Python (``_Signatures``, used
where torch lacks it).

A key seen once only leaves a mark; the second call with it is traced under a ``replay.Guard``; the third and later
replay. So calls whose shapes never repeat (a prefill's chunks) pay a mark (a guard made), not a trace. A trace is
kept only where a replay is exactly the call it stands for, else the key is marked refused (its calls take the
ordinary path):

- every launch went through a compiled kernel of ``atom_mxfp4.launch`` (the Hopper and Triton backends), and at
  least one ran;
- the call ran no torch operation beyond allocations and views (a table built by torch, a copy, a fill: not
  replayed);
- every tensor a launch was given lies inside one of the call's tensor arguments (replaced by the same offset into
  this call's), inside a tensor the call allocated (each replay allocates it anew, same size, strides and dtype:
  nothing is shared between calls, so two calls on two streams or an output the caller keeps are as safe as on the
  ordinary path) or inside the plan's workspace (the plan is part of the key). Anything else, e.g. tables cached
  from an earlier call, refuses the trace;
- what the op returns is one of its tensor arguments or a view of one of them or of an allocation (re-made as the
  same view of this call's).

Never under CUDA-graph capture (its allocations belong to the graph's pool), never while a layer step is traced
(``launch.tracing``: the layer's trace must see every launch), never while a launch hook is set (a profiler sees
ordinary launches). ``ATOM_MXFP4_OP_REPLAY=0`` turns it off (A/B runs); ``clear()`` forgets every trace (tests that
change a backend's policy between calls).
"""

from __future__ import annotations

import os
import weakref
from collections import OrderedDict

import torch

from . import launch
from .replay import REPLAYABLE_BACKENDS, Guard, Spans, _extent, capturing, current_stream, replayable

ENABLED = os.environ.get("ATOM_MXFP4_OP_REPLAY", "1") != "0"
LIMIT = 256  # heads with traces kept (the least recently used forgotten first)
PER_HEAD = 8  # traces (or marks) kept per head (the least recently used / the oldest forgotten first): at most
# LIMIT * PER_HEAD traces
MARKS = 4096  # heads with keys seen once, remembered (all forgotten at once past this)
REFUSED = "refused"
_traces: OrderedDict = OrderedDict()  # head -> [[guard, alignments, OpTrace or REFUSED], ...]
_marks: dict = {}  # head -> [[guard, alignments], ...]: keys seen once


def clear() -> None:
    _traces.clear()
    _marks.clear()


def traces() -> list:
    """(head, OpTrace or REFUSED) of every key traced (tests, reports); a head's first item is the op tuple."""
    return [(head, entry[2]) for head, entries in _traces.items() for entry in entries]


def marked() -> int:
    """How many keys are marked (seen once)."""
    return sum(len(entries) for entries in _marks.values())


class _Signatures:
    """What ``TensorGuards`` checks (each tensor's dtype, device, dispatch keys, sizes and strides), in Python: where
    torch has no ``torch._C._dynamo.guards.TensorGuards``."""

    __slots__ = ("signatures",)

    def __init__(self, *tensors):
        self.signatures = _signatures(tensors)

    def check(self, *tensors) -> bool:
        if not all(type(t) is torch.Tensor for t in tensors):
            return False  # (as TensorGuards: anything else never matches)
        return _signatures(tensors) == self.signatures


def _signatures(tensors) -> tuple:
    return tuple([(t.shape, t.stride(), t.dtype, t.device, t.requires_grad) for t in tensors])


try:  # torch's C++ check of tensors' metadata against a first call's (what torch.compile guards on): about 0.1 us
    # a tensor on the CPU, a fifth of the same check written in Python
    from torch._C._dynamo.guards import TensorGuards as _TensorGuards

    def _guard(tensors: list):
        return _TensorGuards(*tensors, dynamic_dims_sizes=None, dynamic_dims_strides=None)

    _guard([torch.empty(1)]).check(torch.empty(1))
    GUARD = "TensorGuards"
except Exception:  # noqa: BLE001 - any failure of a private API: the Python check
    def _guard(tensors: list):
        return _Signatures(*tensors)

    GUARD = "python"  # which check this process uses (benchmarks report it)


_data_ptr = torch.Tensor.data_ptr


def run(op: tuple, backend: str, tensors: tuple, call, plan=None):
    """``call()`` (the backend's part of an op) or a replay of its launches (module docstring). ``op``: the op's name
    and every scalar argument it passes on (hashable); ``tensors``: every tensor argument (None where absent), the
    first one a tensor; ``plan``: the call's plan or None."""
    first = tensors[0]
    if not ENABLED or backend not in REPLAYABLE_BACKENDS or launch._traced is not None or capturing(first):
        return call()
    present = [t for t in tensors if t is not None]
    if len(present) == len(tensors):
        absent, addresses = (), list(map(_data_ptr, tensors))
    else:
        absent = tuple([i for i, t in enumerate(tensors) if t is None])
        addresses = [0 if t is None else t.data_ptr() for t in tensors]
    # the key in two parts: a head (hashed) and, per trace under it, a guard of every tensor's metadata and the
    # addresses' alignments (compared). The first tensor's shape in the head keeps the guards per head few (a
    # prefill's chunks differ in it)
    head = (op, backend, id(plan), launch._recorded is None, current_stream(first), absent, first.shape)
    alignments = tuple([a & 15 for a in addresses])
    entries = _traces.get(head)
    if entries is not None:
        for entry in entries:
            if entry[1] == alignments and entry[0].check(*present):
                trace = entry[2]
                if trace is REFUSED:
                    return call()
                if trace.plan is not None and trace.plan() is not plan:  # its plan is gone (another has its id)
                    _forget(_traces, head, entries, entry)
                    return call()
                result = trace.replay(tensors, addresses)
                if result is _NOT_RUN:
                    return call()
                _traces.move_to_end(head)
                if entries[-1] is not entry:  # the head's most recently replayed trace last
                    try:
                        entries.remove(entry)
                        entries.append(entry)
                    except ValueError:  # another thread moved or forgot it
                        pass
                return result
    marks = _marks.get(head)
    if marks is not None:
        for mark in marks:
            if mark[1] == alignments and mark[0].check(*present):
                if not _forget(_marks, head, marks, mark):
                    return call()  # another thread took this mark between the check and here: it traces
                return _trace(head, mark, tensors, call, plan)
    if marks is None and len(_marks) >= MARKS:
        _marks.clear()
    _append(_marks, head, [_guard(present), alignments])
    return call()


def _append(table: dict, head: tuple, item: list) -> None:
    """``item`` last in ``table[head]`` (made when absent), which keeps at most PER_HEAD (the first forgotten)."""
    items = table.get(head)
    if items is None:
        items = table[head] = []
    elif len(items) >= PER_HEAD:
        del items[0]
    items.append(item)


def _forget(table: dict, head: tuple, items: list, item: list) -> bool:
    """``item`` out of ``table[head]`` (the head too once empty); False where it was gone already (another thread)."""
    try:
        items.remove(item)
    except ValueError:
        return False
    if not items:
        table.pop(head, None)
    return True


def _trace(head: tuple, mark: list, tensors: tuple, call, plan):
    """The second call of a key: ``call()`` traced; its trace (or REFUSED) kept under ``head``."""
    first = tensors[0]
    with launch.tracing() as traced, Guard(keep_allocations=True) as guard:
        result = call()
    built = None if guard.refused else OpTrace.build(traced, tensors, guard.allocations, plan, result,
                                                     current_stream(first))
    _append(_traces, head, [mark[0], mark[1], REFUSED if built is None else built])
    _traces.move_to_end(head)
    while len(_traces) > LIMIT:
        _traces.popitem(last=False)
    return result


_NOT_RUN = object()  # a replay that launched nothing (a launch hook is set): the caller takes the ordinary path


class OpTrace:
    """An op's traced launches, the allocations a replay makes anew and how to make its result."""

    __slots__ = ("launches", "allocations", "result", "stream", "plan")

    @staticmethod
    def build(traced: list, tensors: tuple, allocations: list, plan, result, stream: int) -> "OpTrace | None":
        """The trace of ``traced`` (``launch.tracing``'s list) or None where a replay would not be the same call."""
        if not traced or any(t is None for t in traced):
            return None
        bases = list(tensors) + list(allocations)  # a replay's addresses: this call's tensors, then the new ones
        spans = Spans(bases)
        if spans.overlap():
            return None  # two of them overlap: which one an argument belongs to is not known
        owned = Spans([t for t in vars(plan).values() if isinstance(t, torch.Tensor)] if plan is not None else [])
        launches = []
        for item in traced:
            launch_, others = replayable(item, spans)
            if any(owned.find(t.data_ptr()) is None for t in others):
                return None  # a tensor the call neither got nor made (e.g. tables kept from an earlier call)
            launches.append(launch_)
        allocations = list(allocations)
        results = result if isinstance(result, tuple) else (result,)
        for j, made in enumerate(allocations):  # an allocation returned whole as a view: made in that view's shape
            whole = [r for r in results if isinstance(r, torch.Tensor) and r.data_ptr() == made.data_ptr()
                     and r.dtype == made.dtype and _extent(r) == _extent(made) and r.numel()]
            if whole:
                allocations[j] = bases[len(tensors) + j] = whole[0]
        made = _result_recipe(result, bases, spans)
        if made is None:
            return None
        trace = OpTrace()
        trace.launches, trace.result, trace.stream = tuple(launches), made, stream
        trace.plan = None if plan is None else weakref.ref(plan)
        trace.allocations = tuple((tuple(t.shape), t.stride(), t.dtype, t.device) for t in allocations)
        return trace

    def replay(self, tensors: tuple, addresses: list):
        """The launches with the addresses of this call's ``tensors`` (``addresses``, 0 for None) and of new
        allocations; the op's result (``_NOT_RUN`` when nothing was launched: a launch hook is set)."""
        made = [torch.empty_strided(size, stride, dtype=dtype, device=device)
                for size, stride, dtype, device in self.allocations]
        if made:
            addresses, tensors = addresses + list(map(_data_ptr, made)), tensors + tuple(made)
        if not launch.replay(self.launches, addresses, self.stream):
            return _NOT_RUN
        return _make_result(self.result, tensors)


def _result_recipe(result, bases: list, spans: Spans):
    """How a replay makes ``result`` (None, a tensor, or a tuple of tensors and None) from its bases: per tensor
    (which base, None for the base itself, else its size, strides and offset in elements from the base's first);
    None where it cannot."""
    if isinstance(result, torch.Tensor):
        return _tensor_recipe(result, bases, spans)
    if result is None:
        return ("none",)
    if isinstance(result, tuple):
        parts = []
        for part in result:
            made = ("none",) if part is None else (
                _tensor_recipe(part, bases, spans) if isinstance(part, torch.Tensor) else None)
            if made is None:
                return None
            parts.append(made)
        return ("tuple", tuple(parts))
    return None


def _tensor_recipe(tensor: torch.Tensor, bases: list, spans: Spans):
    for which, base in enumerate(bases):
        if tensor is base:
            return ("base", which, None)
    span = spans.find(tensor.data_ptr()) if tensor.numel() else None
    if span is None:
        return None
    base = bases[span[2]]
    offset, size = tensor.data_ptr() - span[0], tensor.element_size()
    if tensor.dtype != base.dtype or offset % size:
        return None
    return ("base", span[2], (tuple(tensor.shape), tensor.stride(), offset // size))


def _make_result(recipe, bases: list):
    kind = recipe[0]
    if kind == "none":
        return None
    if kind == "tuple":
        return tuple(_make_result(part, bases) for part in recipe[1])
    base, view = bases[recipe[1]], recipe[2]
    if view is None:
        return base
    size, stride, offset = view  # elements from the base's first one
    return base.as_strided(size, stride, base.storage_offset() + offset)
