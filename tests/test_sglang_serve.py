"""A real ``sglang serve`` with the plugin on the CPU (torch kernels), default settings: radix cache on (SGLang's Rust
tree core), chunked prefill, continuous batching, a burst of concurrent requests with cancels, leak checks.

The checkpoint carries the MXFP4 KV flag (``atom-mxfp4 config enable-kv``) and the server gets no
``--kv-cache-dtype``: the flag resolves to mxfp4 in the server process and reaches the scheduler's pools (the
explicit flag resolves to the same declarations: tests/test_sglang_plugin.py).

This is the path the "serve for real" issue found broken on the H200 (the scheduler died at the first radix insert);
here the same SGLang code runs end to end on the CPU. CUDA graphs (prefill and decode) are only reachable on a GPU:
scripts/gpu_run.d/20-serve.sh runs the same scenarios there. The server uses tests/sglang_env (stand-in sgl_kernel,
torchvision stand-in) and SGLang's strict idle memory check, so a leaked KV page stops the scheduler.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

if importlib.util.find_spec("sglang") is None or importlib.util.find_spec("uvicorn") is None:
    pytest.skip("SGLang's server is not installed (scripts/install.d/30-sglang.sh installs it)",
                allow_module_level=True)
from sglang_env import cpu_server, tiny_m3

from atom_mxfp4.evals.serve_check import Context, run_scenarios
from atom_mxfp4.evals.serve_client import load
from atom_mxfp4.model_patches.sglang.checkpoint_edit import enable_kv

CHUNK = 256


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve")
    model = tiny_m3.write(root / "tiny_m3")
    enable_kv(model)  # hf_quant_config.json: kv_cache_quant_algo MXFP4; no --kv-cache-dtype below
    with cpu_server(root, model, ["--max-total-tokens", "32768", "--chunked-prefill-size", str(CHUNK)],
                    int(os.environ.get("ATOM_TEST_SERVE_PORT", "31731"))) as srv:
        srv.model_path = str(model)
        yield srv


def test_real_server_default_settings(server):
    ctx = Context(server, vocab=256, chunk=CHUNK, burst=12, max_prompt=400, long_decode=96)
    report = run_scenarios(ctx, ("startup", "prefix_reuse", "chunked_prefill", "mixed", "burst"))
    failed = {name: record for name, record in report.items() if not record["ok"]}
    assert not failed, f"{failed}\n--- server log tail ---\n{server.log_tail()}"
    log = server.log()
    assert "atom_mxfp4: KV cache dtype mxfp4 (from checkpoint hf_quant_config.json quantization.kv_cache_quant_algo " \
           "= 'MXFP4')" in log
    assert "Tree Core: RustUnifiedTreeCore" in log  # the radix inserts went through the Rust core (the H200 crash)
    assert report["prefix_reuse"]["cached_tokens"][1] >= 3 * 128
    assert report["startup"]["pool_tokens"] == 32768
    assert "memory leak" not in log


def test_speed_scenario_end_to_end(server, monkeypatch):
    """The speed scenario (scripts/serve_run.sh speed: graphs on / off on the GPU) against the real server, at CPU
    sizes: every request finishes with its length; the decode rate counts the window after the last first token."""
    from atom_mxfp4.evals import serve_check
    monkeypatch.setattr(serve_check, "SPEED_CONCURRENCY", (3,))
    monkeypatch.setattr(serve_check, "SPEED_PROMPT", 64)
    monkeypatch.setattr(serve_check, "SPEED_OUTPUT", 12)
    monkeypatch.setattr(serve_check, "SPEED_TTFT", (300,))
    ctx = Context(server, vocab=256, chunk=CHUNK, burst=4, max_prompt=400, long_decode=16)
    record = run_scenarios(ctx, ("speed",))["speed"]
    assert record["ok"], record
    decode = record["decode_c3"]
    assert decode["output_tokens_per_s"] > 0 and decode["ms_per_output_token"] > 0
    assert decode["first_token_spread_ms"] >= 0 and record["ttft_300_ms"] > 0


def test_sglang_benchmark_client_end_to_end(server, tmp_path):
    """One run of SGLang's own benchmark client (``python -m sglang.benchmark.serving``, issue 40's grid) against the
    real server, at CPU sizes: the client imports in the server's environment (on the lent GPU it once stopped at
    ``import datasets``), sends exact-length token-id prompts from our tokenizer, every request completes, and the
    metrics and the sampled load come back."""
    from atom_mxfp4.evals.serving import run_client
    record = run_client(server, server.model_path, input_len=96, concurrency=2, prompts=4, work=tmp_path,
                        timeout=300, output_len=6)
    assert "error" not in record, record
    assert record["completed"] == 4 and record["total_output_tokens"] == 4 * 6, record
    assert record["output_throughput"] > 0 and record["mean_ttft_ms"] > 0 and record["p99_itl_ms"] >= 0, record
    assert record["max_running"] >= 1, record  # /v1/loads was sampled while the requests ran
    assert record["warmup_seconds"] > 0, record  # the run's shapes were served once before it
    assert isinstance(record["compiles"], int) and isinstance(record["compiled"], dict), record  # read from its log
    assert load(server.url)["num_running_reqs"] == 0


def test_rust_tree_core_check_detects_the_h200_failure_mode():
    """On the H200 (torch 2.11) SGLang's prebuilt Rust radix tree read an int64 insert value as another dtype and
    the scheduler died at the first cached prefix. The harness's check passes where the binary reads tensors right
    (here) and raises exactly that error for a value of the wrong dtype."""
    import torch
    from sglang_env import rust_tree_core_check

    assert rust_tree_core_check.main() == 0
    with pytest.raises(ValueError, match="insert value must be an int64 tensor, got Uint8"):
        rust_tree_core_check.insert_once(torch.arange(8, dtype=torch.uint8))
