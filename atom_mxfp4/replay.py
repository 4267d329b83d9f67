"""A layer's step replayed for the next layers of the batch (issue 39): the launches, nothing left to decide.

Every layer of one kind in a forward batch runs the same step on the same metadata: the same checks, split policy,
plan, grids, compiled kernels and scalar arguments; only the layer's own tensors differ (``qkv``, ``out``, the
caches, the norm weights, the RoPE table). ``SparseMXFP4Attention.forward`` therefore runs the first layer of a batch
as it always does, traces the second (``launch.tracing``: what each launch was finally given) and replays that trace
for every later layer: per launch, the traced values with the layer's addresses put in, and the C launch.

A trace is made only where a replay is exactly the call it stands for (``Trace.build`` refuses otherwise):

- every launch went through a compiled kernel of ``atom_mxfp4.launch`` (no Triton-own launch, no FlyDSL launch, at
  least one launch: the Hopper and Triton backends);
- the step ran no torch operation beyond allocations and views (``Guard``): a computation on the host path (a table
  built by torch, a copy) would not be replayed;
- every tensor argument is either inside one of the layer's tensors (replaced by the same offset into the next
  layer's) or inside none of them: the batch's metadata, the plan's workspace and the step's intermediate buffers,
  which later layers then share. They run on the same stream one after the other (a replay happens only on the
  trace's stream), so each layer's kernels read what its own earlier kernels wrote.

A replay happens only while nothing a traced decision rests on has changed: the metadata tensors (the same objects,
addresses, shapes, strides and dtypes, and ``segments``), the stream and device, and each of the layer's tensors'
shape, strides, dtype and address modulo 16 (what the compiled kernels were specialised on). Under CUDA-graph capture
no trace is made or replayed (buffers made outside a capture would outlive its pool), nor while a launch hook is set.

The metadata refilled in place for the next batch (new values in the same tensors, as a runner's per-batch-size
buffers are: torch's version counters move) keeps a batch's trace for ``check=False`` steps: with check=False the host
path reads no tensor data (atom_mxfp4.op_replay), so the same shapes give the same launches, which read the new values
at the same addresses. What the launches read that was made from the old values on the host path is remade first,
into the same buffers: the int32 positions (``AttentionMetadata.row_position``) and a composing backend's dense tables
(``AttentionMetadata.dense_tables``). A trace that reads any other buffer made by torch from the metadata
(``derived``: ``ops.dense_tables``' kept tables) is not replayed after a refill. ``check=True`` after a refill takes
the ordinary path (the new values are validated) and traces anew.
"""

from __future__ import annotations

import bisect
import collections
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import launch

REPLAYABLE_BACKENDS = ("hopper", "triton")  # every launch through atom_mxfp4.launch


def signature(tensor: torch.Tensor | None) -> tuple | None:
    """What a replay of a traced step needs unchanged in one of the layer's tensors."""
    if tensor is None:
        return None
    return tensor.shape, tensor.stride(), tensor.dtype, tensor.get_device(), tensor.data_ptr() & 15


def _extent(tensor: torch.Tensor) -> int:
    """Bytes from the tensor's first element past its last (0 when empty)."""
    if tensor.numel() == 0:
        return 0
    return (sum((n - 1) * s for n, s in zip(tensor.shape, tensor.stride())) + 1) * tensor.element_size()


class Spans:
    """The address ranges of ``tensors`` (None and empty ones left out), sorted: which one holds an address."""

    __slots__ = ("spans", "starts")

    def __init__(self, tensors):
        self.spans = sorted((t.data_ptr(), t.data_ptr() + _extent(t), i) for i, t in enumerate(tensors)
                            if t is not None and t.numel())
        self.starts = [span[0] for span in self.spans]

    def overlap(self) -> bool:
        return any(self.spans[j][1] > self.spans[j + 1][0] for j in range(len(self.spans) - 1))

    def find(self, address: int) -> tuple | None:
        """(start, end, index in ``tensors``) of the tensor whose bytes hold ``address``; None if none does."""
        j = bisect.bisect_right(self.starts, address) - 1
        return self.spans[j] if j >= 0 and address < self.spans[j][1] else None


