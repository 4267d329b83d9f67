"""Serving benchmark with SGLang's own client (issue 40): bf16, fp8 and mxfp4 KV caches served by the same SGLang on
the same GPU and weights, measured by ``python -m sglang.benchmark.serving`` as users measure a deployment.

Subcommands (each writes JSON lines to ``--out``/results.jsonl; the report reads every line there):

- ``grid``: one server per ``--kv`` (the same ``--mem-fraction-static``), then for each input length (``--inputs``,
  default 2K / 8K / 32K) and concurrency (``--concurrency``, default 1 / 8 / 64 / 256) one client run: the
  ``random-ids`` dataset sent as token ids (``--tokenize-prompt``: exact lengths, no dataset download), output 256
  tokens (``ignore_eos``), request rate inf, ``max(2 x concurrency, 8)`` prompts, each run after a warm-up of its
  shapes (``warm_up``: nothing compiled at first use is timed). Kept per run: output tokens/s,
  mean / p99 TTFT and ITL, and the most requests the server ran at once and kept waiting (``/v1/loads`` sampled
  during the run); per server the pool's tokens and bytes per token.
- ``capacity``: the same KV budget in bytes for every ``--kv`` (``--max-total-tokens`` = budget / that server's bytes
  per token, from its grid run or a probe start): the budget holds ``--bf16-fits`` requests of ``--capacity-input`` +
  256 tokens in bf16; ``--capacity-requests`` (default 4x that) are sent at once. mxfp4 should run about 3x as many at
  once and show it in output tokens/s.
- ``report``: tables (markdown), the plot (output tokens/s against concurrency per input length) and ledger rows
  (``ledger_rows.csv``, atom_mxfp4.evals.ledger's columns) from results.jsonl.

Usage (a GPU with SGLang installed; scripts/serve_run.sh bench runs it on the lent GPU):
``python -m atom_mxfp4.evals.serving grid --model DIR --out DIR --kv bf16,fp8_e4m3,mxfp4 -- <common sglang args>``
"""

from __future__ import annotations

import argparse
import collections
import csv
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..launch import LOG_COMPILES_ENV
from .ledger import COLUMNS, validate
from .serve_client import Server, call, generate, load, prompt

KV_ARGS = {  # the server of each KV cache dtype: SGLang's own attention for bf16 / fp8, the plugin's for mxfp4
    "bf16": ["--kv-cache-dtype", "bf16", "--attention-backend", "triton"],
    "fp8_e4m3": ["--kv-cache-dtype", "fp8_e4m3", "--attention-backend", "triton"],
    "mxfp4": ["--kv-cache-dtype", "mxfp4"],
}
OUTPUT_LEN = 256
METRICS = ("output_throughput", "mean_ttft_ms", "p99_ttft_ms", "mean_itl_ms", "p99_itl_ms", "completed",
           "total_output_tokens", "duration")
CLIENT = [sys.executable, "-m", "sglang.benchmark.serving"]
WARMUP_OUTPUT = 8  # tokens per warm-up request
WARMUP_REQUESTS = 16  # at most this many at once (a prefill chunk of 8K+ prompts holds 1-2 of them; decode is graphed)
WARMUP_VOCAB = 256  # warm-up prompt ids below this (every test tokenizer has them)
# SGLang logs every Triton compile after its start-up (its own kernels and ours) taking at least this many seconds
# (sglang.srt.utils.triton_load_watch); the bench servers log every one, and each run counts those inside it
COMPILE_LOG_SECONDS = "0.05"
COMPILE_LINE = re.compile(r"Triton kernel '([^']+)' took ([0-9.]+) s to compile after serving started")
# our launcher's line for each specialisation it compiles (atom_mxfp4.launch, ATOM_MXFP4_LOG_COMPILES): which one
SPECIALISATION_LINE = re.compile(r"atom_mxfp4 compiled (\S+) in ([0-9.]+) s \(\d+ specialisations? of it in this "
                                 r"process\): ([^\n]*)")


