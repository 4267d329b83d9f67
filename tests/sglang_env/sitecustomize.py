"""Runs at the start of every Python process whose PYTHONPATH holds tests/sglang_env (the server, its scheduler and
detokenizer subprocesses): test equipment only.

- torchvision: where it cannot load (the CPU machine), SGLang's module-level imports get inert stand-ins.
- datasets (Hugging Face): where it is not installed (the lent GPU's image), an inert module whose ``load_dataset``
  refuses: SGLang's benchmark client imports it at module level, the ``random-ids`` dataset needs none of it.
- ``ATOM_SGLANG_ENV_NO_JIT=1`` (the H200): when ``sglang.srt.models.minimax_m3`` is imported, its module flag
  ``_is_cuda`` is set False, which keeps MiniMax-M3 on its portable paths (separate q/k/v and index projections, torch
  QK-norm + RoPE for SGLang's own backend, no alt stream): the fused paths need SGLang's JIT CUDA kernels, built
  against torch 2.14 headers that the H200 image (torch 2.11) does not have. Everything else on CUDA stays as SGLang
  runs it (Triton attention, CUDA graphs).
- ``ATOM_SGLANG_ENV_DUMMY_INIT=scaled``: ``--load-format dummy`` fills weights with N(0, 1/fan_in) (embeddings N(0, 1),
  norm weights 1 + N(0, 0.1)), seeded by parameter name, instead of SGLang's U(-1e-3, 1e-3), under which activations
  vanish and every server emits the same token whatever its KV cache: agreement between two servers then measures
  nothing. The same names give the same weights in every server (the KV-cache dtype does not change them).
"""

import importlib.abc
import os
import sys

try:
    import torchvision_stand_in

    torchvision_stand_in.install()
except Exception as error:  # never break interpreter start-up; say why
    print(f"[tests/sglang_env] torchvision stand-in not installed: {error}", file=sys.stderr)


class _Fallback(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Last on ``sys.meta_path``: an inert ``datasets`` where no other finder has the Hugging Face package (the lent
    GPU's image: SGLang's benchmark client imports it at module level for its MMMU / LongBench datasets; the
    ``random-ids`` dataset of atom_mxfp4.evals.serving needs none of it). Its ``load_dataset`` says so."""

    NAME = "datasets"

    def find_spec(self, fullname, path, target=None):
        import importlib.util
        return importlib.util.spec_from_loader(fullname, self) if fullname == self.NAME else None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        def load_dataset(*args, **kwargs):
            raise ModuleNotFoundError("the Hugging Face 'datasets' package is not installed here (tests/sglang_env "
                                      "stand-in: only datasets that need no download, e.g. random-ids, can run)")
        module.load_dataset = load_dataset
        module.__stand_in__ = True


sys.meta_path.append(_Fallback())


class _AfterImport(importlib.abc.MetaPathFinder):
    """Calls ``patch(module)`` right after ``name`` is executed."""

    def __init__(self, name, patch):
        self.name, self.patch = name, patch

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        try:
            import importlib.util
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        exec_module, patch = spec.loader.exec_module, self.patch

        def exec_and_patch(module):
            exec_module(module)
            patch(module)
        spec.loader.exec_module = exec_and_patch
        return spec


def _scaled_dummy_weights(model, *args, **kwargs):
    import zlib

    import torch
    for name, param in model.state_dict().items():
        if not torch.is_floating_point(param):
            continue
        generator = torch.Generator(device="cpu").manual_seed(zlib.crc32(name.encode()))
        values = torch.randn(param.shape, generator=generator, dtype=torch.float32)
        if "norm" in name:
            values = 1.0 + 0.1 * values
        elif "embed" not in name and param.dim() >= 2:
            values = values / param.shape[-1] ** 0.5
        param.data.copy_(values.to(param.device, param.dtype))


def _patch_loader(module):
    module.initialize_dummy_weights = _scaled_dummy_weights
    print("[tests/sglang_env] --load-format dummy: scaled normal weights seeded by name", file=sys.stderr)


def _no_jit(module):
    module._is_cuda = False
    print("[tests/sglang_env] sglang.srt.models.minimax_m3: _is_cuda = False (no JIT kernels)", file=sys.stderr)


if os.environ.get("ATOM_SGLANG_ENV_NO_JIT") == "1":
    sys.meta_path.insert(0, _AfterImport("sglang.srt.models.minimax_m3", _no_jit))
if os.environ.get("ATOM_SGLANG_ENV_DUMMY_INIT") == "scaled":
    sys.meta_path.insert(0, _AfterImport("sglang.srt.model_loader.loader", _patch_loader))
