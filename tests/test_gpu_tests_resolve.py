"""The GPU test files' bodies run only on a GPU; here, on the CPU, every name they read from one of the package's
modules must exist. A helper renamed in a kernel module (``pa_decode._cta_barrier`` moved to ``_gluon.cta_barrier``
on 2026-12-04) left ``tests/gpu/test_hopper_gpu.py``'s own Gluon kernel calling the old name: 4 failures on the
H200 a day later, under every triton. Module aliases are those bound by ``import atom_mxfp4... as N``, ``from
atom_mxfp4... import N`` (when N is a module) and ``N = importlib.import_module("atom_mxfp4...")``.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

GPU_TESTS = sorted((Path(__file__).parent / "gpu").glob("test_*.py"))


def module_aliases(tree: ast.Module) -> dict[str, str]:
    """name -> dotted module path of each top-level alias of an atom_mxfp4 module."""
    aliases = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("atom_mxfp4") and alias.asname:
                    aliases[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("atom_mxfp4"):
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                try:
                    importlib.import_module(candidate)
                except ImportError:
                    continue  # a function or class, not a module
                aliases[alias.asname or alias.name] = candidate
        elif (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
              and isinstance(node.value, ast.Call) and getattr(node.value.func, "attr", "") == "import_module"
              and node.value.args and isinstance(node.value.args[0], ast.Constant)
              and str(node.value.args[0].value).startswith("atom_mxfp4")):
            aliases[node.targets[0].id] = node.value.args[0].value
    return aliases


def missing_names(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    aliases = module_aliases(tree)
    modules = {name: importlib.import_module(dotted) for name, dotted in aliases.items()}
    missing = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
                and isinstance(node.ctx, ast.Load)):
            module = modules[node.value.id]
            if not hasattr(module, node.attr):
                missing.add(f"{path.name}:{node.lineno}: {aliases[node.value.id]}.{node.attr}")
    return sorted(missing)


@pytest.mark.parametrize("path", GPU_TESTS, ids=lambda p: p.name)
def test_every_name_a_gpu_test_reads_from_the_package_exists(path):
    assert missing_names(path) == []


def test_a_renamed_helper_is_found(tmp_path):
    """The check itself fails on the bug it was written for."""
    path = tmp_path / "test_stale.py"
    path.write_text('import importlib\nP = importlib.import_module("atom_mxfp4.kernels.hopper.pa_decode")\n'
                    "import atom_mxfp4.ops as ops\n\n\ndef f():\n    P._cta_barrier()\n    P.cta_barrier()\n"
                    "    ops.pa_decode\n    ops.no_such_op\n")
    assert missing_names(path) == ["test_stale.py:10: atom_mxfp4.ops.no_such_op",
                                   "test_stale.py:7: atom_mxfp4.kernels.hopper.pa_decode._cta_barrier"]
