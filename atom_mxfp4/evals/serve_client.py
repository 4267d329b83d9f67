"""The client side of a real-server run: one ``sglang serve`` process, its HTTP calls, and the scenarios' context.

Shared by the scenario modules (atom_mxfp4.evals.serve_check, atom_mxfp4.evals.serve_pressure) and the serving
benchmark (atom_mxfp4.evals.serving); it imports none of them.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

SGLANG = [sys.executable, "-c", "import sys; from sglang.cli.main import main; sys.argv[0] = 'sglang'; main()"]
PAGE = 128


# ---------------------------------------------------------------------------------------------------- the server
@dataclass
class Server:
    """One ``sglang serve`` process (its own process group, so stopping it stops its scheduler too)."""

    args: list[str]
    env: dict
    log_path: Path
    host: str = "127.0.0.1"
    port: int = 31000
    proc: subprocess.Popen | None = None
    started: float = 0.0

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> "Server":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        argv = SGLANG + ["serve"] + self.args + ["--host", self.host, "--port", str(self.port)]
        self.log_path.write_text("$ " + " ".join(argv) + "\n")
        log = open(self.log_path, "a")
        self.proc = subprocess.Popen(argv, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.started = time.time()
        return self

    def wait_ready(self, timeout: float) -> float:
        """Seconds until ``/model_info`` answers and SGLang's warm-up request is done; raises with the log tail."""
        deadline = self.started + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode} during start-up:\n{self.log_tail()}")
            if "The server is fired up and ready to roll!" in self.log():
                return time.time() - self.started
            time.sleep(1.0)
        raise TimeoutError(f"server not ready after {timeout:.0f} s:\n{self.log_tail()}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log().splitlines()[-lines:])

    def stop(self) -> None:
        if not self.alive():
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)


# ---------------------------------------------------------------------------------------------------- HTTP
def call(url: str, path: str, payload: dict | None = None, timeout: float = 600) -> dict:
    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(url + path, data, {"Content-Type": "application/json"},
                                     method="GET" if payload is None else "POST")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        body = response.read()
    try:
        return json.loads(body) if body.strip() else {}
    except json.JSONDecodeError:  # some endpoints (/flush_cache) answer in plain text
        return {"text": body.decode(errors="replace").strip()}


def generate(url: str, ids: list[int], max_new_tokens: int, logprobs: bool = False, hidden: bool = False) -> dict:
    payload = {"input_ids": ids, "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 0.0,
                                                     "ignore_eos": True}}
    if logprobs:
        payload.update(return_logprob=True, top_logprobs_num=5)
    if hidden:
        payload["return_hidden_states"] = True
    return call(url, "/generate", payload)


def stream(url: str, ids: list[int], max_new_tokens: int, cancel_after: int | None = None, on_chunk=None,
           rid: str | None = None) -> dict:
    """Stream one request; ``cancel_after`` chunks, close the connection (SGLang aborts the request). ``rid``: the
    request's id (``/abort_request`` names it). ``finish``: the last chunk's finish reason ("length", "abort", ...);
    ``streamed_error``: the server streamed an error object."""
    host, port = url.split("//")[1].split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=600)
    payload = {"input_ids": ids, "stream": True, "sampling_params": {
        "max_new_tokens": max_new_tokens, "temperature": 0.0, "ignore_eos": True}}
    if rid is not None:
        payload["rid"] = rid
    body = json.dumps(payload)
    connection.request("POST", "/generate", body, {"Content-Type": "application/json"})
    response = connection.getresponse()
    chunks, finished, last = 0, False, None
    try:
        for line in response:
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            if line == b"data: [DONE]":
                finished = True
                break
            last = json.loads(line[5:])
            chunks += 1
            if on_chunk is not None:
                on_chunk()
            if cancel_after is not None and chunks >= cancel_after:
                break
    finally:
        connection.close()
    meta = (last or {}).get("meta_info", {})
    return {"status": response.status, "chunks": chunks, "finished": finished,
            "tokens": meta.get("completion_tokens", 0), "cancelled": cancel_after is not None and not finished,
            "finish": (meta.get("finish_reason") or {}).get("type"), "streamed_error": "error" in (last or {})}


def load(url: str) -> dict:
    return call(url, "/v1/loads?include=core,memory")["loads"][0]


def wait_idle(url: str, timeout: float = 120) -> dict:
    deadline = time.time() + timeout
    state = load(url)
    while time.time() < deadline and (state["num_running_reqs"] or state["num_waiting_reqs"]):
        time.sleep(0.5)
        state = load(url)
    return state


def prompt(rng: random.Random, length: int, vocab: int) -> list[int]:
    return [rng.randrange(3, vocab) for _ in range(length)]


# ---------------------------------------------------------------------------------------------- the scenarios' context
@dataclass
class Context:
    server: Server
    vocab: int = 256
    chunk: int | None = None  # the server's chunked prefill size (None: read from /get_server_info)
    burst: int = 64
    max_prompt: int = 2048
    agreement_prompts: int = 8
    long_decode: int = 1024  # tokens of the decode the mixed scenario's prefills run beside
    context: int = 16384  # the model's context length (tests/sglang_env/tiny_m3.py)
    hidden: bool = False  # agreement also returns hidden states (the server needs --enable-return-hidden-states)
    # the pressure scenarios (atom_mxfp4.evals.serve_pressure)
    exhaustion_requests: int = 16  # long requests whose KV need is 1.5x the pool
    exhaustion_alone: int | None = None  # how many of them are re-run alone to compare (None: all)
    aborts: int = 24  # rounds of the abort loop (half in a chunked prefill, half in a decode)
    soak_requests: int = 2000
    soak_every: int = 200  # requests between the soak's checkpoints
    soak_concurrency: int = 32
    rng: random.Random = field(default_factory=lambda: random.Random(0))
