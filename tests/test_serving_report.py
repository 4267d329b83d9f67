"""The serving benchmark's report (atom_mxfp4.evals.serving) from results of three servers: tables with the ratios,
the pools, the capacity-bound run, ledger rows that the ledger accepts; the client's command line."""

from __future__ import annotations

from atom_mxfp4.evals import ledger
import os

from atom_mxfp4.evals.serving import capacity_tokens, client_command, ledger_rows, report_tables


def _run(kv, input_len, concurrency, tps, running, waiting=0, mode="grid", **extra):
    return {"mode": mode, "kv": kv, "input_len": input_len, "output_len": 256, "concurrency": concurrency,
            "prompts": max(2 * concurrency, 8), "output_throughput": tps, "mean_ttft_ms": 10.0, "p99_ttft_ms": 20.0,
            "mean_itl_ms": 1.5, "p99_itl_ms": 3.0, "completed": max(2 * concurrency, 8), "max_running": running,
            "max_waiting": waiting, **extra}


RESULTS = [
    {"mode": "server", "kv": "bf16", "pool_tokens": 330_000, "bytes_per_token": 5632.0},
    {"mode": "server", "kv": "fp8_e4m3", "pool_tokens": 660_000, "bytes_per_token": 2816.0},
    {"mode": "server", "kv": "mxfp4", "pool_tokens": 990_000, "bytes_per_token": 1880.0},
    _run("bf16", 32768, 64, 1000.0, 10, 54), _run("fp8_e4m3", 32768, 64, 1500.0, 20, 44),
    _run("mxfp4", 32768, 64, 3000.0, 30, 34),
    _run("bf16", 2048, 8, 800.0, 8), _run("mxfp4", 2048, 8, 840.0, 8),
    _run("mxfp4", 32768, 256, 0.0, 0, error="client exit 1: boom"),
    _run("bf16", 32768, 32, 900.0, 8, 24, mode="capacity", budget_gib=2.3, max_total_tokens=270_336, fits_at_once=8),
    _run("mxfp4", 32768, 32, 2700.0, 24, 8, mode="capacity", budget_gib=2.3, max_total_tokens=810_880,
         fits_at_once=24),
]


def test_the_report_puts_the_three_servers_side_by_side():
    text = report_tables(RESULTS)
    assert "| 64 | 1,000.0 | 1,500.0 | 3,000.0 | 3.00x | 2.00x |" in text  # mxfp4 / bf16, mxfp4 / fp8
    assert "| 8 | 800.0 | - | 840.0 | 1.05x | - |" in text  # no fp8 run at 2K: no number, no ratio made up
    assert "| mxfp4 | 990,000 | 1,880.0 | 29 | 30 |" in text  # 990,000 // (32768 + 256) fit; 30 ran at once
    assert "| mxfp4 | 810,880 | 24 | 24 (8) | 2,700.0 | 10.0 | 3.00x |" in text
    assert "1 run(s) failed: mxfp4 32768x256: client exit 1: boom" in text


def test_ledger_rows_are_rows_the_ledger_takes_and_skip_failed_runs():
    rows = ledger_rows(RESULTS, "2026-12-06", "abc1234", "NVIDIA H100", "python -m atom_mxfp4.evals.serving grid")
    assert rows and all(ledger.validate(row) for row in rows)
    assert not any("concurrency=256" in row["shape"] for row in rows)
    tps = [r for r in rows if r["metric"] == "output_throughput" and r["op"] == "serve capacity"]
    assert {r["backend"]: r["value"] for r in tps} == {"sglang bf16": 900.0, "sglang mxfp4": 2700.0}


def test_capacity_tokens_are_whole_pages_of_the_budget():
    budget, per_token = 10 * 2**20, 1880.0
    tokens = capacity_tokens(budget, per_token)
    assert tokens % 128 == 0 and tokens * per_token <= budget < (tokens + 128) * per_token


def test_the_client_sends_exact_length_token_prompts_all_at_once():
    cmd = client_command("http://127.0.0.1:9", "/m", 8192, 256, 64, 128, "/tmp/o.jsonl")
    joined = " ".join(cmd)
    for part in ("-m sglang.benchmark.serving", "--backend sglang", "--dataset-name random-ids", "--tokenize-prompt",
                 "--random-input-len 8192", "--random-output-len 256", "--random-range-ratio 1.0",
                 "--num-prompts 128", "--max-concurrency 64", "--request-rate inf", "--tokenizer /m"):
        assert part in joined, part


