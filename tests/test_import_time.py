"""`import verigrad` leaves its rarely used submodules and the `gguf` package unread until first used (as
`import torch` leaves torch.distributions), and every way of reaching them still works."""

from __future__ import annotations

import subprocess
import sys

import pytest

import verigrad

LAZY = ("data", "distributed", "distributions", "jit", "library", "models", "testing", "utils")


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_import_reads_no_lazy_submodule_nor_gguf():
    names = [f"verigrad.{n}" for n in LAZY] + ["gguf", "verigrad.io.gguf", "verigrad.serve", "verigrad.cli"]
    out = _run(f"import sys, verigrad; print([n for n in {names!r} if n in sys.modules])")
    assert out.strip() == "[]"


def test_lazy_submodules_are_attributes_and_importable():
    out = _run(
        "import verigrad\n"
        "from verigrad import distributions\n"
        "from verigrad.models.catalog import load_language_model\n"
        "import verigrad.library as lib\n"
        "print(verigrad.distributions is distributions, verigrad.library is lib,\n"
        "      callable(verigrad.utils.data.DataLoader), callable(verigrad.io.read_gguf),\n"
        "      verigrad.io.GGUFFile.__name__, callable(load_language_model))"
    )
    assert out.split() == ["True", "True", "True", "True", "GGUFFile", "True"]


def test_star_import_and_dir_list_the_lazy_submodules():
    for name in LAZY:
        assert name in verigrad.__all__ and name in dir(verigrad)
    namespace: dict = {}
    exec("from verigrad import *", namespace)
    assert all(namespace[name] is getattr(verigrad, name) for name in LAZY)


def test_unknown_attributes_are_still_attribute_errors():
    with pytest.raises(AttributeError, match="module 'verigrad' has no attribute 'no_such_thing'"):
        verigrad.no_such_thing  # noqa: B018
    with pytest.raises(AttributeError, match=r"module 'verigrad\.io' has no attribute 'nope'"):
        verigrad.io.nope  # noqa: B018
    assert not hasattr(verigrad, "__wrapped__")
