"""The environment variables verigrad reads: a value that cannot mean anything is ignored with one warning
line naming the variable, its value, what it may be and what is used instead; `import verigrad` never
fails for it, and the result is the same (no variable changes a result, only how fast it comes). The
compiler's (VERIGRAD_REPLAY_MIB) is read when the compiler is first imported: the program compiles a step."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest
from fresh_process import run_python

from verigrad import settings
from verigrad.backends import blas, memory

COMPUTE = """
import numpy as np
import verigrad
x = verigrad.tensor(np.arange(300_000, dtype=np.float32) / 1000)
print(float(x.sigmoid().sum()), verigrad.get_threads())
print(float(verigrad.compile(lambda t: t.sigmoid().sum())(x)))
"""
CPUS = min(len(os.sched_getaffinity(0)), 8)
UNSET = dict.fromkeys(["VERIGRAD_THREADS", "VERIGRAD_MIN_CHUNK", "VERIGRAD_BLAS", "VERIGRAD_REPLAY_MIB"])
THREADS = ("a whole number from 1 to 1024", f"{CPUS} (the default)")


@pytest.fixture(scope="module")
def clean_run():
    done = run_python(COMPUTE, **UNSET)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout.split()


@pytest.mark.parametrize(
    ("variable", "text", "allowed", "instead"),
    [
        ("VERIGRAD_THREADS", "abc", *THREADS),
        ("VERIGRAD_THREADS", "99999999999999999999", *THREADS),
        ("VERIGRAD_THREADS", "0", *THREADS),
        ("VERIGRAD_MIN_CHUNK", "1e3", "a whole number from 1 to 2147483647", "16384 (the default)"),
        ("VERIGRAD_REPLAY_MIB", "lots", "a whole number of at least 0", "the default"),
        ("VERIGRAD_BLAS", "mkl", "one of numpy, scipy-openblas32", "the default"),
        ("VERIGRAD_RETAIN_MEMORY", "maybe", "1, true, yes, on, 0, false, no or off", "1 (the default)"),
    ],
)
def test_a_bad_variable_is_one_warning_line_and_the_same_answer(clean_run, variable, text, allowed, instead):
    done = run_python(COMPUTE, **{**UNSET, variable: text})
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        f"<environment>:0: RuntimeWarning: {variable}={text!r} is ignored: it must be {allowed}; "
        f"using {instead}"
    ]
    assert done.stdout.split() == clean_run


def test_several_bad_variables_give_a_line_each(clean_run):
    bad = {"VERIGRAD_THREADS": "x", "VERIGRAD_MIN_CHUNK": "y", "VERIGRAD_BLAS": "z"}
    bad["VERIGRAD_REPLAY_MIB"] = "w"
    done = run_python(COMPUTE, **{**UNSET, **bad})
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert sorted(line.split("=")[0].split()[-1] for line in lines) == sorted(bad)
    assert done.stdout.split() == clean_run


def test_a_bad_variable_is_warned_of_once_not_at_every_call(monkeypatch):
    import verigrad

    before = verigrad.backends.threads.THREAD_COUNT.explicit
    try:
        verigrad.set_threads(None)
        monkeypatch.setenv("VERIGRAD_THREADS", "many")
        with pytest.warns(RuntimeWarning, match="VERIGRAD_THREADS='many' is ignored") as caught:
            for _ in range(5):
                assert verigrad.get_threads() == CPUS
        assert len(caught) == 1
    finally:
        monkeypatch.delenv("VERIGRAD_THREADS")
        verigrad.set_threads(before)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("", None),
        (" 7 ", 7),
        ("0", None),
        ("8", 8),
        ("9", None),
        ("٣", None),
        ("+3", None),
        ("3_000", None),
        ("-4", None),
        ("2.5", None),
    ],
)
def test_env_count(monkeypatch, text, value):
    monkeypatch.setenv("VERIGRAD_TEST_COUNT", text)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert settings.env_count("VERIGRAD_TEST_COUNT", 1, 8) == value
    assert len(caught) == (1 if text.strip() and value is None else 0)


@pytest.mark.parametrize(
    ("text", "value", "warned"),
    [
        ("", True, False),
        ("0", False, False),
        ("off", False, False),
        ("FALSE", False, False),
        ("No", False, False),
        ("1", True, False),
        ("on", True, False),
        ("2", True, True),
        ("disable", True, True),
    ],
)
def test_env_flag(monkeypatch, text, value, warned):
    """Before, any text but "0" meant on: VERIGRAD_RETAIN_MEMORY=false switched it on, silently."""
    monkeypatch.setenv("VERIGRAD_RETAIN_MEMORY", text)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert memory.enabled() is value
    assert len(caught) == warned


def test_env_choice(monkeypatch):
    monkeypatch.setenv("VERIGRAD_BLAS", " NumPy ")
    assert blas._chosen() == ("numpy",)
    monkeypatch.setenv("VERIGRAD_BLAS", "openblas")
    with pytest.warns(RuntimeWarning, match=r"VERIGRAD_BLAS='openblas' is ignored: it must be one of numpy"):
        assert blas._chosen() == blas.SOURCES
    monkeypatch.delenv("VERIGRAD_BLAS")
    assert blas._chosen() == blas.SOURCES


@pytest.mark.parametrize(
    ("variable", "expression"),
    [
        ("VERIGRAD_REPLAY", "__import__('verigrad.ir.plan', fromlist=['x']).Plan.replay"),
        ("VERIGRAD_NATIVE", "__import__('verigrad.backends.cpu.build', fromlist=['x']).native()"),
        ("VERIGRAD_EXACT_GEMM", "__import__('verigrad.backends.cpu.matmul', fromlist=['x'])._setting[0]"),
    ],
)
def test_switches_that_change_a_path_read_off_as_off(variable, expression):
    """VERIGRAD_NATIVE=false turned on -march=native with FMA contraction, VERIGRAD_EXACT_GEMM=false the
    exact GEMM, and VERIGRAD_REPLAY=off left replay on (any text but "0" was on)."""
    code = f"print(*[bool({expression})])"
    for text, want in (("off", "False"), ("false", "False"), ("0", "False"), ("on", "True"), ("1", "True")):
        env = {**os.environ, variable: text}
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert done.stdout.split()[-1] == want, (variable, text, done.stdout, done.stderr)
