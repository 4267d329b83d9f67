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


def copy_bandwidth_tbs(nbytes: int = 4 * 2**30) -> float:
    """Device-to-device copy, bytes read + written per second, in TB/s (the memory ceiling of this run)."""
    src = torch.randint(0, 255, (nbytes // 4,), dtype=torch.int32, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(50):  # ~0.2 s of copies first: clocks come up from idle
        dst.copy_(src)
    ms = graph_time_ms([lambda: dst.copy_(src)], reps=20)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * nbytes / (ms * 1e-3) / 1e12
