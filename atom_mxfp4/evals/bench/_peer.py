"""Load SGLang 0.5.23's in-tree MiniMax-M3 sparse decode kernels straight from the sglang wheel, unmodified.

``sglang/__init__.py`` pulls in the whole serving stack; the kernels need only torch, triton and three tiny
helpers. So the wheel's ``sglang/`` tree is put on ``sys.modules`` as bare namespace packages (its ``__init__``
files are not executed) and the three helpers the kernel modules import are stubbed with the values they would
have on an H200:
- ``sglang.srt.runtime_context.get_platform().is_sm90`` -> compute capability == (9, 0) (the real test);
- ``sglang.srt.utils.is_gfx95_supported()`` / ``is_xpu()`` -> False (CUDA);
- ``sglang.srt.environ.envs.SGLANG_OPT_USE_MINIMAX_DECODE_TOPK_RADIX`` -> False: SGLang's default (True) routes
  the indexer's top-k to a JIT-compiled CUDA radix select (tvm-ffi + nvcc at run time) that is not loaded here,
  so the peer's top-k is its own two-stage Triton fallback. The benchmark reports the scoring kernel alone as well.
The kernel sources themselves are the wheel's bytes (their sha256 is printed into the results).
"""

import hashlib
import sys
import types
import zipfile
from pathlib import Path

import torch

KERNEL_FILES = ("common/utils.py", "common/tile_ptr.py", "decode/topk_sparse.py", "decode/flash_with_topk_idx.py")
PREFIX = "sglang/kernels/ops/attention/minimax_sparse/"


def extract(wheel: Path, dest: Path) -> dict[str, str]:
    """Unpack the minimax_sparse kernels from the wheel; returns {file: sha256}."""
    digests = {}
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if name.startswith(PREFIX):
                zf.extract(name, dest)
    for rel in KERNEL_FILES:
        digests[rel] = hashlib.sha256((dest / PREFIX / rel).read_bytes()).hexdigest()[:16]
    return digests


def _package(name: str, path: Path | None = None) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__path__ = [str(path)] if path is not None else []
    sys.modules[name] = module
    return module


def load(root: Path):
    """root: the folder holding the extracted ``sglang/`` tree. Returns (topk_sparse, flash_with_topk_idx)."""
    sg = root / "sglang"
    _package("sglang", sg)
    _package("sglang.srt", sg / "srt")
    _package("sglang.kernels", sg / "kernels")
    _package("sglang.kernels.ops", sg / "kernels/ops")
    _package("sglang.kernels.ops.attention", sg / "kernels/ops/attention")

    environ = types.ModuleType("sglang.srt.environ")

    class _Flag:
        def __init__(self, value):
            self.value = value

        def get(self):
            return self.value

    environ.envs = types.SimpleNamespace(SGLANG_OPT_USE_MINIMAX_DECODE_TOPK_RADIX=_Flag(False))
    sys.modules["sglang.srt.environ"] = environ

    runtime_context = types.ModuleType("sglang.srt.runtime_context")
    sm90 = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
    runtime_context.get_platform = lambda: types.SimpleNamespace(is_sm90=sm90)
    sys.modules["sglang.srt.runtime_context"] = runtime_context

    utils = types.ModuleType("sglang.srt.utils")
    utils.is_gfx95_supported = lambda: False
    utils.is_xpu = lambda: False
    sys.modules["sglang.srt.utils"] = utils

    import importlib
    topk_sparse = importlib.import_module("sglang.kernels.ops.attention.minimax_sparse.decode.topk_sparse")
    indexer = importlib.import_module("sglang.kernels.ops.attention.minimax_sparse.decode.flash_with_topk_idx")
    return topk_sparse, indexer