def client_command(url: str, model: str, input_len: int, output_len: int, concurrency: int, prompts: int,
                   output_file: Path, seed: int = 0) -> list[str]:
    """SGLang's benchmark client for one run: token-id prompts of exactly ``input_len`` tokens, all sent at once
    (request rate inf) with at most ``concurrency`` in flight."""
    return CLIENT + ["--backend", "sglang", "--base-url", url, "--model", model, "--tokenizer", model,
                     "--dataset-name", "random-ids", "--tokenize-prompt", "--random-input-len", str(input_len),
                     "--random-output-len", str(output_len), "--random-range-ratio", "1.0",
                     "--num-prompts", str(prompts), "--max-concurrency", str(concurrency), "--request-rate", "inf",
                     "--output-file", str(output_file), "--disable-tqdm", "--seed", str(seed)]


class LoadSampler:
    """The most running and waiting requests ``/v1/loads`` reported while the block ran (every ``interval`` s)."""

    def __init__(self, url: str, interval: float = 0.25):
        self.url, self.interval, self.running, self.waiting = url, interval, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self):
        while not self._stop.is_set():
            try:
                state = load(self.url)
                self.running = max(self.running, state["num_running_reqs"])
                self.waiting = max(self.waiting, state["num_waiting_reqs"])
            except Exception:  # noqa: BLE001 (a busy server may miss a poll; the next one counts)
                pass
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(10)


def warm_up(server: Server, input_len: int, concurrency: int, seed: int = 1) -> float:
    """The measured run's shapes once before it (every server alike): ``concurrency`` requests (at most
    ``WARMUP_REQUESTS``) of ``input_len`` random ids at once, ``WARMUP_OUTPUT`` tokens each, then ``/flush_cache``.
    Kernels compiled at their first use of a shape (ours and SGLang's Triton kernels in the eager prefill path) are
    then not timed: without it the H100 grid of 2026-12-07 had a 3.6 s first request at one 8K prompt. Returns its
    seconds."""
    concurrency = min(concurrency, WARMUP_REQUESTS)
    rng = random.Random(seed * 1_000_003 + input_len * 7 + concurrency)
    prompts = [prompt(rng, input_len, WARMUP_VOCAB) for _ in range(concurrency)]
    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(lambda ids: generate(server.url, ids, WARMUP_OUTPUT), prompts))
    call(server.url, "/flush_cache", {})
    return round(time.perf_counter() - started, 1)


def run_client(server: Server, model: str, input_len: int, concurrency: int, prompts: int, work: Path,
               timeout: float, output_len: int = OUTPUT_LEN, warmup: bool = True) -> dict:
    """One client run against ``server``: SGLang's metrics (METRICS) and the sampled load; ``error`` on failure.
    ``warmup``: the run's shapes are served once before it (``warm_up``; its seconds in ``warmup_seconds``)."""
    output_file = work / f"client-{input_len}-{concurrency}-{prompts}-{time.time_ns()}.jsonl"
    command = client_command(server.url, model, input_len, output_len, concurrency, prompts, output_file)
    record = {"input_len": input_len, "output_len": output_len, "concurrency": concurrency, "prompts": prompts,
              "command": " ".join(command[2:])}
    if warmup:
        try:
            record["warmup_seconds"] = warm_up(server, input_len, concurrency)
        except Exception as error:  # noqa: BLE001 (reported as the run's error; the next run goes on)
            return {**record, "error": f"warm-up failed: {type(error).__name__}: {error}"}
    log_start = len(server.log())
    with LoadSampler(server.url) as sampled:
        started = time.perf_counter()
        try:
            # the server's environment: what lets SGLang import there lets its client import (tests/sglang_env)
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=server.env)
        except subprocess.TimeoutExpired:
            return {**record, "error": f"the client ran past {timeout} s"}
        record["seconds"] = round(time.perf_counter() - started, 1)
    record.update(max_running=sampled.running, max_waiting=sampled.waiting, **compiles(server.log()[log_start:]))
    if done.returncode != 0 or not output_file.exists():
        return {**record, "error": f"client exit {done.returncode}: {(done.stderr or done.stdout)[-600:]}"}
    result = json.loads(output_file.read_text().strip().splitlines()[-1])
    record.update({name: result.get(name) for name in METRICS})
    if record["completed"] != prompts:
        record["error"] = f"{record['completed']} of {prompts} requests completed"
    return record


