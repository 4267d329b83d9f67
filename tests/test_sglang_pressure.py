"""A real ``sglang serve`` with the plugin on the CPU under pressure (issue 40): a small pool, a burst of long requests
and SGLang's retraction switch (running decodes retracted and re-prefilled), aborts inside chunked prefills and
decodes, and a short soak with a leak check at every checkpoint (atom_mxfp4.evals.serve_pressure). The GPU runs the
full sizes (``scripts/serve_run.sh pressure``)."""

from __future__ import annotations

import importlib.util
import os

import pytest

if importlib.util.find_spec("sglang") is None or importlib.util.find_spec("uvicorn") is None:
    pytest.skip("SGLang's server is not installed (scripts/install.d/30-sglang.sh installs it)",
                allow_module_level=True)
from sglang_env import cpu_server, tiny_m3

from atom_mxfp4.evals.serve_check import Context, run_scenarios
from atom_mxfp4.evals.serve_pressure import first_difference
from atom_mxfp4.evals.serving import run_client

CHUNK = 256
POOL = 2048  # tokens: 8 requests of 384 tokens each (48 prompt + 336 output) need 1.5x this


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("pressure")
    model = tiny_m3.write(root / "tiny_m3")
    # SGLang admits a request only with its whole max_new_tokens free: the burst queues rather than running the pool
    # out (seen here: 4 of 8 admitted, no retraction), so its own test switch retracts running decodes
    with cpu_server(root, model, ["--kv-cache-dtype", "mxfp4", "--max-total-tokens", str(POOL),
                                  "--chunked-prefill-size", str(CHUNK)],
                    int(os.environ.get("ATOM_TEST_PRESSURE_PORT", "31741")),
                    env={"SGLANG_TEST_RETRACT": "1", "SGLANG_TEST_RETRACT_INTERVAL": "40"}) as srv:
        yield srv


def test_the_server_under_pressure(server):
    ctx = Context(server, vocab=256, chunk=CHUNK, max_prompt=300, exhaustion_requests=8, exhaustion_alone=1,
                  aborts=4, soak_requests=48, soak_every=16, soak_concurrency=8)
    report = run_scenarios(ctx, ("exhaustion", "aborts", "soak"))
    failed = {name: record for name, record in report.items() if not record["ok"]}
    assert not failed, f"{failed}\n--- server log tail ---\n{server.log_tail()}"
    exhaustion = report["exhaustion"]
    assert exhaustion["retracted_requests"] + exhaustion["retracted_requests_test_switch"] > 0
    assert report["aborts"]["aborted_before_first_token"] > 0
    assert len(report["soak"]["checkpoints"]) == 3


def test_first_difference_names_a_near_tie_and_nothing_else():
    def alone(tokens, tops):
        return {"output_ids": tokens, "meta_info": {"output_top_logprobs": tops}}
    tops = [[[-0.1, 5], [-2.0, 6]], [[-0.50, 7], [-0.55, 8]], [[-0.1, 9]]]
    assert first_difference([5, 7, 9], alone([5, 7, 9], tops)) == {"at": None, "gap": None, "near_tie": False}
    tie = first_difference([5, 8, 1], alone([5, 7, 9], tops))
    assert tie["at"] == 1 and tie["near_tie"] and abs(tie["gap"] - 0.05) < 1e-9
    assert not first_difference([6, 7, 9], alone([5, 7, 9], tops))["near_tie"]  # 1.9 nats apart: not rounding
    assert not first_difference([5, 7, 4], alone([5, 7, 9], tops))["near_tie"]  # not among the candidates
    assert first_difference([5, 7], alone([5, 7, 9], tops))["at"] == 2  # a shorter output is a difference


def test_sglangs_own_benchmark_client_drives_the_server(server, tmp_path):
    """atom_mxfp4.evals.serving's client run (python -m sglang.benchmark.serving, token-id prompts of exact length)
    against the real server: every request completes and the metrics are read back (the GPU runs the whole grid:
    scripts/serve_run.sh bench)."""
    model = server.args[server.args.index("--model-path") + 1]  # the client reads its tokenizer
    record = run_client(server, model, input_len=64, concurrency=2, prompts=4, work=tmp_path, timeout=300,
                        output_len=16)
    assert "error" not in record, record
    assert record["completed"] == 4 and record["total_output_tokens"] == 4 * 16
    assert record["output_throughput"] > 0 and record["mean_ttft_ms"] > 0 and record["p99_itl_ms"] > 0
    assert 1 <= record["max_running"] <= 2
