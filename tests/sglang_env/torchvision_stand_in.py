"""Test equipment: let SGLang's core modules import where SGLang's GPU dependency set is not installed.

SGLang 0.5.23 imports ``torchvision`` at module level in its multimodal helpers (reached from
``sglang.srt.configs``); no torchvision wheel on PyPI loads beside the CPU build of torch 2.13 that this project
keeps. ``install()`` first lets transformers record that torchvision is absent (its availability check is cached),
then answers ``import torchvision...`` with inert stand-in modules. Nothing on the text-model paths the tests run
calls into them. A real torchvision, when importable, is left alone.

Use ``torchvision_stand_in()`` around the SGLang imports: afterwards the finder and the stand-in modules leave
``sys.modules``, so other code in the same process still sees torchvision as absent (the SGLang modules already
imported keep their references). A server process gets ``install()`` for its lifetime through this folder's
``sitecustomize.py``.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from contextlib import contextmanager


class _Inert:
    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        return _Inert()

    def __getattr__(self, name):
        return _Inert()


class _InertModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert()


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name == "torchvision" or name.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        return _InertModule(spec.name)

    def exec_module(self, module):
        module.__path__ = []


def _torchvision_loads() -> bool:
    if importlib.util.find_spec("torchvision") is None:
        return False
    try:
        import torchvision  # noqa: F401
        return True
    except Exception:
        for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
            del sys.modules[name]
        return False


def install() -> bool:
    """Install the stand-in when torchvision cannot load; return whether it was installed."""
    if any(isinstance(f, _Finder) for f in sys.meta_path):
        return True
    if _torchvision_loads():
        return False
    from transformers.utils import import_utils
    import_utils.is_torchvision_available()  # cached False before the stand-in exists
    sys.meta_path.insert(0, _Finder())
    return True


def remove() -> None:
    """Drop the finder and every stand-in module (SGLang modules imported meanwhile keep their references)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _Finder)]
    for name in [n for n, m in sys.modules.items() if isinstance(m, _InertModule)]:
        del sys.modules[name]


@contextmanager
def torchvision_stand_in():
    installed = install()
    try:
        yield installed
    finally:
        if installed:
            remove()