def replayable(item, spans: Spans) -> tuple[tuple, list]:
    """(the launch as ``launch.replay`` takes it, the tensor arguments inside none of ``spans``) of one traced launch:
    each tensor argument inside tensor ``i`` of ``spans`` becomes the substitution ``(position, i, offset)``."""
    substitutions, others = [], []
    for position, arg in enumerate(item.args):
        if isinstance(arg, torch.Tensor):
            span = spans.find(arg.data_ptr())
            if span is None:
                others.append(arg)
            else:
                substitutions.append((position, span[2], arg.data_ptr() - span[0]))
    return (item.target, item.grid, tuple(item.values), tuple(substitutions), item.metadata, item.cluster), others


class Guard(TorchDispatchMode):
    """Watches the torch operations of a step being traced (at the dispatcher: attribute reads such as ``stride()``
    or ``data_ptr()`` never reach it): allocations and views only. Anything else is work a replay would not repeat
    (a copy, a table built by torch, a fill): the trace is then refused, naming the first such operation.
    ``keep_allocations``: ``allocations`` lists the tensors the allocations made (atom_mxfp4.op_replay makes them
    anew on each replay)."""

    ALLOCATIONS = {"aten::empty", "aten::empty_like", "aten::empty_strided", "aten::new_empty"}

    def __init__(self, keep_allocations: bool = False):
        super().__init__()
        self.refused: str | None = None
        self.allocations: list | None = [] if keep_allocations else None  # the tensors allocated, in order

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if func.is_view:
            return result
        if func._schema.name not in self.ALLOCATIONS:
            self.refused = self.refused or str(func)
        elif self.allocations is not None:
            self.allocations.append(result)
        return result


_derived: list = []  # weak references to buffers torch made from a batch's metadata values (``derived``)


def derived(*tensors: torch.Tensor) -> None:
    """Declare ``tensors`` made by torch ops from a batch's metadata values on a step's host path (a replay does not
    remake them): a trace whose launches read one is not replayed once the metadata is refilled in place."""
    _derived[:] = [ref for ref in _derived if ref() is not None]
    _derived.extend(weakref.ref(t) for t in tensors)


def reads_derived(tensors) -> bool:
    """Whether any of ``tensors`` lies inside a live ``derived`` buffer."""
    if not _derived:
        return False
    spans = Spans([ref() for ref in _derived])
    return any(spans.find(t.data_ptr()) is not None for t in tensors if t.numel())


class Trace:
    """A traced step (module docstring): what it was traced with, and its launches ready for ``launch.replay``."""

    __slots__ = ("meta_state", "refs", "stream", "qkv", "out", "static", "launches", "validated", "keep", "where",
                 "segments", "refillable")

    def __init__(self, meta, stream: int = 0, qkv=None, out=None, static=None, launches: tuple | None = None,
                 validated: bool = False, keep: tuple = (), meta_layout: tuple | None = None):
        """``launches`` None: the first step of its kind seen on this metadata (the next one is traced); () a step
        that cannot replay (not traced again for this metadata). ``keep``: the tensors the launches read that are
        none of the layer's own (intermediate buffers, workspace), held while the trace lives. ``meta_layout``: the
        metadata's ``layout`` where the caller has it."""
        self.meta_state = meta_state(meta)
        self.refs = (meta.positions, meta.slot_mapping, meta.token_request, meta.block_table)
        self.stream, self.qkv, self.out, self.static = stream, qkv, out, static
        self.launches, self.validated, self.keep = launches, validated, keep
        # what a replay after an in-place refill needs unchanged (module docstring); asked only of traces that launch
        self.refillable = bool(launches) and not reads_derived(keep)
        self.where = where(meta, meta_layout) if self.refillable else None
        self.segments = meta.segments if self.refillable else None

    def refilled(self, meta, state: tuple) -> bool:
        """Whether ``meta`` (``meta_state`` ``state``) is this trace's metadata refilled in place (the same tensors,
        addresses and layout, other versions) and the trace may replay on it; then takes the new versions as its own
        and is no longer validated (a check=True step validates the new values on its ordinary path)."""
        if (not self.refillable or state[:4] != self.meta_state[:4] or meta.segments is not self.segments
                or where(meta) != self.where):
            return False
        self.meta_state, self.validated = state, False
        return True

    @staticmethod
    def build(traced: list, inputs: tuple) -> tuple[tuple, tuple] | None:
        """(the replayable launches, the tensors to keep) of ``traced`` (``launch.tracing``'s list), with the tensors
        of ``inputs`` (the layer's own, in a fixed order; None where the layer has none) as the replaced addresses;
        None where a replay would not be the same call (module docstring)."""
        if not traced or any(t is None for t in traced):
            return None
        spans = Spans(inputs)
        if spans.overlap():
            return None  # two of the layer's tensors overlap: which one an argument belongs to is not known
        launches, keep = [], []
        for item in traced:
            launch_, others = replayable(item, spans)
            launches.append(launch_)
            keep += others
        return tuple(launches), tuple(keep)


