"""The pa_decode plan: one protocol for every backend (STYLE.md, "Plan once, run per layer").

A plan is made once per batch (``atom_mxfp4.ops.plan_pa_decode``, or a backend's ``make_plan(num_rows,
max_table_width, group, device)``) and passed to every ``pa_decode`` of that batch: every layer, every CUDA-graph
replay. It is caller-owned and never changes after it is made.

- **What it covers**: a call with ``q.shape[0] <= num_rows``, ``tables.shape[1] <= max_table_width``,
  ``q.shape[1] == group``, ``q.device == device``, run by the backend named ``backend``. ``check_plan`` refuses any
  other call (``ValueError`` naming the field, the expected and the actual value; ``TypeError`` for an object that is
  not a plan of the backend's kind), on every backend and whatever ``check`` says: a plan too small for the call would
  let a kernel write past its workspace.
- **What it owns**: the workspace a backend's launch writes between its kernels (split-KV partials), allocated once
  by ``make_plan`` and sized for the largest launch it covers; a launch given a plan allocates nothing, so the buffers
  are graph-stable. The workspace is a field of the backend's subclass (``TritonDecodePlan``, ``FlyDSLDecodePlan``);
  the torch backend's plan owns none.
- **What it does not fix**: how a launch splits its work. Each launch splits by its own (rows, table width) and the
  plan's tuning, exactly as with ``plan=None``, so a plan made for more rows or wider tables gives the same output,
  bit for bit, and one plan per batch serves dense layers (tables as wide as the block table) and sparse layers
  (``topk * pages_per_block`` wide) alike.

Ground floor: imports torch and ``errors`` only, so backends may import it (tests/test_import_graph.py).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from .errors import expect, expect_int, fail


def sm_count(device_index: int | None, off_gpu: int) -> int:
    """Streaming multiprocessors of CUDA device ``device_index`` (None: the current device, as ``torch.device("cuda")``
    means), asked once per device: the unit the split policies count waves in. ``off_gpu``: what a backend plans with
    when CUDA is not available (CPU and interpreter runs)."""
    if not torch.cuda.is_available():
        return off_gpu
    return _sm_count(torch.cuda.current_device() if device_index is None else device_index)


@functools.cache
def _sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


sm_count.cache_clear = _sm_count.cache_clear  # tests that stand in a device property start from an empty cache


def plan_device(device) -> torch.device:
    """``device`` as tensors report it: a CUDA device without an index is the current one (``cuda`` -> ``cuda:0``),
    so a plan made for ``"cuda"`` fits tensors on ``cuda:0``."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


@dataclass(frozen=True, eq=False)
class DecodePlan:
    """A pa_decode plan (module docstring); backends subclass it to add their workspace and tuning."""

    backend: str  # the registered name of the backend that made it and alone may run it
    num_rows: int  # calls with at most this many rows (q.shape[0])
    max_table_width: int  # calls with tables at most this wide (tables.shape[1])
    group: int  # calls with exactly this GQA group (q.shape[1])
    device: torch.device  # calls on exactly this device

    def __post_init__(self):
        expect(isinstance(self.backend, str), "backend", "a registered backend name", repr(self.backend), TypeError)
        expect_int(self.num_rows, "num_rows", 0)
        expect_int(self.max_table_width, "max_table_width", 1)
        expect_int(self.group, "group", 1)
        object.__setattr__(self, "device", plan_device(self.device))

    def mismatches(self, *, backend: str, rows: int, width: int, group: int, device) -> list[tuple[str, str, object]]:
        """Each way the plan does not cover a call, as (field, expected, actual); empty when it covers it."""
        found = []
        if self.backend != backend:
            found.append(("plan.backend", f"{backend!r} (the backend running pa_decode)", repr(self.backend)))
        if self.num_rows < rows:
            found.append(("plan.num_rows", f">= q.shape[0] = {rows} (the call's rows)", self.num_rows))
        if self.max_table_width < width:
            found.append(("plan.max_table_width", f">= tables.shape[1] = {width}", self.max_table_width))
        if self.group != group:
            found.append(("plan.group", f"q.shape[1] = {group}", self.group))
        if self.device != torch.device(device):
            found.append(("plan.device", f"q.device = {torch.device(device)}", self.device))
        return found

    def covers(self, *, backend: str, rows: int, width: int, group: int, device) -> bool:
        return not self.mismatches(backend=backend, rows=rows, width=width, group=group, device=device)


def check_plan(plan, *, backend: str, rows: int, width: int, group: int, device, kind: type = DecodePlan) -> None:
    """Refuse a plan that does not cover a pa_decode call (module docstring). ``kind``: the plan class the caller
    needs (a backend's launcher passes its subclass; ``atom_mxfp4.ops`` the base). Host-side only, no sync: a plan
    that covers the call costs one expression (every launch given a plan asks), the messages are made on a refusal."""
    if (isinstance(plan, kind) and plan.backend == backend and plan.num_rows >= rows and plan.max_table_width >= width
            and plan.group == group and plan.device == device):
        return
    expect(isinstance(plan, kind), "plan", f"None or a {kind.__name__} (from ops.plan_pa_decode or the backend's "
           f"make_plan)", type(plan).__name__, TypeError)
    found = plan.mismatches(backend=backend, rows=rows, width=width, group=group, device=device)
    if found:
        fail(*found[0])


# ---- split-KV plans: the forced split count, a launch's split and the workspace it needs ------------------------
def check_forced_splits(num_splits) -> None:
    """``make_plan(..., num_splits=)`` of every backend: None (the backend's split policy, per launch) or an int >= 1
    (every launch asks for that many: tests and benchmarks force a path this way)."""
    expect(num_splits is None or (isinstance(num_splits, int) and not isinstance(num_splits, bool)
                                  and num_splits >= 1), "num_splits", "None or an int >= 1", repr(num_splits))


def split_pages(width: int, splits: int) -> tuple[int, int]:
    """(splits, pages_per_split) of a launch over tables ``width`` wide asked for ``splits``: at most one split per
    page, and as many as ``pages_per_split`` leaves non-empty (never more than asked; a 0-wide table: one split)."""
    width = max(1, width)
    splits = max(1, min(splits, width))
    pages_per_split = -(-width // splits)
    return -(-width // pages_per_split), pages_per_split


def checked_split(plan, rows: int, width: int) -> tuple[int, int]:
    """(splits, pages_per_split) of a launch of ``rows`` x ``width`` under a split-KV plan (one with ``splits_for``
    and the workspace ``part_out`` / ``part_lse``, slot ``row * splits + split``): the plan's split rule, and a
    refusal when the workspace holds fewer slots than the split needs (a hand-built plan could hold less than its
    backend's make_plan gives)."""
    splits, pages_per_split = plan.splits_for(rows, width)
    if splits > 1:
        slots = 0 if plan.part_out is None else min(plan.part_out.shape[0], plan.part_lse.shape[0])
        expect(rows * splits <= slots, "plan workspace (part_out / part_lse rows)",
               f">= {rows * splits} partial slots ({rows} rows x {splits} splits)", slots)
    return splits, pages_per_split
