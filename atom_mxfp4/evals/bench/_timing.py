"""Timing and ceilings for the H200 benchmarks (never asserts a time).

``graph_time_ms``: the calls (one per input set) are captured once in a CUDA graph and the graph is replayed;
time per call = median replay time / number of sets. Several input sets rotate through memory so that small
problems are not served from the 60 MB L2 (METHOD.md: "rotate among several input sets").
"""

import statistics

import torch

L2_BYTES = 60 * 2**20


def sets_for(bytes_per_call: int, budget: int = 512 * 2**20, most: int = 32) -> int:
    """How many distinct input sets to rotate: enough to pass ~8x the L2, within a memory budget."""
    want = -(-8 * L2_BYTES // max(1, bytes_per_call))
    return max(1, min(most, want, max(1, budget // max(1, bytes_per_call))))


def graph_time_ms(calls, reps: int = 30) -> float:
    for call in calls:  # compile / autotune outside the graph
        call()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for call in calls:
            call()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    del graph
    return statistics.median(times) / len(calls)


def eager_time_ms(call, reps: int = 10) -> float:
    """Median of event-timed eager calls (for ops that cannot be captured, e.g. ones that sync the host)."""
    call()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def copy_bandwidth_tbs() -> dict:
    """Device-to-device copies, bytes read + written per second, TB/s: several sizes and ways; the ceiling of
    this run is the best of them (a low reading would flatter the kernels' % of copy)."""
    found = {}
    for gib in (1, 4):
        n = gib * 2**30
        src = torch.randint(0, 2**31 - 1, (n // 4,), dtype=torch.int32, device="cuda")
        dst = torch.empty_like(src)
        for _ in range(50):  # clocks come up from idle first
            dst.copy_(src)
        found[f"graph_copy_{gib}GiB"] = 2 * n / (graph_time_ms([lambda dst=dst, src=src: dst.copy_(src)],
                                                               reps=20) * 1e-3) / 1e12
        found[f"eager_copy_{gib}GiB"] = 2 * n / (eager_time_ms(lambda dst=dst, src=src: dst.copy_(src),
                                                               reps=20) * 1e-3) / 1e12
        del src, dst
        torch.cuda.empty_cache()
    found["best"] = max(found.values())
    return found
