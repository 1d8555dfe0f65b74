"""Print the size of verigrad: lines of Python per top-level part, ops in the registry, native kernels."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "verigrad"


def lines(path: Path) -> int:
    files = [path] if path.is_file() else sorted(path.rglob("*.py"))
    return sum(len(f.read_text().splitlines()) for f in files if f.suffix == ".py")


def main() -> None:
    import sys

    sys.path.insert(0, str(ROOT.parent))
    import verigrad
    from verigrad.backends import available, backend

    parts = sorted(p for p in ROOT.iterdir() if p.suffix == ".py" or (p.is_dir() and p.name != "__pycache__"))
    total = 0
    print(f"{'lines':>7}  part")
    for p in parts:
        n = lines(p)
        total += n
        print(f"{n:>7}  {p.name}")
    print(f"{total:>7}  total")
    ops = verigrad.REGISTRY
    composite = sum(op.is_composite for op in ops.values())
    print(f"ops: {len(ops)} ({len(ops) - composite} primitive, {composite} composite)")
    for name in available():
        with backend(name) as b:
            report = b.report()
        native, fallback = len(report["native"]), len(report["fallback"])
        print(f"backend {name}: {native} native kernels, {fallback} on the reference")


if __name__ == "__main__":
    main()
