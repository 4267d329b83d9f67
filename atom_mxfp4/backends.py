"""Backend selection.

A backend is a package ``atom_mxfp4.kernels.<name>`` exporting the op functions of docs/api.md.
``backend=None`` picks the best one for the device: FlyDSL on a ROCm gfx950 device (only after its self-check
passed; otherwise Triton, with one warning), Triton on CUDA/ROCm, torch elsewhere. An explicit backend never
silently falls back: it works or raises.

FlyDSL ships only ``pa_decode``; its other three ops are Triton's (an explicit, documented composition).
"""

from __future__ import annotations

import functools
import importlib
import os
import warnings
from types import SimpleNamespace

import torch

from .errors import expect

BACKENDS = ("torch", "triton", "flydsl")
OPS = ("fused_qknorm_rope_write", "index_topk", "build_sparse_tables", "pa_decode", "make_plan")
FLYDSL_OPS = ("pa_decode", "make_plan")


class BackendUnavailable(RuntimeError):
    """An explicitly requested backend cannot run here."""


@functools.cache
def _import(name: str):
    return importlib.import_module(f"atom_mxfp4.kernels.{name}")


def _triton_usable(device: torch.device) -> tuple[bool, str]:
    if device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        return False, f"triton needs a CUDA/ROCm device or TRITON_INTERPRET=1, got device {device}"
    try:
        import triton  # noqa: F401
    except ImportError as error:
        return False, f"triton is not importable ({error})"
    return True, ""


def _is_gfx950(device: torch.device) -> bool:
    if device.type != "cuda" or getattr(torch.version, "hip", None) is None:
        return False
    return "gfx950" in getattr(torch.cuda.get_device_properties(device), "gcnArchName", "")


@functools.cache
def _flydsl_checked(device_index: int) -> tuple[bool, str]:
    """Run the FlyDSL self-check once per process and device; (passed, reason)."""
    try:
        module = _import("flydsl")
        module.self_check(torch.device("cuda", device_index))
    except Exception as error:  # the reason is reported, never swallowed
        return False, f"{type(error).__name__}: {error}"
    return True, ""


def _compose(name: str):
    if name == "flydsl":
        triton_ops, flydsl_ops = _import("triton"), _import("flydsl")
        return SimpleNamespace(name=name, **{op: getattr(flydsl_ops if op in FLYDSL_OPS else triton_ops, op)
                                             for op in OPS})
    module = _import(name)
    return SimpleNamespace(name=name, **{op: getattr(module, op) for op in OPS})


def _check_explicit(name: str, device: torch.device) -> None:
    if name == "torch":
        return
    ok, why = _triton_usable(device)
    if not ok:
        raise BackendUnavailable(f"backend={name!r} cannot run here: {why}")
    if name == "flydsl":
        if not _is_gfx950(device):
            raise BackendUnavailable(f"backend='flydsl' needs an AMD gfx950 device, got {device}")
        passed, why = _flydsl_checked(device.index or 0)
        if not passed:
            raise BackendUnavailable(f"backend='flydsl' failed its self-check against the torch backend: {why}")


_warned: set[int] = set()


@functools.cache
def _resolve(name: str | None, device_type: str, device_index: int | None, interpret: bool):
    # ``interpret`` (TRITON_INTERPRET=1) is only part of the cache key: it changes what Triton can run on
    device = torch.device(device_type, device_index) if device_index is not None else torch.device(device_type)
    if name is not None:
        _check_explicit(name, device)
        return _compose(name)
    if device.type != "cuda":
        return _compose("torch")
    if _is_gfx950(device):
        passed, why = _flydsl_checked(device.index or 0)
        if passed:
            return _compose("flydsl")
        if (device.index or 0) not in _warned:
            _warned.add(device.index or 0)
            warnings.warn(f"atom_mxfp4: FlyDSL self-check failed on {device} ({why}); using the Triton backend",
                          RuntimeWarning, stacklevel=3)
    ok, why = _triton_usable(device)
    return _compose("triton") if ok else _compose("torch")


def resolve_backend(name: str | None, device: torch.device | str) -> SimpleNamespace:
    """The op table of backend ``name`` (or the best for ``device`` when None)."""
    expect(name is None or name in BACKENDS, "backend", f"None or one of {list(BACKENDS)}", repr(name))
    device = torch.device(device)
    return _resolve(name, device.type, device.index, os.environ.get("TRITON_INTERPRET") == "1")


def available_backends(device: torch.device | str = "cpu") -> list[str]:
    """Backends that can run on ``device`` now (FlyDSL counted only once its self-check passed)."""
    names = []
    for name in BACKENDS:
        try:
            resolve_backend(name, device)
        except (BackendUnavailable, ImportError):
            continue
        names.append(name)
    return names
