"""Test equipment for running SGLang 0.5.23 with the plugin where SGLang's own binary dependencies do not load.

Not part of the product: users install SGLang normally. This folder is two things at once:
- a package (``tests/sglang_env``) the tests import: ``tiny_m3`` (a tiny MiniMax-M3 checkpoint directory with an
  offline byte-level tokenizer), ``torchvision_stand_in``;
- a ``PYTHONPATH`` root for a server process (``server_env()``): ``sgl_kernel/`` (pure-torch stand-ins for the few
  sgl-kernel ops SGLang imports at load time: its binary needs torch 2.14.1, which neither the CPU machine (torch
  2.13) nor the H200 image (torch 2.11) has) and ``sitecustomize.py`` (installed in every server process:
  the torchvision stand-in where torchvision cannot load; on CUDA the MiniMax model kept off SGLang's JIT kernels).
README.md says which settings each environment variable carries and why.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent

# SGLang settings that keep a server on the ops the stand-ins cover (see README.md for each reason)
BASE_ENV = {
    "SGLANG_SKIP_SGL_KERNEL_VERSION_CHECK": "1",
    "SGLANG_IS_FLASHINFER_AVAILABLE": "false",
    "SGLANG_FORCE_FUSED_OP_BACKEND": "torch",
    "SGLANG_DISABLE_MSA": "1",
    "SGLANG_OPT_USE_BF16_ROUTER_GEMM": "0",
    "SGLANG_OPT_USE_MINIMAX_DECODE_TOPK_RADIX": "0",
    "SGLANG_ENABLE_STRICT_MEM_CHECK_DURING_IDLE": "1",  # a leaked KV page stops the scheduler at the next idle step
}


def server_env(device: str, base: dict | None = None) -> dict:
    """Environment for a ``sglang serve`` process on ``device`` ("cpu" or "cuda")."""
    env = dict(os.environ if base is None else base)
    env.update(BASE_ENV)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    if device == "cpu":
        env["SGLANG_USE_CPU_ENGINE"] = "1"  # SGLang's CPU paths (no CUDA-only kernels)
    else:
        env["ATOM_SGLANG_ENV_NO_JIT"] = "1"  # sitecustomize: keep the MiniMax model off JIT-compiled CUDA kernels
        # SGLang's own MiniMax sparse backend (the bf16 / fp8 baselines) would store K/V/index-K with a JIT kernel
        # that requires contiguous K rows; the portable model path above hands it a strided view (seen on the H200)
        env["SGLANG_OPT_USE_MINIMAX_FUSED_KV_INDEX_STORE"] = "0"
    return env


@contextlib.contextmanager
def cpu_server(root: Path, model: str, args: list[str], port: int, env: dict | None = None):
    """A ready ``sglang serve`` of ``model`` on the CPU with the plugin on the torch backend (``args``: the rest of
    its flags; ``env``: more of its environment), its log in ``root / "server.log"``; stopped on exit."""
    from atom_mxfp4.evals.serve_client import Server

    server_environment = server_env("cpu")
    server_environment["ATOM_MXFP4_BACKEND"] = "torch"
    server_environment.pop("TRITON_INTERPRET", None)  # the server runs the torch backend; the test session interprets
    server_environment.update(env or {})
    server = Server(["--model-path", model, "--load-format", "dummy", "--device", "cpu"] + args, server_environment,
                    Path(root) / "server.log", port=port)
    server.start()
    try:
        server.wait_ready(timeout=420)
        yield server
    finally:
        server.stop()
