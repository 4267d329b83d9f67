"""Real-server checks of the SGLang plugin: start ``sglang serve``, drive it over HTTP, report what happened.

Scenarios (each returns a record with ``ok`` and what it saw; a failure never stops the others):
- ``startup``: the pool SGLang built (tokens, KV GB) and the bytes per token it implies;
- ``prefix_reuse``: a prompt of 3 pages + 40 tokens sent three times and then extended: the radix cache must report
  the whole pages as cached, the two cached repeats must give the same greedy tokens, and the first (cold) run the
  same tokens or, where rounding between batch shapes flips a near-tie, the same first-token top-5 candidates;
- ``chunked_prefill``: a prompt longer than ``--chunked-prefill-size``, prefilled in chunks;
- ``mixed``: short prompts arriving while a long decode streams (continuous batching: prefill and decode together);
- ``burst``: many concurrent streaming requests of mixed lengths, a quarter cancelled mid-stream; afterwards the
  server must be healthy, with no running request, and after ``/flush_cache`` no KV token in use (none leaked);
- ``graphs``: from the server log, whether decode (and prefill) batches ran on CUDA graphs;
- ``agreement``: greedy tokens, their logprobs and the last hidden states of fixed prompts, saved so two servers (e.g.
  ``--kv-cache-dtype mxfp4`` and ``bf16`` on the same dummy weights) can be compared (``compare``).
Named only (not in "all"): ``speed`` (timings) and the pressure scenarios ``exhaustion``, ``aborts``, ``soak``
(atom_mxfp4.evals.serve_pressure; ``exhaustion`` wants a small ``--max-total-tokens``).

Run ``python -m atom_mxfp4.evals.serve_check run --label mxfp4 --out DIR -- <sglang serve arguments>``; compare two
runs with ``python -m atom_mxfp4.evals.serve_check compare A.json B.json``. The server's log goes to DIR.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..model_patches.sglang import meter
from .serve_client import PAGE, Context, Server, call, generate, load, prompt, stream, wait_idle
from .serve_pressure import CHECKS as PRESSURE_CHECKS

SCENARIOS = ("startup", "prefix_reuse", "chunked_prefill", "mixed", "burst", "graphs", "agreement")  # "all"
TIMINGS = ("speed",)  # named only: timings, not checks (scripts/serve_run.sh speed)
PRESSURE = tuple(PRESSURE_CHECKS)  # named only: exhaustion, aborts, soak (a small pool for the first)


# ---------------------------------------------------------------------------------------------------- scenarios
def s_startup(ctx: Context) -> dict:
    state = load(ctx.server.url)
    tokens, gib = state["max_total_num_tokens"], state["memory"]["kv_cache_gb"]
    return {"ok": tokens > 0, "pool_tokens": tokens, "kv_cache_gib": gib,
            "bytes_per_token": round(gib * 2**30 / tokens, 1) if tokens else None}


def _first_top5(out: dict) -> dict[int, float]:
    top = out["meta_info"].get("output_top_logprobs") or [[]]
    return {int(entry[1]): float(entry[0]) for entry in top[0]}


def s_prefix_reuse(ctx: Context) -> dict:
    """The same prompt three times (cold, then twice on its cached 3-page prefix) and once extended. Asserted: the
    prefix is reused; the two cached runs (same batch shapes) give the same tokens; the cold run gives the same
    tokens or at least the same first-token top-5 candidates. Reported, not asserted: the cold run's first-token
    logprob difference. The cold and the cached run see the same cache bytes but not the same batch shapes (a 424-row
    prefill vs a 40-row extend: other GEMM tilings, another split-KV plan), so their activations differ by rounding,
    and on a random-weight model that can flip a near-tied block selection (a whole block in or out) or a near-tied
    greedy token (H200, 2026-12-03: the same first 2 of 8 tokens and top-5, first-token logprob 0.147 apart). Reading
    wrong pages would change the candidates themselves (mxfp4 vs bf16 KV on the same prompts shares 0-4 of 5)."""
    url, base = ctx.server.url, prompt(ctx.rng, 3 * PAGE + 40, ctx.vocab)
    first = generate(url, base, 8, logprobs=True)
    again = generate(url, base, 8, logprobs=True)
    again2 = generate(url, base, 8, logprobs=True)
    longer = generate(url, base + prompt(ctx.rng, 100, ctx.vocab), 8)
    cached = [r["meta_info"].get("cached_tokens", 0) for r in (first, again, longer)]
    same = first["output_ids"] == again["output_ids"]
    cached_runs_same = again["output_ids"] == again2["output_ids"]
    cold, warm = _first_top5(first), _first_top5(again)
    shared = sorted(set(cold) & set(warm))
    diff = max((abs(cold[t] - warm[t]) for t in shared), default=None)
    close = same or (len(cold) == 5 and len(shared) == 5)
    return {"ok": cached[0] == 0 and cached[1] >= 3 * PAGE and cached[2] >= 3 * PAGE and cached_runs_same and close,
            "cached_tokens": cached, "repeat_same_tokens": same, "cached_repeats_same_tokens": cached_runs_same,
            "first_token_top5_shared": len(shared), "first_token_max_logprob_diff": diff,
            "tokens": {"cold": first["output_ids"], "cached": again["output_ids"],
                       "cached_again": again2["output_ids"]}}


def s_chunked_prefill(ctx: Context) -> dict:
    info = call(ctx.server.url, "/get_server_info")
    chunk = ctx.chunk or info["chunked_prefill_size"]
    length = min(3 * chunk + 77, ctx.context - 64)
    out = generate(ctx.server.url, prompt(ctx.rng, length, ctx.vocab), 8)
    return {"ok": len(out["output_ids"]) == 8 and length > chunk, "prompt_tokens": length, "chunk": chunk}


def s_mixed(ctx: Context) -> dict:
    """Short prompts sent while a long decode streams: SGLang must run their prefills beside the running decode."""
    url, results, streaming = ctx.server.url, {}, threading.Event()

    def long_decode():
        results["long"] = stream(url, prompt(ctx.rng, 200, ctx.vocab), ctx.long_decode, on_chunk=streaming.set)
    runner = threading.Thread(target=long_decode)
    lines_before = len(ctx.server.log().splitlines())
    runner.start()
    streaming.wait(120)
    shorts = [generate(url, prompt(ctx.rng, 50 + 97 * i, ctx.vocab), 4) for i in range(4)]
    runner.join()
    new_lines = ctx.server.log().splitlines()[lines_before:]
    beside = [line for line in new_lines if "Prefill batch" in line and "#running-req: 0," not in line]
    return {"ok": results["long"]["finished"] and all(len(s["output_ids"]) == 4 for s in shorts) and bool(beside),
            "long_tokens": results["long"]["tokens"], "prefill_batches_beside_running_decode": len(beside)}


def s_burst(ctx: Context) -> dict:
    url, rng = ctx.server.url, ctx.rng
    before = load(url)
    jobs = []
    for i in range(ctx.burst):
        length = rng.choice([16, 100, 300, 700, ctx.max_prompt])
        cancel = i % 4 == 3  # a long request, so that it is still running when its client goes away
        jobs.append((prompt(rng, length, ctx.vocab), 512 if cancel else rng.randrange(8, 64), 3 if cancel else None))
    results = [None] * len(jobs)

    def run(i):
        try:
            results[i] = stream(url, *jobs[i])
        except Exception as error:  # reported per request
            results[i] = {"error": f"{type(error).__name__}: {error}"}
    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    idle = wait_idle(url)
    time.sleep(2.0)  # the scheduler's idle self-check (strict: a leak stops it) runs when it goes idle
    flushed = call(url, "/flush_cache", {})
    after = load(url)
    health = urllib.request.urlopen(url + "/health", timeout=60).status
    errors = [r["error"] for r in results if "error" in r]
    cancelled = sum(1 for r in results if r.get("cancelled"))
    finished = sum(1 for r in results if r.get("finished"))
    ok = (not errors and finished + cancelled == len(jobs) and idle["num_running_reqs"] == 0
          and after["num_used_tokens"] == 0 and health == 200 and ctx.server.alive())
    return {"ok": ok, "requests": len(jobs), "finished": finished, "cancelled": cancelled, "errors": errors[:5],
            "used_tokens_before": before["num_used_tokens"], "used_tokens_after_flush": after["num_used_tokens"],
            "flush": flushed, "health": health}


def s_graphs(ctx: Context) -> dict:
    log = ctx.server.log()
    decode = [line for line in log.splitlines() if "Decode batch" in line]
    on_graph = [line for line in decode if "cuda graph: True" in line]
    prefill = [line for line in log.splitlines() if "Prefill batch" in line]
    prefill_graph = [line for line in prefill if "cuda graph: True" in line]
    return {"ok": True, "decode_batches": len(decode), "decode_on_cuda_graph": len(on_graph),
            "prefill_batches": len(prefill), "prefill_on_cuda_graph": len(prefill_graph)}


def s_agreement(ctx: Context) -> dict:
    rng = random.Random(1234)  # the same prompts on every server
    lengths = [20, 129, 300, 700, 1000, 1500, 2000, 2500][: ctx.agreement_prompts]
    runs = []
    for length in lengths:
        out = generate(ctx.server.url, prompt(rng, length, ctx.vocab), 16, logprobs=True, hidden=ctx.hidden)
        meta = out["meta_info"]
        hidden = meta.get("hidden_states")
        runs.append({"prompt_tokens": length, "output_ids": out["output_ids"],
                     "logprobs": [t[0] for t in meta.get("output_token_logprobs", [])],
                     "top_logprobs": [[[e[0], e[1]] for e in top] for top in meta.get("output_top_logprobs", [])],
                     "last_hidden": hidden[-1] if hidden else None})
    return {"ok": True, "runs": runs}


SPEED_CONCURRENCY = (8, 64)  # decode batches of the speed scenario
SPEED_PROMPT, SPEED_OUTPUT = 512, 256  # tokens of each of their requests
SPEED_TTFT = (2048, 8192)  # prompt tokens of its time-to-first-token requests (one at a time, 3 each, no prefix reuse)


def _timed_stream(url: str, ids: list[int], max_new_tokens: int) -> dict:
    """One streamed request: the time of each chunk (one token each at SGLang's default stream interval), its first
    and its end (seconds from the call), and its output tokens."""
    start, chunks = time.perf_counter(), []
    result = stream(url, ids, max_new_tokens, on_chunk=lambda: chunks.append(time.perf_counter()))
    end = time.perf_counter()
    return {"ttft": (chunks[0] if chunks else end) - start, "seconds": end - start, "tokens": result["tokens"],
            "chunk_seconds": [t - start for t in chunks], "finished": result["finished"]}


def decode_rate(runs: list[dict], offsets: list[float]) -> dict:
    """Decode-only output tokens/s of requests run at once: the tokens that arrived while every request was decoding
    or finishing (after the last request's first token) over that window. ``runs``: ``_timed_stream`` results;
    ``offsets``: each request's start, seconds after a common origin. Tokens counted by their chunks (a chunk's share
    of the request's tokens where a chunk carries several). Before 2026-12-07 the rate was all decode tokens over this
    window, which counted the tokens of requests that started decoding early: with staggered first tokens (a graph
    server, 8 at once, on the H100) it read up to 1.4x high."""
    firsts = [offset + run["ttft"] for run, offset in zip(runs, offsets)]
    start, end = max(firsts), max(offset + run["seconds"] for run, offset in zip(runs, offsets))
    tokens = 0.0
    for run, offset in zip(runs, offsets):
        later = run["chunk_seconds"][1:]  # the first chunk is the prefill's token
        if later:
            tokens += sum(offset + t > start for t in later) * (run["tokens"] - 1) / len(later)
    return {"output_tokens_per_s": round(tokens / (end - start), 1) if end > start else None,
            "ms_per_output_token": round(1e3 * statistics.mean((r["seconds"] - r["ttft"]) / max(1, r["tokens"] - 1)
                                                                for r in runs), 3),
            "first_token_spread_ms": round(1e3 * (start - min(firsts)), 2)}


def host_time(log: str) -> dict | None:
    """Our host time per decode batch from the server's ``ATOM_MXFP4_HOST_METER`` lines in ``log`` (meter.py): the
    mean over their decode batches of metadata, attention and their sum (us), the layers a batch; None without. The
    first line is left out: it may hold batches from before ``log``'s window (a warm-up, its compiles)."""
    lines = [line["decode"] for line in meter.parse(log)[1:] if line["decode"]["batches"]]
    batches = sum(line["batches"] for line in lines)
    if not batches:
        return None
    return {"batches": batches, **{key: round(sum(line[key] * line["batches"] for line in lines) / batches, 1)
                                   for key in ("metadata_us", "attention_us", "total_us", "layers")}}


def s_speed(ctx: Context) -> dict:
    """What a user of the server measures (issue 39: graphs on against off): decode output tokens/s with
    SPEED_CONCURRENCY requests at once (each SPEED_PROMPT prompt tokens, SPEED_OUTPUT output tokens, greedy,
    ignore_eos; ``decode_rate``: the tokens after the last request's first token over that window) and the mean time
    per output token of a request (its inter-token latency); and the time to the first token of one request of
    SPEED_TTFT prompt tokens alone (median of 3, fresh random prompts: no prefix reuse). Each measurement follows a
    warm-up of its own shapes (4 output tokens; one prompt of the length), so no kernel compile is timed. Asserted:
    every request finishes with its length."""
    url, rng, ok, record = ctx.server.url, ctx.rng, True, {}
    stream(url, prompt(rng, 64, ctx.vocab), 8)  # warm-up
    for concurrency in SPEED_CONCURRENCY:
        # warm-up of the same shapes (kernels a new batch shape compiles are not timed), fresh prompts: no prefix reuse
        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(lambda ids: stream(url, ids, 4), [prompt(rng, SPEED_PROMPT, ctx.vocab)
                                                            for _ in range(concurrency)]))
        prompts = [prompt(rng, SPEED_PROMPT, ctx.vocab) for _ in range(concurrency)]
        origin = time.perf_counter()

        def timed(ids):
            offset = time.perf_counter() - origin
            return offset, _timed_stream(url, ids, SPEED_OUTPUT)

        log_start = len(ctx.server.log())
        with ThreadPoolExecutor(concurrency) as pool:
            done = list(pool.map(timed, prompts))
        runs, offsets = [run for _, run in done], [offset for offset, _ in done]
        ok &= all(r["finished"] and r["tokens"] == SPEED_OUTPUT for r in runs)
        record[f"decode_c{concurrency}"] = decode_rate(runs, offsets)
        ours = host_time(ctx.server.log()[log_start:])
        if ours:
            record[f"decode_c{concurrency}"]["atom_host_us_per_decode_batch"] = ours
    for length in SPEED_TTFT:
        stream(url, prompt(rng, length, ctx.vocab), 1)  # warm-up of this prompt length
        times = [_timed_stream(url, prompt(rng, length, ctx.vocab), 1)["ttft"] for _ in range(3)]
        record[f"ttft_{length}_ms"] = round(1e3 * statistics.median(times), 2)
    state = wait_idle(url)
    ok &= not (state["num_running_reqs"] or state["num_waiting_reqs"])
    return {"ok": ok, **record}


CHECKS = {"startup": s_startup, "prefix_reuse": s_prefix_reuse, "chunked_prefill": s_chunked_prefill,
          "mixed": s_mixed, "burst": s_burst, "graphs": s_graphs, "agreement": s_agreement, "speed": s_speed}


def run_scenarios(ctx: Context, names=SCENARIOS, progress=print) -> dict:
    report, checks = {}, {**CHECKS, **PRESSURE_CHECKS}
    for name in names:
        t0 = time.time()
        try:
            report[name] = checks[name](ctx)
        except Exception as error:
            report[name] = {"ok": False, "error": f"{type(error).__name__}: {error}"}
        report[name]["seconds"] = round(time.time() - t0, 1)
        if not ctx.server.alive():
            report[name]["ok"] = False
            report[name]["server_died"] = ctx.server.log_tail(40)
        progress(f"[serve_check] {name}: {'ok' if report[name]['ok'] else 'FAILED'} "
                 f"({report[name]['seconds']} s) {summary(report[name])}")
        if not ctx.server.alive():
            break
    return report


def summary(record: dict) -> str:
    skip = {"ok", "seconds", "runs", "server_died"}
    return json.dumps({k: v for k, v in record.items() if k not in skip})[:400]


# ---------------------------------------------------------------------------------------------------- compare
def _rel_l2(a, b) -> float:
    num = sum((x - y) ** 2 for x, y in zip(a, b)) ** 0.5
    den = sum(y * y for y in b) ** 0.5
    return num / den if den else float("inf")


def _top_overlap(c: dict, b: dict):
    """Tokens shared by the first generated position's top-k lists (entries [logprob, token id]); None if absent."""
    tc, tb = c.get("top_logprobs"), b.get("top_logprobs")
    if not tc or not tb or not tc[0] or not tb[0]:
        return None
    return len({int(t) for _, t in tc[0]} & {int(t) for _, t in tb[0]})


def compare(candidate: dict, baseline: dict) -> list[dict]:
    """Per prompt: greedy tokens agreeing before the first difference, the first token's logprob difference, the
    mean |logprob| difference over the agreeing prefix, how many of the first token's top-5 candidates the two share,
    and the rel-L2 of the last hidden state (only when every token agrees: after a differing token the two hidden
    states belong to different sequences and their distance measures nothing)."""
    rows = []
    for c, b in zip(candidate["agreement"]["runs"], baseline["agreement"]["runs"]):
        agree = 0
        for x, y in zip(c["output_ids"], b["output_ids"]):
            if x != y:
                break
            agree += 1
        diffs = [abs(x - y) for x, y in zip(c["logprobs"][:agree], b["logprobs"][:agree])]
        rows.append({"prompt_tokens": c["prompt_tokens"], "tokens_agree": agree, "tokens": len(c["output_ids"]),
                     "first_logprob_diff": abs(c["logprobs"][0] - b["logprobs"][0]) if c["logprobs"] else None,
                     "mean_logprob_diff": sum(diffs) / len(diffs) if diffs else None,
                     "top5_overlap": _top_overlap(c, b),
                     "last_hidden_rel_l2": (_rel_l2(c["last_hidden"], b["last_hidden"])
                                            if c["last_hidden"] and b["last_hidden"]
                                            and agree == len(c["output_ids"]) else None)})
    return rows


def compare_table(rows: list[dict], names=("candidate", "baseline")) -> str:
    def fmt(v):
        return "-" if v is None else (f"{v:.3g}" if isinstance(v, float) else str(v))
    lines = [f"| prompt tokens | greedy tokens agreeing ({names[0]} vs {names[1]}) | first-token logprob diff | "
             "first-token top-5 shared | mean logprob diff (agreeing prefix) | last hidden state rel-L2 (all agree) |",
             "|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['prompt_tokens']} | {r['tokens_agree']}/{r['tokens']} | {fmt(r['first_logprob_diff'])} | "
                     f"{fmt(r.get('top5_overlap'))}/5 | {fmt(r['mean_logprob_diff'])} | "
                     f"{fmt(r['last_hidden_rel_l2'])} |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------- CLI
def _run(args) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    for item in args.server_env:
        key, _, value = item.partition("=")
        if not key or not _:
            raise SystemExit(f"serve_check: --server-env must be KEY=VALUE, got {item!r}")
        env[key] = value
    server = Server(args.sglang_args, env, out / f"server-{args.label}.log", port=args.port)
    names = SCENARIOS if args.scenarios == "all" else tuple(args.scenarios.split(","))
    unknown = sorted(set(names) - set(SCENARIOS + TIMINGS + PRESSURE))
    if unknown:
        raise SystemExit(f"serve_check: --scenarios must be 'all' or a subset of "
                         f"{list(SCENARIOS + TIMINGS + PRESSURE)}, got {unknown}")
    report = {"label": args.label, "args": args.sglang_args, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    server.start()
    try:
        report["ready_seconds"] = round(server.wait_ready(args.start_timeout), 1)
        print(f"[serve_check] {args.label}: ready in {report['ready_seconds']} s")
        ctx = Context(server, vocab=args.vocab, chunk=args.chunk, burst=args.burst, max_prompt=args.max_prompt,
                      hidden=args.hidden, exhaustion_requests=args.exhaustion_requests,
                      exhaustion_alone=args.exhaustion_alone, aborts=args.aborts, soak_requests=args.soak,
                      soak_every=args.soak_every, soak_concurrency=args.soak_concurrency)
        report["scenarios"] = run_scenarios(ctx, names)
    except Exception as error:
        report["error"] = f"{type(error).__name__}: {error}"
        print(f"[serve_check] {args.label}: {report['error']}")
    finally:
        server.stop()
    report["ok"] = "error" not in report and all(r["ok"] for r in report.get("scenarios", {}).values())
    (out / f"{args.label}.json").write_text(json.dumps(report, indent=1))
    print(f"[serve_check] {args.label}: {'ok' if report['ok'] else 'FAILED'}; wrote {out / (args.label + '.json')}")
    return 0 if report["ok"] else 1


def _compare(args) -> int:
    candidate, baseline = (json.loads(Path(p).read_text()) for p in args.runs)
    missing = [p for p, run in zip(args.runs, (candidate, baseline)) if "agreement" not in run.get("scenarios", {})]
    if missing:
        print(f"serve_check compare: no agreement scenario in {missing} (the run failed: see its log)")
        return 1
    candidate, baseline = candidate["scenarios"], baseline["scenarios"]
    labels = [json.loads(Path(p).read_text())["label"] for p in args.runs]
    table = compare_table(compare(candidate, baseline), labels)
    print(table)
    if args.output:
        Path(args.output).write_text(table + "\n")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m atom_mxfp4.evals.serve_check", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="start sglang serve with the given arguments and run the scenarios")
    run.add_argument("--label", required=True, help="name of this run (file names)")
    run.add_argument("--out", required=True, help="folder for <label>.json and server-<label>.log")
    run.add_argument("--port", type=int, default=31000)
    run.add_argument("--scenarios", default="all",
                     help=f"'all' or a comma list of {', '.join(SCENARIOS + TIMINGS + PRESSURE)}")
    run.add_argument("--vocab", type=int, default=256, help="prompt token ids are drawn from [3, vocab)")
    run.add_argument("--chunk", type=int, help="the server's chunked prefill size (default: asked from the server)")
    run.add_argument("--hidden", action="store_true", help="agreement returns hidden states (server: "
                     "--enable-return-hidden-states)")
    run.add_argument("--burst", type=int, default=64, help="concurrent requests in the burst")
    run.add_argument("--max-prompt", type=int, default=2048, help="longest prompt of the burst")
    run.add_argument("--start-timeout", type=float, default=600, help="seconds to wait for the server")
    run.add_argument("--exhaustion-requests", type=int, default=16, help="exhaustion: long requests, together 1.5x "
                     "the pool's tokens")
    run.add_argument("--exhaustion-alone", type=int, help="exhaustion: how many are re-run alone (default all)")
    run.add_argument("--aborts", type=int, default=24, help="aborts: rounds of the abort loop")
    run.add_argument("--soak", type=int, default=2000, help="soak: requests in all")
    run.add_argument("--soak-every", type=int, default=200, help="soak: requests between checkpoints")
    run.add_argument("--soak-concurrency", type=int, default=32, help="soak: requests at a time")
    run.add_argument("--server-env", action="append", default=[], metavar="KEY=VALUE",
                     help="set in the server's environment only (e.g. PYTHONPATH of another build of the package)")
    run.add_argument("sglang_args", nargs=argparse.REMAINDER, help="after --: arguments of sglang serve")
    cmp = sub.add_parser("compare", help="agreement table of two runs' agreement scenarios")
    cmp.add_argument("runs", nargs=2, metavar="RUN_JSON")
    cmp.add_argument("--output", help="also write the table here")
    args = parser.parse_args(argv)
    if args.command == "run":
        if args.sglang_args[:1] == ["--"]:
            args.sglang_args = args.sglang_args[1:]
        return _run(args)
    return _compare(args)


if __name__ == "__main__":
    sys.exit(main())