def test_a_terminated_run_stops_its_server(tmp_path):
    """``timeout`` ends a grid run with SIGTERM: the run exits through Python, so the server it started (a process of
    its own session, standing in here for ``sglang serve``) is stopped and does not hold the next run's port / GPU."""
    import signal
    import subprocess
    import sys
    import time

    pid_file = tmp_path / "server.pid"
    script = f"""
import sys, time
from pathlib import Path
from atom_mxfp4.evals.serve_client import Server
import os

from atom_mxfp4.evals.serving import exit_on_sigterm
exit_on_sigterm()
server = Server([], {{}}, Path({str(tmp_path)!r}) / "log")
server.start = None
import subprocess
server.proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
Path({str(pid_file)!r}).write_text(str(server.proc.pid))
try:
    time.sleep(120)
finally:
    server.stop()
"""
    run = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.time() + 60
    while not pid_file.exists() and time.time() < deadline:
        time.sleep(0.1)
    server_pid = int(pid_file.read_text())
    run.send_signal(signal.SIGTERM)
    assert run.wait(60) == 128 + signal.SIGTERM
    try:  # the stand-in server was stopped (and reaped by its parent before it exited)
        os.kill(server_pid, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    assert not alive, "the server outlived the terminated run"


def test_a_server_that_does_not_come_up_is_stopped(tmp_path, monkeypatch):
    """A start that fails or times out (the lent GPU's fp8 server once did not answer within the run's limit) stops
    the server before the error goes up: nothing keeps the port and GPU memory of the next server."""
    import pytest

    from atom_mxfp4.evals import serving

    stopped = []

    class NeverReady:
        def __init__(self, args, env, log_path, port):
            self.args = args

        def start(self):
            return self

        def wait_ready(self, timeout):
            raise TimeoutError(f"server not ready after {timeout:.0f} s")

        def stop(self):
            stopped.append(self.args)

    monkeypatch.setattr(serving, "Server", NeverReady)
    with pytest.raises(TimeoutError, match="not ready"):
        serving._start("fp8_e4m3", "model", ["--load-format", "dummy"], [], tmp_path, 31100, 5)
    assert len(stopped) == 1 and "fp8_e4m3" in stopped[0]


def test_compiles_inside_a_run_are_counted_and_reported():
    """SGLang logs each Triton compile after its start-up (sglang.srt.utils.triton_load_watch); a run counts the ones
    inside it and the report names them (a compile stalls every request of the run)."""
    from atom_mxfp4.evals.serving import compiles
    log = ("[2026-12-07 13:04:00] Triton kernel '_topk_index_kernel' took 7.94 s to compile after serving started. "
           "Serving-time compilation can stall the engine; pre-compile it during engine init.\n"
           "[2026-12-07 13:04:01] Decode batch, #running-req: 1\n"
           "[2026-12-07 13:04:06] Triton kernel '_score_kernel' took 0.50 s to compile after serving started. x\n"
           "[2026-12-07 13:04:07] Triton kernel '_topk_index_kernel' took 1.06 s to compile after serving started. x\n")
    log += ("[2026-12-07 13:04:07] atom_mxfp4 compiled _pa_decode_kernel in 2.41 s (3 specialisations of it in this "
            "process): out_ptr:bfloat16 num_kv_heads=1 num_splits%16 SPLIT=True TAIL=0\n")
    found = compiles(log)
    assert found == {"compiles": 3, "compile_seconds": 9.5, "compiled": {"_topk_index_kernel": 2, "_score_kernel": 1},
                     "specialisations": ["_pa_decode_kernel (2.41 s): out_ptr:bfloat16 num_kv_heads=1 num_splits%16 "
                                         "SPLIT=True TAIL=0"]}
    assert compiles("[..] Decode batch\n") == {"compiles": 0, "compile_seconds": 0.0, "compiled": {},
                                               "specialisations": []}
    results = RESULTS + [_run("mxfp4", 2048, 1, 100.0, 1, **found)]
    assert ("Triton compiles inside timed runs (each stalls the server): mxfp4 2048x1: 3 (9.5 s: _score_kernel, "
            "_topk_index_kernel)") in report_tables(results)
    assert ("- mxfp4 2048x1, ours: _pa_decode_kernel (2.41 s): out_ptr:bfloat16 num_kv_heads=1 num_splits%16 "
            "SPLIT=True TAIL=0") in report_tables(results)


def test_capacity_run_with_known_bytes_per_token_and_a_longer_output(tmp_path, monkeypatch):
    """``--bytes-per-token`` skips the servers started only to measure their pools; ``--capacity-output`` sets every
    request's output length (the budget: bf16-fits requests of input + output tokens); the table names it."""
    import pytest

    from atom_mxfp4.evals import serving

    started, clients = [], []

    class Fake:
        def stop(self):
            pass

    def start(kv, model, sglang_args, extra, out, port, timeout):
        started.append((kv, extra))
        return Fake(), {"kv": kv, "pool_tokens": int(extra[1]), "bytes_per_token": 1.0}

    def client(server, model, input_len, concurrency, prompts, out, timeout, output_len=256):
        clients.append(output_len)
        return {"input_len": input_len, "output_len": output_len, "concurrency": concurrency, "prompts": prompts,
                "output_throughput": 1.0, "max_running": 1, "max_waiting": 0, "completed": prompts}

    monkeypatch.setattr(serving, "_start", start)
    monkeypatch.setattr(serving, "run_client", client)
    assert serving.main(["capacity", "--model", "m", "--out", str(tmp_path), "--kv", "bf16,mxfp4",
                         "--capacity-input", "1024", "--capacity-output", "2048", "--bf16-fits", "2",
                         "--bytes-per-token", "bf16=5632,mxfp4=1880"]) == 0
    assert [kv for kv, _ in started] == ["bf16", "mxfp4"] and all(e[0] == "--max-total-tokens" for _, e in started)
    budget = 2 * (1024 + 2048) * 5632 * 1.02
    assert int(started[0][1][1]) == serving.capacity_tokens(budget, 5632) and clients == [2048, 2048]
    table = report_tables(serving.read_results(tmp_path))
    assert "8 requests of 1,024 + 2048 tokens at once" in table
    with pytest.raises(SystemExit):
        serving.main(["capacity", "--model", "m", "--out", str(tmp_path), "--bytes-per-token", "bf16=0"])
