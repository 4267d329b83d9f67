"""Stand-in ``sgl_kernel`` (test equipment): pure-torch versions of the few sgl-kernel ops SGLang 0.5.23 calls on
the paths a tiny dense-MLP MiniMax-M3 server takes. Any other op raises ``NotImplementedError`` naming itself, so a
path that needs the real kernel fails loudly instead of computing something else. The real binary needs torch
2.14.1 (C++ symbols), which neither the CPU CI machine nor the lent H200's image has."""

import importlib.abc
import importlib.machinery
import sys
import types

import torch
import torch.nn.functional as F

__version__ = "0.4.10"  # what SGLang 0.5.23 pins


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def _out(y: torch.Tensor, out):
    if out is None:
        return y
    out.copy_(y)
    return out


def rmsnorm(input, weight, eps=1e-6, out=None, enable_pdl=None):
    return _out(_rms(input, weight, eps), out)


def gemma_rmsnorm(input, weight, eps=1e-6, out=None, enable_pdl=None):
    return _out(_rms(input, 1.0 + weight.float(), eps), out)


def fused_add_rmsnorm(input, residual, weight, eps=1e-6, enable_pdl=None):
    """In place, as the kernel: residual += input; input = rmsnorm(residual)."""
    residual.add_(input)
    input.copy_(_rms(residual, weight, eps))


def gemma_fused_add_rmsnorm(input, residual, weight, eps=1e-6, enable_pdl=None):
    residual.add_(input)
    input.copy_(_rms(residual, 1.0 + weight.float(), eps))


def _gated(activation):
    def op(input, out=None, enable_pdl=None):
        half = input.shape[-1] // 2
        y = (activation(input[..., :half].float()) * input[..., half:].float()).to(input.dtype)
        return _out(y, out)
    return op


silu_and_mul = _gated(F.silu)
gelu_and_mul = _gated(F.gelu)
gelu_tanh_and_mul = _gated(lambda x: F.gelu(x, approximate="tanh"))


def gelu_quick(input, out=None):
    return _out((input.float() * torch.sigmoid(1.702 * input.float())).to(input.dtype), out)


def moe_sum(input, output):
    output.copy_(input.sum(dim=1))


def moe_sum_reduce(input, output, routed_scaling_factor=1.0):
    output.copy_((input.float().sum(dim=1) * routed_scaling_factor).to(output.dtype))


def weak_ref_tensor(tensor):
    """The kernel returns a non-owning alias; a plain alias (owning) is equivalent for correctness here: captured
    graph buffers live as long as the graph runner anyway."""
    return tensor


def top_k_renorm_prob(probs, top_k):
    k = top_k if isinstance(top_k, int) else top_k.view(-1, 1)
    kth = torch.sort(probs, dim=-1, descending=True).values.gather(
        -1, (torch.as_tensor(k, device=probs.device).clamp(min=1) - 1).long().expand(probs.shape[0], 1))
    kept = torch.where(probs >= kth, probs, torch.zeros_like(probs))
    return kept / kept.sum(-1, keepdim=True)


def top_p_renorm_prob(probs, top_p):
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    p = torch.as_tensor(top_p, device=probs.device, dtype=probs.dtype).view(-1, 1)
    keep_sorted = (sorted_probs.cumsum(-1) - sorted_probs) < p
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    kept = torch.where(keep, probs, torch.zeros_like(probs))
    return kept / kept.sum(-1, keepdim=True)


def _missing(name):
    def missing(*args, **kwargs):
        raise NotImplementedError(f"sgl_kernel stand-in (tests/sglang_env): {name} is not provided")
    missing.__name__ = name.rsplit(".", 1)[-1]
    return missing


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _missing(name)


_PROVIDED = {  # submodule functions with a real answer here
    "sgl_kernel.utils.is_arch_support_pdl": lambda *args, **kwargs: False,  # no programmatic dependent launch
}


class _Submodule(types.ModuleType):
    """``sgl_kernel.<sub>`` (e.g. ``sgl_kernel.quantization``): every attribute is a stub that raises when called,
    except the few in ``_PROVIDED``."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        full = f"{self.__name__}.{name}"
        return _PROVIDED.get(full) or _missing(full)


_IMPORT_ERROR = {"sgl_kernel.scalar_type"}  # SGLang has a fallback for these when the import fails


class _SubmoduleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if (fullname.startswith(__name__ + ".")
                and fullname.split(".")[1] not in {m.split(".")[1] for m in _IMPORT_ERROR}):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        return _Submodule(spec.name)

    def exec_module(self, module):
        module.__path__ = []


sys.meta_path.append(_SubmoduleFinder())
