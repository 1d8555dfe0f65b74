"""Imports inside verigrad go one way.

Between parts: a module imports only parts listed before its own in LAYERS. Inside the package as a
whole, module by module: no import cycle, counting the imports inside functions too (a lazy import is a
dependency all the same). Both read every import statement of every file with `ast`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "verigrad"

LAYERS = [
    "_lazy",
    "errors",
    "dtypes",
    "devices",
    "accelerator",
    "settings",
    "typeinfo",
    "shapes",
    "tensor",
    "versions",
    "modes",
    "ops",
    "functions",
    "backends",
    "autograd_graph",
    "grad_mode",
    "autograd",
    "autograd_functional",
    "gradcheck",
    "inplace",
    "tensor_methods_in_place",
    "out_argument",
    "tensor_methods",
    "eager",
    "function",
    "ir",
    "compile",
    "library_kernels",
    "library",
    "linalg",
    "special",
    "fft",
    "signal",
    "distributions",
    "nn",
    "tensor_methods_late",
    "masked",
    "optim",
    "amp",
    "distributed",
    "jit",
    "testing",
    "profiler",
    "multiprocessing",
    "torch_names",
    "utils",
    "data",
    "io",
    "models",
    "serve",
    "cli",
    "__init__",
    "__main__",
]
RANK = {name: i for i, name in enumerate(LAYERS)}


def _part(module: str) -> str:
    """'verigrad.ops.unary' -> 'ops'; 'verigrad' -> '__init__'."""
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else "__init__"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


FILES = sorted(PACKAGE.rglob("*.py"))
MODULES = {_module_name(f) for f in FILES}


def _imports(path: Path) -> list[tuple[str, int]]:
    """The verigrad modules a file imports (at any depth of the file): `from .ops import binary` names
    the module verigrad.ops.binary, `from .ops import add` the package verigrad.ops."""
    this = _module_name(path)
    package = this if path.name == "__init__.py" else this.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("verigrad"):
                continue
            for alias in node.names:
                child = f"{target}.{alias.name}"
                out.append((child if child in MODULES else target, node.lineno))
        elif isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.startswith("verigrad")]
    return out


GRAPH = {
    _module_name(f): sorted({t for t, _ in _imports(f) if t in MODULES} - {_module_name(f)}) for f in FILES
}


def test_every_part_is_listed():
    parts = {_part(m) for m in MODULES}
    assert parts <= set(LAYERS), f"add {sorted(parts - set(LAYERS))} to LAYERS"


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_go_one_way(path: Path):
    source = _part(_module_name(path))
    for target, line in _imports(path):
        dest = _part(target)
        if dest == source or target == "verigrad":
            continue
        assert RANK[dest] < RANK[source], (
            f"{path.name}:{line} ({source}) imports {target} ({dest}), a later layer"
        )


def _cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle():
    assert _cycles(GRAPH) == []


def test_the_cycle_finder_finds_cycles():
    assert _cycles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c"]]
    assert _cycles({"a": ["b"], "b": []}) == []
