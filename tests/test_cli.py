"""The command line: help, the demo's falling loss, the ops listing, and clean argument errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from verigrad.cli import main
from verigrad.demos import train_mlp


def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for command in ("demo", "ops", "version"):
        assert command in out


def test_python_dash_m_runs_the_command():
    result = subprocess.run(
        [sys.executable, "-m", "verigrad", "version"], capture_output=True, text=True, check=True
    )
    assert result.stdout.startswith("verigrad ")


def test_demo_loss_falls_and_is_reproducible():
    losses = train_mlp(steps=200)
    assert losses[-1] < losses[0] / 5, (losses[0], losses[-1])
    assert train_mlp(steps=5) == losses[:5]  # same seed, same bits


def test_demo_command_prints_steps(capsys):
    assert main(["demo", "--steps", "30"]) == 0
    out = capsys.readouterr().out
    assert "loss" in out and "steps/s" in out


def test_bad_argument_is_one_line_not_a_traceback(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--steps", "-3"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "expected a positive integer" in err and "Traceback" not in err


def test_ops_lists_the_registry(capsys):
    assert main(["ops"]) == 0
    out = capsys.readouterr().out
    assert "matmul" in out and "ops; backend reference" in out
