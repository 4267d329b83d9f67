"""Backend selection over the registry (``atom_mxfp4.registry``).

A backend is a folder ``atom_mxfp4/kernels/<name>/`` whose ``__init__.py`` registers a ``Backend`` class with
``@register_backend``; this module imports every such folder once (registering loads no kernel code) and
resolves a name to an op table. ``backend=None`` tries the registered backends in ``rank`` order and takes the first
whose ``auto(device)`` says yes: FlyDSL on a ROCm gfx950 device (only after its self-check passed; otherwise Triton,
with one warning), Hopper on an sm_90 CUDA device with a triton series its GPU tests ran under
(``atom_mxfp4/kernels/hopper`` ``TRITON_SERIES``), Triton on other CUDA / ROCm devices, torch elsewhere. An explicit
backend never silently falls back: it works or raises ``BackendUnavailable``.

FlyDSL ships only ``pa_decode``; its other three ops are Triton's (``borrows = "triton"``: an explicit, documented
composition).
"""

from __future__ import annotations

import functools
import importlib
import os
import pkgutil
import warnings
from types import SimpleNamespace

import torch

from . import kernels  # noqa: F401  (the package whose folders are the backends; installed as atom_mxfp4.kernels)
from .errors import expect
from .plan import plan_device
from .registry import FUSED_OPS, OPS, REFERENCE_BACKEND, registered  # noqa: F401


class BackendUnavailable(RuntimeError):
    """An explicitly requested backend cannot run here."""


def _discover() -> None:
    """Import every ``atom_mxfp4/kernels/<name>/`` package once: each registers its backend."""
    for info in pkgutil.iter_modules(kernels.__path__):
        if info.ispkg:
            importlib.import_module(f"{kernels.__name__}.{info.name}")


_discover()
BACKENDS = tuple(reversed(registered()))
"""Registered backend names, the reference first (``--backend`` choices, error messages)."""


def spec(name: str):
    """The registered backend class of ``name`` (ValueError naming the registered ones otherwise)."""
    expect(name in BACKENDS, "backend", f"None or one of {list(BACKENDS)}", repr(name))
    return registered()[name]


def _unavailable(name: str, device: torch.device) -> str | None:
    """Why backend ``name`` (and the backend it borrows ops from) cannot run on ``device``; None if it can."""
    backend = registered()[name]
    if backend.borrows is not None:
        why = _unavailable(backend.borrows, device)
        if why is not None:
            return why
    return backend.unavailable(device)


def _compose(name: str) -> SimpleNamespace:
    """The op table of ``name``: the ops it ships, the rest from the backend it borrows from."""
    backend = registered()[name]
    table = {} if backend.borrows is None else vars(_compose(backend.borrows)).copy()
    for op in FUSED_OPS:  # never borrowed: it would run the lender's pa_decode
        table.pop(op, None)
    shipped = backend.load()
    table.update({op: getattr(shipped, op) for op in backend.ships})
    table["name"] = name
    return SimpleNamespace(**table)


_warned: set[tuple[str, str]] = set()


@functools.cache
def _resolve(name: str | None, device_type: str, device_index: int | None, interpret: bool):
    # ``interpret`` (TRITON_INTERPRET=1) is only part of the cache key: it changes what Triton can run on
    device = torch.device(device_type, device_index) if device_index is not None else torch.device(device_type)
    if name is not None:
        why = _unavailable(name, device)
        if why is not None:
            raise BackendUnavailable(f"backend={name!r} cannot run here: {why}")
        return _compose(name)
    for candidate, backend in registered().items():
        chosen, warning = backend.auto(device)
        if chosen:
            return _compose(candidate)
        if warning is not None and (candidate, str(device)) not in _warned:
            _warned.add((candidate, str(device)))
            warnings.warn(f"atom_mxfp4: {warning}", RuntimeWarning, stacklevel=3)
    return _compose(REFERENCE_BACKEND)  # runs anywhere


_RESOLVED: dict = {}  # (name, torch.device with an index, or not CUDA) -> op table: the launch path's one lookup.
# TRITON_INTERPRET is read on a miss: set it before the first op, or clear with _resolve.cache_clear() after a change


def resolve_backend(name: str | None, device: torch.device | str) -> SimpleNamespace:
    """The op table of backend ``name`` (or the best for ``device`` when None). A CUDA device without an index is
    the current one (``plan_device``) where CUDA is available: its checks (capability, FlyDSL's self-check) run on
    that device, never on cuda:0 for another rank. Every op calls this: a repeated (name, device) is one dict lookup
    (a device without an index is resolved anew each time: the current device may have changed)."""
    cacheable = isinstance(device, torch.device) and (device.type != "cuda" or device.index is not None)
    key = (name, device)
    found = _RESOLVED.get(key) if cacheable else None
    if found is not None:
        return found
    if name is not None:
        spec(name)
    resolved = torch.device(device)
    if resolved.type == "cuda" and resolved.index is None and torch.cuda.is_available():
        resolved = plan_device(resolved)
    found = _resolve(name, resolved.type, resolved.index, os.environ.get("TRITON_INTERPRET") == "1")
    if cacheable:
        _RESOLVED[key] = found
    return found


def _clear_resolved() -> None:
    """Forget every resolved backend (tests that change what a device offers)."""
    _RESOLVED.clear()
    _resolve_cache_clear()


_resolve_cache_clear = _resolve.cache_clear
_resolve.cache_clear = _clear_resolved  # tests call backends._resolve.cache_clear(): it clears both


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