def compiles(log: str) -> dict:
    """The Triton compiles SGLang logged in ``log`` (a stretch of a server's log): how many, their seconds, and the
    kernels (a compile inside a timed run stalls every request in it)."""
    found = COMPILE_LINE.findall(log)
    return {"compiles": len(found), "compile_seconds": round(sum(float(seconds) for _, seconds in found), 2),
            "compiled": dict(collections.Counter(name for name, _ in found)),
            "specialisations": [f"{name} ({seconds} s): {spec}" for name, seconds, spec in
                                SPECIALISATION_LINE.findall(log)]}


def _start(kv: str, model: str, common: list[str], extra: list[str], out: Path, port: int, timeout: float) -> tuple:
    env = {**os.environ, "SGLANG_TRITON_SLOW_COMPILE_THRESHOLD_SECS": COMPILE_LOG_SECONDS,
           LOG_COMPILES_ENV: COMPILE_LOG_SECONDS}  # and which specialisation of ours (launch.describe)
    server = Server(["--model-path", model] + common + KV_ARGS[kv] + extra, env,
                    out / f"server-{kv}-{port}.log", port=port).start()
    try:  # a start that fails, times out or is interrupted (SIGTERM) leaves no server holding the port and the GPU
        ready = server.wait_ready(timeout)
        state = load(server.url)
    except BaseException:
        server.stop()
        raise
    tokens, gib = state["max_total_num_tokens"], state["memory"]["kv_cache_gb"]
    return server, {"kv": kv, "ready_seconds": round(ready, 1), "pool_tokens": tokens, "kv_cache_gib": gib,
                    "bytes_per_token": round(gib * 2**30 / tokens, 1) if tokens else None}


def _append(out: Path, record: dict) -> None:
    with open(out / "results.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")
    shown = {k: record.get(k) for k in ("mode", "kv", "input_len", "concurrency", "output_throughput", "mean_ttft_ms",
                                        "max_running", "max_waiting", "error") if record.get(k) is not None}
    print(f"[serving] {json.dumps(shown)}", flush=True)


def cmd_grid(args) -> int:
    out, status = Path(args.out), 0
    out.mkdir(parents=True, exist_ok=True)
    for kv in args.kv:
        server, info = _start(kv, args.model, args.sglang_args, [], out, args.port, args.start_timeout)
        try:
            _append(out, {"mode": "server", **info})
            for input_len in args.inputs:
                for concurrency in args.concurrency:
                    prompts = max(2 * concurrency, 8)
                    record = run_client(server, args.model, input_len, concurrency, prompts, out, args.client_timeout)
                    _append(out, {"mode": "grid", "kv": kv, "pool_tokens": info["pool_tokens"], **record})
                    status |= "error" in record
        finally:
            server.stop()
    return status


def read_results(out: Path) -> list[dict]:
    path = Path(out) / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def capacity_tokens(budget_bytes: float, bytes_per_token: float) -> int:
    """``--max-total-tokens`` for a KV budget: whole 128-token pages of the budget at the server's bytes per token."""
    return int(budget_bytes / bytes_per_token) // 128 * 128


def _bytes_per_token(text: str) -> dict:
    """``KV=BYTES,...`` -> {kv: bytes}: each KV one of KV_ARGS, each value a positive number."""
    found = {}
    for item in filter(None, text.split(",")):
        kv, _, value = item.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = 0.0
        if kv not in KV_ARGS or not number > 0:
            raise argparse.ArgumentTypeError(f"--bytes-per-token entries must be KV=BYTES with KV one of "
                                             f"{list(KV_ARGS)} and BYTES > 0, got {item!r}")
        found[kv] = number
    return found


