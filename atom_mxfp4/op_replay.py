"""A public op called again with the same signatures, replayed: its launches, nothing left to decide (issue 39).

A single op's host path (the backend's invariants, its split policy, grids, compiled-kernel lookups, argument
packing) decides everything from the tensors' shapes, strides, dtypes, devices and 16-byte alignment and the
scalar arguments: no tensor data is read (``check=False``, and ``check=True`` once its value checks ran before the
backend, in ``atom_mxfp4.ops``). So the backend part of an op called with a key it was called with before is the
same launches with other addresses. ``run`` keeps, per key, what those launches were finally given
(``launch.tracing``) and replays them: per launch the traced values with this call's addresses put in, and the C
launch. The key: the op, the backend, every scalar argument (the plan by identity: a plan never changes, and its
workspace is its own; a trace holds it by a weak reference, so no plan is kept alive, and a trace whose plan is gone
is dropped), each tensor argument's signature (``replay.signature``), the stream and whether launches are only
recorded (``launch.recording``: such a trace names kernels, it has none to launch).

A key seen once only leaves a mark; the second call with it is traced under a ``replay.Guard``; the third and later
replay. So calls whose shapes never repeat (a prefill's chunks) pay a dictionary insert, not a trace. A trace is
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
LIMIT = 256  # traces kept (the least recently used forgotten first)
MARKS = 4096  # keys seen once, remembered (all forgotten at once past this)
REFUSED = "refused"
_traces: OrderedDict = OrderedDict()  # key -> OpTrace or REFUSED
_marks: set = set()


def clear() -> None:
    _traces.clear()
    _marks.clear()


def run(op: tuple, backend: str, tensors: tuple, call, plan=None):
    """``call()`` (the backend's part of an op) or a replay of its launches (module docstring). ``op``: the op's name
    and every scalar argument it passes on (hashable); ``tensors``: every tensor argument (None where absent), the
    first one a tensor; ``plan``: the call's plan or None."""
    first = tensors[0]
    if not ENABLED or backend not in REPLAYABLE_BACKENDS or launch._traced is not None or capturing(first):
        return call()
    key = (op, backend, id(plan), launch._recorded is None, current_stream(first),  # then each tensor's
           # replay.signature, written out (per call)
           *[None if t is None else (t.shape, t.stride(), t.dtype, t.get_device(), t.data_ptr() & 15) for t in tensors])
    trace = _traces.get(key)
    if trace is not None:
        if trace is not REFUSED:
            if trace.plan is not None and trace.plan() is not plan:  # its plan is gone (another has its id)
                del _traces[key]
                return call()
            result = trace.replay(tensors)
            if result is not _NOT_RUN:
                _traces.move_to_end(key)
                return result
        return call()
    if key not in _marks:
        if len(_marks) >= MARKS:
            _marks.clear()
        _marks.add(key)
        return call()
    _marks.discard(key)
    with launch.tracing() as traced, Guard(keep_allocations=True) as guard:
        result = call()
    built = None if guard.refused else OpTrace.build(traced, tensors, guard.allocations, plan, result,
                                                     current_stream(first))
    _traces[key] = REFUSED if built is None else built
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

    def replay(self, tensors: tuple):
        """The launches with ``tensors``' addresses and new allocations; the op's result (``_NOT_RUN`` when nothing
        was launched: a launch hook is set)."""
        made = [torch.empty_strided(size, stride, dtype=dtype, device=device)
                for size, stride, dtype, device in self.allocations]
        bases = list(tensors) + made
        addresses = [0 if t is None else t.data_ptr() for t in bases]
        if not launch.replay(self.launches, addresses, self.stream):
            return _NOT_RUN
        return _make_result(self.result, bases)


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