PROVEN_LIMIT = 1024
RETAINED = 16  # traces that hold their buffers at once, the newest (a runner's batch: one per kind of layer)
_retained: collections.deque = collections.deque()
_proven: dict = {}  # what a step's trace rests on -> whether its Guard found only allocations and views


REFUSALS = 3  # a layout whose trace the Guard refused this many times is not traced again (proven False)


def proven(key: tuple) -> bool | None:
    """Whether a step traced with ``key`` (the layer's kind, its tensors' signatures, the metadata's layout) runs only
    allocations and views: True once a Guard found so, False once Guards refused it ``REFUSALS`` times (a refusal
    can be passing: a batch's tables made on the traced step instead of the one before it), None while not known
    (trace it under a ``Guard``). What the host path of a step does is decided by exactly these (the shapes, strides,
    dtypes and alignments, the backend and config), so a step proven once is traced without the Guard, which costs
    far more than the step itself."""
    found = _proven.get(key)
    return found if found is True or found is None else (False if found >= REFUSALS else None)


def prove(key: tuple, clean: bool) -> None:
    if len(_proven) >= PROVEN_LIMIT:
        _proven.clear()
    _proven[key] = True if clean else _proven.get(key, 0) + 1


def layout(meta) -> tuple:
    """The metadata's tensors' shapes, strides and dtypes (the host path's decisions may rest on them)."""
    return tuple((t.shape, t.stride(), t.dtype) for t in (meta.positions, meta.slot_mapping, meta.token_request,
                                                          meta.block_table))


def retain(trace: "Trace") -> None:
    """Keep ``trace``'s buffers; the oldest of more than RETAINED traces lets go of its own (its metadata's next step
    is traced again). A runner keeps metadata for each decode batch size it served: without a bound, each would hold
    a step's intermediate buffers for as long as the runner lives."""
    _retained.append(trace)
    while len(_retained) > RETAINED:
        old = _retained.popleft()
        old.launches, old.keep = None, ()


def where(meta, meta_layout: tuple | None = None) -> tuple:
    """The metadata tensors' addresses and layout (``meta_layout`` where known: what a refill must leave as it
    was)."""
    return tuple([t.data_ptr() for t in (meta.positions, meta.slot_mapping, meta.token_request,
                                         meta.block_table)]), layout(meta) if meta_layout is None else meta_layout


def meta_state(meta) -> tuple:
    """The metadata as a trace depends on it: its tensors (the same objects: a trace holds them, so their ids are
    not reused while it lives) and their versions. Integers only: a tuple of tensors would compare their values."""
    p, s, r, b = meta.positions, meta.slot_mapping, meta.token_request, meta.block_table
    return id(p), id(s), id(r), id(b), p._version, s._version, r._version, b._version


def current_stream(tensor: torch.Tensor) -> int:
    """The current stream of ``tensor``'s device (0 off the GPU): a trace replays only on the stream it was made on."""
    return launch._raw_stream(tensor.get_device()) if tensor.is_cuda else 0


def capturing(tensor: torch.Tensor) -> bool:
    return tensor.is_cuda and torch.cuda.is_current_stream_capturing()
