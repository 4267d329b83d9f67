"""Our host time inside the server, measured where it is spent (issue 39): how much of an eager step is ours.

``ATOM_MXFP4_HOST_METER=N`` (N > 0) times, on the host, the backend's metadata (``init_forward_metadata_out_graph``
/ ``_in_graph``, called for every forward batch) and each layer's attention (``attend``: what runs eagerly, outside
any captured graph), and logs one line at INFO as the batch after every N starts (the batches before it):

    atom_mxfp4 host time, last 50 batches: decode 50 (metadata 41.2 us + attention 120.4 us over 4.0 layers = 161.6
    us a batch); extend 0

Host time is the CPU time to issue the work (the GPU runs it asynchronously): with CUDA graphs off it is what our
layers add to each step's Python, beside the server's own (a decode step's time per output token, serve_check
speed). A value check's device sync (the first checked layer of a batch, atom_mxfp4.checked) and a kernel compiled
inside a layer count as ours. Under a replayed decode graph only the metadata runs in Python (0 layers). Batches
of a CUDA-graph capture are not counted. A line may hold batches from before a window a reader times
(``serve_check.host_time`` drops each window's first line). Unset or 0: nothing is wrapped (no cost).
``serve_check``'s speed scenario reads the lines (``LINE``).
"""

from __future__ import annotations

import logging
import os
import re
import time

from atom_mxfp4.errors import expect

ENV = "ATOM_MXFP4_HOST_METER"
logger = logging.getLogger(__name__)
LINE = re.compile(r"atom_mxfp4 host time, last (\d+) batches: decode (\d+)(?: \(metadata ([0-9.]+) us \+ attention "
                  r"([0-9.]+) us over ([0-9.]+) layers = ([0-9.]+) us a batch\))?; extend (\d+)(?: \(metadata "
                  r"([0-9.]+) us \+ attention ([0-9.]+) us over ([0-9.]+) layers = ([0-9.]+) us a batch\))?")
KINDS = ("decode", "extend")


def every() -> int:
    """Batches per log line from ``ENV`` (0: off); a value that is not a whole number >= 0 is refused by name."""
    value = os.environ.get(ENV, "").strip() or "0"
    expect(value.isdigit(), ENV, "unset or a whole number of batches per log line >= 0 (0: off)", repr(value))
    return int(value)


class HostMeter:
    """Host seconds per batch kind: metadata, attention, layer calls; a log line every ``every`` batches."""

    def __init__(self, every: int, clock=time.perf_counter):
        self.every, self.clock, self.kind = every, clock, "decode"
        self._reset()

    def _reset(self) -> None:
        self.totals = {kind: {"batches": 0, "metadata": 0.0, "attention": 0.0, "layers": 0} for kind in KINDS}

    def install(self, backend) -> None:
        """Wrap ``backend``'s metadata and attention methods (instance attributes: the class is untouched)."""
        out_graph, in_graph, attend = (backend.init_forward_metadata_out_graph, backend.init_forward_metadata_in_graph,
                                       backend.attend)

        def init_out_graph(forward_batch, *args, **kwargs):
            if kwargs.get("in_capture", args[0] if args else False):  # a capture's dummy batch: not a served one
                return out_graph(forward_batch, *args, **kwargs)
            self._end_batch()
            self.kind = "decode" if forward_batch.forward_mode.is_decode_or_idle() else "extend"
            self.totals[self.kind]["batches"] += 1
            return self._timed("metadata", out_graph, forward_batch, *args, **kwargs)

        def init_in_graph(forward_batch, *args, **kwargs):
            return self._timed("metadata", in_graph, forward_batch, *args, **kwargs)

        def timed_attend(*args, **kwargs):
            self.totals[self.kind]["layers"] += 1
            return self._timed("attention", attend, *args, **kwargs)

        backend.init_forward_metadata_out_graph = init_out_graph
        backend.init_forward_metadata_in_graph = init_in_graph
        backend.attend = timed_attend

    def _timed(self, part: str, fn, *args, **kwargs):
        start = self.clock()
        try:
            return fn(*args, **kwargs)
        finally:
            self.totals[self.kind][part] += self.clock() - start

    def _end_batch(self) -> None:
        """Called as the next batch starts: the line once ``every`` batches have ended."""
        if sum(t["batches"] for t in self.totals.values()) >= self.every:
            logger.info(self.line())
            self._reset()

    def line(self) -> str:
        parts = []
        for kind in KINDS:
            t = self.totals[kind]
            text = f"{kind} {t['batches']}"
            if t["batches"]:
                n = t["batches"]
                metadata, attention = 1e6 * t["metadata"] / n, 1e6 * t["attention"] / n
                text += (f" (metadata {metadata:.1f} us + attention {attention:.1f} us over {t['layers'] / n:.1f} "
                         f"layers = {metadata + attention:.1f} us a batch)")
            parts.append(text)
        total = sum(t["batches"] for t in self.totals.values())
        return f"atom_mxfp4 host time, last {total} batches: " + "; ".join(parts)


def parse(log: str) -> list[dict]:
    """The meter's lines in ``log``: per line, per kind, batches and the us a batch (metadata, attention, layers,
    total); a kind without batches has only its count."""
    found = []
    for m in LINE.finditer(log):
        record = {"batches": int(m.group(1))}
        for kind, first in (("decode", 2), ("extend", 7)):
            count, *values = m.group(*range(first, first + 5))
            record[kind] = {"batches": int(count)}
            if values[0] is not None:
                record[kind].update(zip(("metadata_us", "attention_us", "layers", "total_us"), map(float, values)))
        found.append(record)
    return found