def cmd_capacity(args) -> int:
    out, status = Path(args.out), 0
    out.mkdir(parents=True, exist_ok=True)
    known = {r["kv"]: r["bytes_per_token"] for r in read_results(out) if r.get("mode") == "server"}
    known.update(args.bytes_per_token)  # measured before (the ledger's `serve pool` rows): no server start for them
    for kv in {"bf16", *args.kv}:  # bf16's bytes per token set the budget
        if kv not in known:
            server, info = _start(kv, args.model, args.sglang_args, [], out, args.port, args.start_timeout)
            server.stop()
            _append(out, {"mode": "server", **info})
            known[kv] = info["bytes_per_token"]
    per_request = args.capacity_input + args.capacity_output
    budget = args.bf16_fits * per_request * known["bf16"] * 1.02  # 2%: the bf16 pool's page rounding
    requests = args.capacity_requests or 4 * args.bf16_fits
    for kv in args.kv:
        tokens = capacity_tokens(budget, known[kv])
        server, info = _start(kv, args.model, args.sglang_args, ["--max-total-tokens", str(tokens)], out,
                              args.port, args.start_timeout)
        try:
            record = run_client(server, args.model, args.capacity_input, requests, requests, out, args.client_timeout,
                                output_len=args.capacity_output)
            _append(out, {"mode": "capacity", "kv": kv, "budget_gib": round(budget / 2**30, 3),
                          "max_total_tokens": tokens, "pool_tokens": info["pool_tokens"],
                          "fits_at_once": info["pool_tokens"] // per_request, **record})
            status |= "error" in record
        finally:
            server.stop()
    return status


# ---- report ----------------------------------------------------------------------------------------------------
def _fmt(value, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}" if isinstance(value, float) else f"{value:,}"


def report_tables(results: list[dict]) -> str:
    grid = [r for r in results if r.get("mode") == "grid" and "error" not in r]
    kvs = [kv for kv in KV_ARGS if any(r["kv"] == kv for r in grid)]
    lines = []
    for input_len in sorted({r["input_len"] for r in grid}):
        lines += [f"### input {input_len:,} tokens, output {OUTPUT_LEN}", "",
                  "| concurrency | " + " | ".join(f"{kv} tok/s" for kv in kvs)
                  + " | mxfp4 / bf16 | mxfp4 / fp8 | " + " | ".join(f"{kv} TTFT mean / p99 ms" for kv in kvs)
                  + " | " + " | ".join(f"{kv} ITL mean / p99 ms" for kv in kvs) + " | "
                  + " | ".join(f"{kv} most at once (waiting)" for kv in kvs) + " |",
                  "|" + "---:|" * (1 + 3 * len(kvs) + 2 + len(kvs))]
        for concurrency in sorted({r["concurrency"] for r in grid if r["input_len"] == input_len}):
            row = {r["kv"]: r for r in grid if r["input_len"] == input_len and r["concurrency"] == concurrency}
            tps = {kv: row[kv]["output_throughput"] if kv in row else None for kv in kvs}
            ratio = [f"{tps['mxfp4'] / tps[b]:.2f}x" if tps.get("mxfp4") and tps.get(b) else "-"
                     for b in ("bf16", "fp8_e4m3")]
            cells = ([_fmt(tps[kv]) for kv in kvs] + ratio
                     + [f"{_fmt(row[kv]['mean_ttft_ms'])} / {_fmt(row[kv]['p99_ttft_ms'])}" if kv in row else "-"
                        for kv in kvs]
                     + [f"{_fmt(row[kv]['mean_itl_ms'], 2)} / {_fmt(row[kv]['p99_itl_ms'], 2)}" if kv in row else "-"
                        for kv in kvs]
                     + [f"{row[kv]['max_running']} ({row[kv]['max_waiting']})" if kv in row else "-" for kv in kvs])
            lines.append(f"| {concurrency} | " + " | ".join(cells) + " |")
        lines.append("")
    servers = {r["kv"]: r for r in results if r.get("mode") == "server"}
    if servers:
        longest = max((r["input_len"] for r in grid), default=None)
        lines += ["### the pools (same --mem-fraction-static)", "",
                  "| KV cache | pool tokens | bytes / token | requests of the longest input + output that fit at "
                  "once | most run at once at the longest input (client runs) |", "|---|---:|---:|---:|---:|"]
        for kv, s in servers.items():
            fits = s["pool_tokens"] // (longest + OUTPUT_LEN) if longest else None
            held = max((r["max_running"] for r in grid if r["kv"] == kv and r["input_len"] == longest), default=None)
            lines.append(f"| {kv} | {_fmt(s['pool_tokens'])} | {_fmt(s['bytes_per_token'])} | {_fmt(fits)} | "
                         f"{_fmt(held)} |")
        lines.append("")
    capacity = [r for r in results if r.get("mode") == "capacity"]
    if capacity:
        lines += [f"### the same KV budget ({capacity[0]['budget_gib']} GiB), {capacity[0]['prompts']} requests of "
                  f"{capacity[0]['input_len']:,} + {capacity[0].get('output_len', OUTPUT_LEN)} tokens at once", "",
                  "| KV cache | max-total-tokens | fit at once | most run at once (waiting) | output tok/s | "
                  "mean TTFT ms | x bf16 tok/s |", "|---|---:|---:|---:|---:|---:|---:|"]
        bf16 = next((r.get("output_throughput") for r in capacity if r["kv"] == "bf16"), None)
        for r in capacity:
            tps = r.get("output_throughput")
            lines.append(f"| {r['kv']} | {_fmt(r['max_total_tokens'])} | {_fmt(r['fits_at_once'])} | "
                         f"{r['max_running']} ({r['max_waiting']}) | {_fmt(tps)} | {_fmt(r.get('mean_ttft_ms'))} | "
                         + (f"{tps / bf16:.2f}x" if tps and bf16 else "-") + (f" ({r['error']})" if "error" in r
                                                                              else "") + " |")
    stalled = [r for r in results if r.get("compiles")]
    if stalled:
        lines += ["", "Triton compiles inside timed runs (each stalls the server): "
                  + "; ".join(f"{r['kv']} {r['input_len']}x{r['concurrency']}: {r['compiles']} ({r['compile_seconds']} "
                              f"s: {', '.join(sorted(r['compiled']))})" for r in stalled)]
        lines += [f"- {r['kv']} {r['input_len']}x{r['concurrency']}, ours: {spec}" for r in stalled
                  for spec in r.get("specialisations", [])]
    failed = [r for r in results if "error" in r]
    if failed:
        lines += ["", f"{len(failed)} run(s) failed: "
                  + "; ".join(f"{r.get('kv')} {r.get('input_len')}x{r.get('concurrency')}: {r['error'][:120]}"
                              for r in failed[:6])]
    return "\n".join(lines) + "\n"


def ledger_rows(results: list[dict], date: str, commit: str, gpu: str, command: str) -> list[dict]:
    rows = []
    for r in results:
        if r.get("mode") not in ("grid", "capacity") or "error" in r:
            continue
        shape = (f"input={r['input_len']} output={r['output_len']} concurrency={r['concurrency']}"
                 + (f" kv_budget_gib={r['budget_gib']}" if r["mode"] == "capacity" else ""))
        for metric, unit in (("output_throughput", "tok/s"), ("mean_ttft_ms", "ms"), ("p99_ttft_ms", "ms"),
                             ("mean_itl_ms", "ms"), ("p99_itl_ms", "ms"), ("max_running", "requests")):
            if r.get(metric) is not None:
                rows.append({"date": date, "commit": commit, "gpu": gpu, "op": f"serve {r['mode']}", "shape": shape,
                             "backend": f"sglang {r['kv']}", "metric": metric, "value": r[metric], "unit": unit,
                             "command": command, "note": "sglang.benchmark.serving, tiny MiniMax-M3 (TP4 rank "
                             "attention geometry, dummy weights)"})
    return rows


def plot(results: list[dict], path: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    grid = [r for r in results if r.get("mode") == "grid" and "error" not in r]
    inputs = sorted({r["input_len"] for r in grid})
    if not inputs:
        return False
    fig, axes = plt.subplots(1, len(inputs), figsize=(5 * len(inputs), 4), squeeze=False)
    for ax, input_len in zip(axes[0], inputs):
        for kv in KV_ARGS:
            runs = sorted((r["concurrency"], r["output_throughput"]) for r in grid
                          if r["kv"] == kv and r["input_len"] == input_len)
            if runs:
                ax.plot(*zip(*runs), marker="o", label=kv)
        ax.set_xscale("log", base=2)
        ax.set_title(f"input {input_len:,} + output {OUTPUT_LEN}")
        ax.set_xlabel("max concurrency")
        ax.set_ylabel("output tokens / s")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def cmd_report(args) -> int:
    out = Path(args.out)
    results = read_results(out)
    if not results:
        print(f"serving report: no results in {out / 'results.jsonl'}")
        return 1
    table = report_tables(results)
    (out / "serving.md").write_text(table)
    print(table)
    plot(results, out / "serving.png")
    rows = ledger_rows(results, args.date or time.strftime("%Y-%m-%d"), args.commit, args.gpu, args.command_line)
    with open(out / "ledger_rows.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS)
        writer.writeheader()
        writer.writerows(validate(row) for row in rows)
    print(f"[serving] {len(rows)} ledger rows in {out / 'ledger_rows.csv'}")
    return 0


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def _kvs(text: str) -> list[str]:
    kvs = [v.strip() for v in text.split(",") if v.strip()]
    bad = sorted(set(kvs) - set(KV_ARGS))
    if bad or not kvs:
        raise argparse.ArgumentTypeError(f"must be a comma list of {list(KV_ARGS)}, got {text!r}")
    return kvs


def exit_on_sigterm() -> None:
    """SIGTERM (``timeout``, a device queue's step limit) exits through Python, so each server's ``finally: stop()``
    runs: a server left behind in its own session would hold the port and the GPU memory of the next run."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m atom_mxfp4.evals.serving", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("grid", "capacity"):
        p = sub.add_parser(name)
        p.add_argument("--model", required=True, help="the checkpoint folder (tokenizer included)")
        p.add_argument("--out", required=True)
        p.add_argument("--kv", type=_kvs, default=list(KV_ARGS), help=f"comma list of {list(KV_ARGS)}")
        p.add_argument("--port", type=int, default=31100)
        p.add_argument("--start-timeout", type=float, default=600)
        p.add_argument("--client-timeout", type=float, default=600, help="seconds per client run")
        p.add_argument("sglang_args", nargs=argparse.REMAINDER, help="after --: arguments every server gets")
    grid = sub.choices["grid"]
    grid.add_argument("--inputs", type=_ints, default=[2048, 8192, 32768])
    grid.add_argument("--concurrency", type=_ints, default=[1, 8, 64, 256])
    capacity = sub.choices["capacity"]
    capacity.add_argument("--capacity-input", type=int, default=32768)
    capacity.add_argument("--bf16-fits", type=int, default=8, help="the budget: this many requests fit in bf16")
    capacity.add_argument("--capacity-requests", type=int, help="requests sent at once (default 4 x --bf16-fits)")
    capacity.add_argument("--capacity-output", type=int, default=OUTPUT_LEN,
                          help="output tokens per request (longer: decode weighs more against prefill)")
    capacity.add_argument("--bytes-per-token", type=_bytes_per_token, default={}, metavar="KV=BYTES,...",
                          help="each server's KV bytes per token measured before (e.g. bf16=5632,mxfp4=1880): its "
                               "pool-measuring start is skipped")
    report = sub.add_parser("report")
    report.add_argument("--out", required=True)
    report.add_argument("--commit", default="unknown")
    report.add_argument("--gpu", default="unknown")
    report.add_argument("--date")
    report.add_argument("--command", dest="command_line", default="python -m atom_mxfp4.evals.serving")
    args = parser.parse_args(argv)
    if args.command == "report":
        return cmd_report(args)
    if args.sglang_args[:1] == ["--"]:
        args.sglang_args = args.sglang_args[1:]
    exit_on_sigterm()
    return cmd_grid(args) if args.command == "grid" else cmd_capacity(args)


if __name__ == "__main__":
    sys.exit(main())
