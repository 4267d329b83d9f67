"""The import graph is one-way (STYLE.md, "One fact, one home"): read from the source with ``ast``, nothing run.

- the ground floor (``layout``, ``errors``, ``registry``, ``rope``, ``plan``) and the codecs (``format``, ``index_k``)
  import nothing above them;
- a backend folder ``atom_mxfp4/kernels/<name>/`` imports only the ground floor, the codec, its own folder, torch /
  triton / numpy / its vendor DSL and the standard library: never another backend, ops, cache, the layer or the
  oracle;
- no cycle among the package's modules, counting imports inside functions too.

Imports by a computed name (``importlib``) are not edges here: the registry's discovery of
``atom_mxfp4/kernels/<name>/`` in ``atom_mxfp4.backends`` and the CLI's optional sub-commands in ``atom_mxfp4.cli``,
both from the top down.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"atom_mxfp4": ROOT / "atom_mxfp4"}  # the folders are the import paths: atom_mxfp4/kernels/ etc. live inside
GROUND = {"atom_mxfp4.layout", "atom_mxfp4.errors", "atom_mxfp4.registry", "atom_mxfp4.rope", "atom_mxfp4.format",
          "atom_mxfp4.index_k", "atom_mxfp4.plan", "atom_mxfp4.launch"}  # index_k: the fp8 index-K codec beside
# format's MXFP4 one; plan: the pa_decode plan protocol every backend's make_plan returns; launch: the pre-bound
# kernel launches every compiled backend uses
GROUND_MAY_IMPORT = {  # within the package
    "atom_mxfp4.layout": set(), "atom_mxfp4.errors": set(), "atom_mxfp4.rope": set(),
    "atom_mxfp4.registry": {"atom_mxfp4.errors"}, "atom_mxfp4.format": {"atom_mxfp4.errors", "atom_mxfp4.layout"},
    "atom_mxfp4.index_k": {"atom_mxfp4.errors", "atom_mxfp4.layout", "atom_mxfp4.format"},
    "atom_mxfp4.plan": {"atom_mxfp4.errors"}, "atom_mxfp4.launch": {"atom_mxfp4.errors"},
}
KERNEL_THIRD_PARTY = {"torch", "triton", "numpy", "flydsl"}


def _modules() -> dict[str, Path]:
    found = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join([package, *parts]) if parts else package
            found.setdefault(name, path)
    return found


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _imports(name: str) -> set[str]:
    """Every module ``name`` imports (absolute names), from any scope."""
    tree = ast.parse(MODULES[name].read_text())
    here = name if _is_package(name) else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            out.add(base)
            out.update(f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in MODULES)
    return out


def _internal(names: set[str]) -> set[str]:
    """The package modules among ``names`` (``a.b.c`` of a function import counts as module ``a.b``)."""
    result = set()
    for n in names:
        while n and n not in MODULES:
            n = n.rpartition(".")[0]
        if n:
            result.add(n)
    return result


GRAPH = {name: _internal(_imports(name)) - {name} for name in MODULES}


def _package_chain(name: str) -> set[str]:
    """Importing ``a.b.c`` runs ``a`` and ``a.b`` first: those edges are implied, not chosen."""
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def test_the_walk_sees_the_package():
    assert {"atom_mxfp4.layout", "atom_mxfp4.ops", "atom_mxfp4.kernels.triton.pa_decode",
            "atom_mxfp4.model_patches.sglang.pool", "atom_mxfp4.evals.accuracy"} <= set(MODULES)
    assert "atom_mxfp4.layout" in GRAPH["atom_mxfp4.kernels.triton._mxfp4"]


def test_ground_floor_imports_nothing_above_it():
    for name, allowed in GROUND_MAY_IMPORT.items():
        assert GRAPH[name] - {"atom_mxfp4"} <= allowed, f"{name} imports {sorted(GRAPH[name] - allowed)}"
    layout_imports = {n.split(".")[0] for n in _imports("atom_mxfp4.layout")}
    assert layout_imports <= {"__future__", "typing"}, f"layout imports {layout_imports}: constants only, no torch"


def test_kernels_import_only_the_ground_floor_and_their_own_folder():
    bad = []
    for name in MODULES:
        if not name.startswith("atom_mxfp4.kernels."):
            continue
        own = ".".join(name.split(".")[:3])  # atom_mxfp4.kernels.<backend>
        for target in GRAPH[name] - _package_chain(name):
            if target not in GROUND and not (target == own or target.startswith(own + ".")):
                bad.append(f"{name} -> {target}")
        for external in _imports(name):
            top = external.split(".")[0]
            if top and top != "atom_mxfp4" and top not in KERNEL_THIRD_PARTY and top not in sys.stdlib_module_names:
                bad.append(f"{name} -> {external} (third party)")
    assert not bad, "kernels may import only layout/format/errors/rope/registry and their own folder:\n" + "\n".join(
        sorted(bad))


def test_no_import_cycles():
    """Depth-first search over every import edge (module level and inside functions)."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []
    cycles = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for target in sorted(GRAPH[node] - _package_chain(node)):
            if state.get(target) == 1:
                cycles.append(stack[stack.index(target):] + [target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[node] = 2

    for name in sorted(MODULES):
        if name not in state:
            visit(name)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)
