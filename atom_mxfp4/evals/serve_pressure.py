"""The server under pressure (issue 40): scenarios of ``serve_check`` that push the KV pool's free / reuse paths.

- ``exhaustion``: a burst of long requests whose KV need exceeds the pool (``--max-total-tokens`` small), so SGLang
  retracts running requests ("KV cache pool is full. Retract requests.") and re-prefills them later. SGLang 0.5.23
  admits a new request only with its whole ``max_new_tokens`` free, so a burst of such requests may queue instead;
  its test switch ``SGLANG_TEST_RETRACT=1`` (in the server's environment) then retracts running decodes every
  ``SGLANG_TEST_RETRACT_INTERVAL`` steps through the same code ("Testing retraction."); the two are counted apart.
  Asserted: some request was retracted; every request completes with its length; the greedy tokens of each request
  re-run alone equal the burst's, or differ first at a near-tie of the alone run (``NEAR_TIE``: a re-prefilled
  request's K / V come from a prefill instead of the decode that wrote them first, other GEMM shapes, so rounding may
  flip a tie); the server idle, healthy, with no KV token in use after ``/flush_cache`` (the strict idle check of
  tests/sglang_env stops the scheduler on a leaked page).
- ``aborts``: a bounded loop of aborts at random points, half in the middle of a chunked prefill (``/abort_request``
  with the request's rid, at a random fraction of that prompt's measured prefill time) and half in the middle of a
  decode (the client goes away after a random number of streamed chunks), beside requests that must finish.
  Asserted: at least one abort landed before the request's first token (inside its prefill), every request that
  was not aborted finished with its length, and afterwards as ``burst``: idle, healthy, nothing in use.
- ``soak``: ``soak_requests`` requests of mixed lengths, ``soak_concurrency`` at a time, one in 8 cancelled; every
  ``soak_every`` requests the submission pauses for a checkpoint: health, idle, ``/flush_cache`` and no KV token in
  use, the server's resident memory (all processes of its group) and GPU memory (nvidia-smi, where there is one).
  Asserted: every checkpoint clean, no request error, and memory flat: the last checkpoint within ``RSS_SLACK`` /
  ``GPU_SLACK_MIB`` of the second (the first pays warm-up allocations).
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor

from .serve_client import Context, call, load, prompt, stream, wait_idle

NEAR_TIE = 0.1  # nats: a greedy flip between two candidates this close in the alone run's logprobs is rounding
RSS_SLACK = (0.10, 256 * 2**20)  # the soak's resident memory may grow by 10% or 256 MiB, whichever is more
GPU_SLACK_MIB = 64
# SGLang's log line of a retraction: the pool ran out, or its test switch SGLANG_TEST_RETRACT=1 retracted (every
# SGLANG_TEST_RETRACT_INTERVAL decode steps: the same retract_decode, pages freed and the request re-queued)
RETRACT = re.compile(r"(KV cache pool is full\. Retract requests|Testing retraction)\. #retracted_reqs: (\d+)")


def _generate(url: str, ids: list[int], max_new_tokens: int, rid: str | None = None) -> dict:
    payload = {"input_ids": ids, "return_logprob": True, "top_logprobs_num": 5,
               "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 0.0, "ignore_eos": True}}
    if rid is not None:
        payload["rid"] = rid
    return call(url, "/generate", payload)


def _settled(ctx: Context) -> dict:
    """After a scenario: idle, the scheduler's idle self-check given time to run, the cache flushed; what is left."""
    url = ctx.server.url
    idle = wait_idle(url)
    time.sleep(2.0)  # the strict idle memory check runs when the scheduler goes idle
    call(url, "/flush_cache", {})
    after = load(url)
    health = urllib.request.urlopen(url + "/health", timeout=60).status
    clean = (idle["num_running_reqs"] == 0 and idle["num_waiting_reqs"] == 0 and after["num_used_tokens"] == 0
             and health == 200 and ctx.server.alive())
    return {"clean": clean, "used_tokens_after_flush": after["num_used_tokens"], "health": health,
            "running": idle["num_running_reqs"], "waiting": idle["num_waiting_reqs"]}


