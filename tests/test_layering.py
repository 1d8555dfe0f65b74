"""Imports inside verigrad go one way: a module imports only parts listed before it here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "verigrad"

LAYERS = [
    "errors",
    "dtypes",
    "registry",
    "shapes",
    "tensor",
    "modes",
    "ops",
    "backends",
    "autograd",
    "eager",
    "verify",
    "sweep",
    "ir",
    "compile",
    "linalg",
    "nn",
    "optim",
    "data",
    "io",
    "models",
    "plot",
    "train",
    "demos",
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


def _imports(path: Path) -> list[tuple[str, int]]:
    """Absolute names of the verigrad modules a file imports (at any depth of the file)."""
    this = _module_name(path)
    package = this if path.name == "__init__.py" else this.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
                names = [target] if node.module else [f"{target}.{a.name}" for a in node.names]
            else:
                names = [node.module or ""]
            out += [(n, node.lineno) for n in names if n.startswith("verigrad")]
        elif isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.startswith("verigrad")]
    return out


FILES = sorted(PACKAGE.rglob("*.py"))


def test_every_part_is_listed():
    parts = {
        _part(_module_name(f)) if f.name != "__init__.py" or f.parent != PACKAGE else "__init__"
        for f in FILES
    }
    assert parts <= set(LAYERS), f"add {sorted(parts - set(LAYERS))} to LAYERS"


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_go_one_way(path: Path):
    source = _part(_module_name(path)) if path != PACKAGE / "__init__.py" else "__init__"
    for target, line in _imports(path):
        dest = _part(target)
        if dest == source or target == "verigrad":
            continue
        assert RANK[dest] < RANK[source], (
            f"{path.name}:{line} ({source}) imports {target} ({dest}), a later layer"
        )
