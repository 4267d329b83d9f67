"""The backend registry: every ``atom_mxfp4/kernels/<name>/__init__.py`` registers itself here, once, with
``@register_backend``.

Adding a backend = one folder under ``atom_mxfp4/kernels/`` whose ``__init__.py`` holds a ``Backend`` subclass
decorated with ``@register_backend("<name>", rank=...)``; ``atom_mxfp4.backends`` finds the folder, the CLI's
``--backend`` choices and ``backend=None`` selection follow. This module is ground floor (a kernel package may import
it): it imports nothing of the package but the errors, and registering imports no kernel code: the package's op
functions load on first use (``Backend.load``).
"""

from __future__ import annotations

import importlib

from .errors import expect

OPS = ("fused_qknorm_rope_write", "index_topk", "build_sparse_tables", "pa_decode", "make_plan")
"""The functions every backend provides (same signatures, docs/api.md), ``make_plan`` being pa_decode's plan."""

FUSED_OPS = ("attend",)
"""Optional: a one-launch form of a composition of the backend's own ops (``attend`` = the tables of
``build_sparse_tables`` / ``ops.dense_tables`` read by ``pa_decode``). ``atom_mxfp4.ops`` composes the backend's own
ops where it ships none, or where it declines a call (returns None: the composition is faster at that shape); never
borrowed, since it stands for the pa_decode of the backend that ships it."""

REFERENCE_BACKEND = "torch"
"""The backend that runs anywhere: ``backend=None``'s last resort and the yardstick of backend self-checks."""


class Backend:
    """What a backend says about itself; subclass in ``atom_mxfp4/kernels/<name>/__init__.py`` and decorate.

    ``rank``: the order in which ``backend=None`` tries backends (lower first; the first whose ``auto`` says yes wins).
    ``ships``: the ops this package implements; the others come from backend ``borrows`` (an explicit,
    documented composition: FlyDSL ships pa_decode and borrows Triton's other ops).
    """

    name: str = ""  # set by register_backend
    rank: int = 100
    ships: tuple[str, ...] = OPS
    borrows: str | None = None

    @classmethod
    def load(cls):
        """The object whose attributes are the ops this backend ships (by default its package; imported lazily)."""
        return importlib.import_module(cls.__module__)

    @classmethod
    def unavailable(cls, device) -> str | None:
        """Why an explicit request for this backend cannot run on ``device`` (None: it can). Never falls back."""
        return None

    @classmethod
    def auto(cls, device) -> tuple[bool, str | None]:
        """For ``backend=None``: (pick this backend on ``device``, a warning to show once when it was the intended
        choice but cannot be used, e.g. a failed self-check)."""
        return False, None


_REGISTRY: dict[str, type[Backend]] = {}


def register_backend(name: str, *, rank: int):
    """Class decorator: register ``cls`` as backend ``name``; ``rank`` orders ``backend=None``'s choice."""

    def register(cls: type[Backend]) -> type[Backend]:
        expect(isinstance(cls, type) and issubclass(cls, Backend), "register_backend target", "a Backend subclass",
               repr(cls), TypeError)
        expect(name not in _REGISTRY or _REGISTRY[name] is cls, "backend name", "not yet registered", repr(name))
        expect(set(cls.ships) <= set(OPS + FUSED_OPS), f"{name}.ships", f"a subset of {list(OPS + FUSED_OPS)}",
               list(cls.ships))
        cls.name, cls.rank = name, rank
        _REGISTRY[name] = cls
        return cls

    return register


def registered() -> dict[str, type[Backend]]:
    """Name -> backend class, in ``rank`` order (the order ``backend=None`` tries them)."""
    return dict(sorted(_REGISTRY.items(), key=lambda item: (item[1].rank, item[0])))