def first_difference(tokens: list[int], alone: dict) -> dict:
    """Where ``tokens`` first differ from the alone run's, and whether that is a near-tie of the alone run: its
    top-5 at that position holds both tokens within NEAR_TIE nats (``alone``: a /generate answer with top logprobs)."""
    mine, tops = alone["output_ids"], alone["meta_info"].get("output_top_logprobs") or []
    for i, (a, b) in enumerate(zip(tokens, mine)):
        if a != b:
            lp = {int(entry[1]): float(entry[0]) for entry in (tops[i] if i < len(tops) else None) or []}
            gap = abs(lp[a] - lp[b]) if a in lp and b in lp else None
            return {"at": i, "gap": gap, "near_tie": gap is not None and gap <= NEAR_TIE}
    if len(tokens) != len(mine):
        return {"at": min(len(tokens), len(mine)), "gap": None, "near_tie": False}
    return {"at": None, "gap": None, "near_tie": False}


def s_exhaustion(ctx: Context) -> dict:
    url, rng = ctx.server.url, ctx.rng
    pool = load(url)["max_total_num_tokens"]
    n = ctx.exhaustion_requests
    # each request needs (prompt + output) tokens, together 1.5x the pool, mostly output: SGLang admits requests on an
    # estimate of the output they will take (a fraction of max_new_tokens, lower the longer decodes run without a
    # retraction), and short prompts start every decode at once, so the running decodes outgrow the pool together
    each = min(-(-3 * pool // (2 * n)), ctx.context - 8)
    length = max(16, each // 8)
    output = each - length
    jobs = [prompt(rng, length, ctx.vocab) for _ in range(n)]
    lines_before = len(ctx.server.log().splitlines())
    with ThreadPoolExecutor(n) as workers:
        burst = list(workers.map(lambda ids: _generate(url, ids, output), jobs))
    log = ctx.server.log().splitlines()[lines_before:]
    found = [m for m in map(RETRACT.search, log) if m]
    retracted = sum(int(m.group(2)) for m in found if m.group(1).startswith("KV"))
    retracted_test = sum(int(m.group(2)) for m in found if m.group(1).startswith("Testing"))
    lengths_ok = all(len(r["output_ids"]) == output for r in burst)
    settled = _settled(ctx)
    alone_n = n if ctx.exhaustion_alone is None else min(n, ctx.exhaustion_alone)
    diffs = [first_difference(burst[i]["output_ids"], _generate(url, jobs[i], output)) for i in range(alone_n)]
    exact = sum(1 for d in diffs if d["at"] is None)
    agree = all(d["at"] is None or d["near_tie"] for d in diffs)
    final = _settled(ctx)
    ok = retracted + retracted_test > 0 and lengths_ok and agree and settled["clean"] and final["clean"]
    return {"ok": ok, "pool_tokens": pool, "requests": n, "prompt_tokens": length, "output_tokens": output,
            "retracted_requests": retracted, "retracted_requests_test_switch": retracted_test,
            "lengths_ok": lengths_ok, "compared_alone": alone_n,
            "alone_exact": exact, "alone_near_tie": sum(1 for d in diffs if d["near_tie"]),
            "differences": [d for d in diffs if d["at"] is not None][:8], **settled,
            "clean_after_alone_runs": final["clean"]}


def s_aborts(ctx: Context) -> dict:
    url, rng = ctx.server.url, ctx.rng
    chunk = ctx.chunk or call(url, "/get_server_info")["chunked_prefill_size"]
    long_prompt = min(5 * chunk + 31, ctx.context - 64)  # a prefill of several chunks
    t0 = time.perf_counter()  # its prefill time alone: the window the aborts land in
    stream(url, prompt(rng, long_prompt, ctx.vocab), 1)
    prefill_s = time.perf_counter() - t0
    mid_prefill = mid_decode = 0
    completed, errors = [], []
    for round_ in range(ctx.aborts):
        # a request that must finish, beside the one aborted
        kept = prompt(rng, rng.randrange(16, 600), ctx.vocab)
        keeper = threading.Thread(target=lambda: completed.append(stream(url, kept, 24)))
        keeper.start()
        if round_ % 2 == 0:  # inside a chunked prefill: /abort_request by rid at a random point of it
            rid, first, result = uuid.uuid4().hex, threading.Event(), {}
            ids, delay = prompt(rng, long_prompt, ctx.vocab), rng.uniform(0.05, 0.9) * prefill_s
            runner = threading.Thread(target=lambda: result.update(stream(url, ids, 64, on_chunk=first.set, rid=rid)))
            runner.start()
            time.sleep(delay)
            before_first_token = not first.is_set()
            call(url, "/abort_request", {"rid": rid})
            runner.join(300)
            if runner.is_alive():
                errors.append(f"round {round_}: the aborted request did not end")
            elif before_first_token and result["tokens"] < 64 and (result["finish"] == "abort"
                                                                    or result["streamed_error"]):
                mid_prefill += 1
        else:  # inside a decode: the client goes away after a random number of chunks
            result = stream(url, prompt(rng, rng.randrange(16, 1500), ctx.vocab), 256,
                            cancel_after=rng.randrange(1, 40))
            mid_decode += bool(result["cancelled"])
        keeper.join(300)
    wrong = [r for r in completed if not (r["finished"] and r["tokens"] == 24)]
    settled = _settled(ctx)
    after = stream(url, prompt(rng, 100, ctx.vocab), 8)  # the server still serves
    ok = (mid_prefill > 0 and mid_decode > 0 and not wrong and not errors and len(completed) == ctx.aborts
          and settled["clean"] and after["finished"] and after["tokens"] == 8)
    return {"ok": ok, "rounds": ctx.aborts, "prefill_tokens": long_prompt, "prefill_seconds": round(prefill_s, 3),
            "aborted_before_first_token": mid_prefill, "aborted_in_decode": mid_decode,
            "kept_requests_wrong": len(wrong), "errors": errors[:5], **settled}


# ---- the soak --------------------------------------------------------------------------------------------------
def group_rss(pgid: int) -> int:
    """Resident bytes of every process in process group ``pgid`` (the server and its scheduler / detokenizer)."""
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid:  # field 5 of stat, the process group (after the name in parentheses)
                continue
            with open(f"/proc/{pid}/status") as f:
                total += next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))
        except (OSError, StopIteration, IndexError, ValueError):
            continue  # a process that ended meanwhile
    return total


def group_pids(pgid: int) -> set[int]:
    pids = set()
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and os.getpgid(int(pid)) == pgid:
                pids.add(int(pid))
        except OSError:
            continue
    return pids


def gpu_mib(pids: set[int]) -> int | None:
    """GPU memory (MiB) of ``pids`` by nvidia-smi; None where there is no nvidia-smi or it lists none of them."""
    try:
        text = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    used = [int(mib) for pid, mib in (line.split(",") for line in text.strip().splitlines() if "," in line)
            if int(pid) in pids]
    return sum(used) if used else None


def s_soak(ctx: Context) -> dict:
    url, rng, server = ctx.server.url, ctx.rng, ctx.server
    total, every, concurrency = ctx.soak_requests, ctx.soak_every, ctx.soak_concurrency
    checkpoints, errors, done = [], [], 0
    while done < total:
        size = min(every, total - done)
        jobs = []
        for i in range(size):
            cancel = (done + i) % 8 == 7
            jobs.append((prompt(rng, rng.choice([8, 64, 300, 900, ctx.max_prompt]), ctx.vocab),
                         200 if cancel else rng.randrange(1, 48), rng.randrange(1, 6) if cancel else None))

        def run(job):
            try:
                result = stream(url, *job)
                if job[2] is None and not (result["finished"] and result["tokens"] == job[1]):
                    return f"expected {job[1]} tokens, got {result['tokens']} (finished {result['finished']})"
            except Exception as error:  # reported, the soak goes on
                return f"{type(error).__name__}: {error}"
            return None
        with ThreadPoolExecutor(concurrency) as workers:
            errors += [e for e in workers.map(run, jobs) if e]
        done += size
        settled = _settled(ctx)
        pids = group_pids(server.proc.pid)
        checkpoints.append({"requests": done, "clean": settled["clean"],
                            "used_tokens_after_flush": settled["used_tokens_after_flush"],
                            "rss_mib": round(group_rss(server.proc.pid) / 2**20, 1), "gpu_mib": gpu_mib(pids)})
        if not server.alive():
            break
    base = checkpoints[1] if len(checkpoints) > 2 else checkpoints[0]
    last = checkpoints[-1]
    rss_ok = last["rss_mib"] <= base["rss_mib"] + max(RSS_SLACK[0] * base["rss_mib"], RSS_SLACK[1] / 2**20)
    gpu_ok = base["gpu_mib"] is None or last["gpu_mib"] is None or last["gpu_mib"] <= base["gpu_mib"] + GPU_SLACK_MIB
    ok = done == total and not errors and all(c["clean"] for c in checkpoints) and rss_ok and gpu_ok
    return {"ok": ok, "requests": done, "errors": errors[:5], "error_count": len(errors), "rss_flat": rss_ok,
            "gpu_memory_flat": gpu_ok, "checkpoints": checkpoints}


CHECKS = {"exhaustion": s_exhaustion, "aborts": s_aborts, "soak": s_soak}
