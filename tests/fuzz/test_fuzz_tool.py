"""tools/fuzz.py, the long fuzz runs outside CI: a case in a forked child is told apart as loaded, refused,
wrong, another exception, a crash (signal), a timeout or out of memory; a short run of every format passes."""

from __future__ import annotations

import faulthandler
import importlib.util
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from verigrad.errors import WeightFileError

TOOL = Path(__file__).resolve().parents[2] / "tools" / "fuzz.py"


@pytest.fixture(scope="module")
def fuzz():
    spec = importlib.util.spec_from_file_location("verigrad_fuzz_tool", TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def refuse(path):
    raise WeightFileError(f"{path}: bad")


def crash(path):
    faulthandler.disable()  # pytest's would print the child's stack
    os.kill(os.getpid(), signal.SIGSEGV)


def hang(path):
    time.sleep(60)


def hog(path):
    return bytearray(512 * 2**20)


def test_each_outcome_is_told_apart(fuzz):
    def wrong(path):
        raise fuzz.Wrong("labels 10")

    loads = {"loaded": lambda p: None, "refused": refuse, "wrong": wrong, "crash": crash}
    loads.update({"hang": hang, "hog": hog, "other": lambda p: 1 / 0})
    outcomes = {
        name: fuzz.run_case(load, Path("case.bin"), time_limit=2, memory_mib=128)
        for name, load in loads.items()
    }
    assert outcomes["loaded"].kind == "loaded"
    assert (
        outcomes["refused"].kind == "refused"
        and "WeightFileError: case.bin: bad" in outcomes["refused"].detail
    )
    assert outcomes["wrong"].kind == "wrong" and outcomes["wrong"].detail == "labels 10"
    assert outcomes["crash"].kind == "crashed" and outcomes["crash"].detail == "SIGSEGV"
    assert outcomes["hang"].kind == "timeout" and 2 <= outcomes["hang"].seconds < 10
    assert outcomes["hog"].kind == "other" and outcomes["hog"].detail.startswith("MemoryError")
    assert outcomes["other"].kind == "other" and "ZeroDivisionError" in outcomes["other"].detail


def test_a_short_run_of_every_format_passes(fuzz, capsys):
    assert fuzz.main(["--cases", "4", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    for name in fuzz.FORMATS:
        assert name in out


def test_bad_options_are_refused(fuzz, capsys):
    with pytest.raises(SystemExit):
        fuzz.main(["--formats", "gguf,pdf"])
    assert (
        "--formats: pdf; the formats are gguf, safetensors, torch, idx, tokenizer, templates"
        in capsys.readouterr().err
    )
