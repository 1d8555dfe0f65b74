"""`verigrad ir`: the digits CNN's forward program and training step, with and without passes, a
concrete batch, user scripts (both conventions), and one-line errors."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest

from verigrad.cli import main


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _instructions(text: str) -> list[str]:
    return [line for line in text.splitlines() if re.match(r"  %\d+: ", line)]


def test_cnn_forward_program(capsys):
    code, out, err = _run(capsys, "ir", "--model", "cnn", "--no-passes")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[:3] == ["program(", "    %0 x: f32[B,1,8,8],", "    %1 0.weight: f32[16,1,3,3],"]
    assert "    %6 7.bias: f32[10]," in lines
    ops = [line.split(" = ")[1].split()[0] for line in _instructions(out)]
    assert ops.count("conv2d") == 2 and ops.count("max_pool2d") == 2 and ops.count("relu") == 2
    assert "  %11: f32[B,16,4,4] = max_pool2d %10 (kernel=2, stride=2)\n" in out
    assert re.search(r"\n  return %\d+\n}\n$", out)
    assert "backward:" not in out and "<-" not in out


def test_cnn_training_step_program(capsys):
    code, out, _ = _run(capsys, "ir", "--model", "cnn", "--train", "--no-passes")
    assert code == 0
    forward, backward = out.split("\nbackward:\n")
    assert "    %1 y: i64[B]," in forward and "= cross_entropy" in forward
    assert "    %8 opt.steps: i64[]," in forward and "opt.0.exp_avg_sq: f32[16,1,3,3]" in forward
    assert "= conv2d_weight_grad" in backward and "= sqrt" in backward  # conv gradients, the Adam update
    updates = re.findall(r"\n  (\S+) <- %\d+", backward)
    assert {"0.weight", "7.bias", "opt.steps", "opt.0.step", "opt.5.exp_avg"} <= set(updates)
    assert "opt.lr" not in updates
    code, sgd, _ = _run(capsys, "ir", "--model", "cnn", "--train", "--optimizer", "sgd")
    assert code == 0 and "momentum_buffer" in sgd and "exp_avg" not in sgd


def test_passes_and_batch(capsys):
    _, raw, _ = _run(capsys, "ir", "--train", "--no-passes")
    _, optimized, _ = _run(capsys, "ir", "--train", "--passes")
    _, default, _ = _run(capsys, "ir", "--train")
    assert default == optimized
    assert len(_instructions(optimized)) < len(_instructions(raw))  # at least dead code is gone
    header = raw[: raw.index(") {")]
    assert optimized.startswith(header)  # the same inputs, with the same names
    assert re.findall(r"\n  (\S+) <- %", optimized) == re.findall(r"\n  (\S+) <- %", raw)
    _, fixed, _ = _run(capsys, "ir", "--model", "cnn", "--batch", "32")
    assert "%0 x: f32[32,1,8,8]" in fixed and "B" not in fixed


def test_mlp_model(capsys):
    code, out, _ = _run(capsys, "ir", "--model", "mlp", "--no-passes")
    assert code == 0
    assert out.splitlines()[:7] == [
        "program(",
        "    %0 x: f32[B,2],",
        "    %1 w1: f32[2,64],",
        "    %2 b1: f32[64],",
        "    %3 w2: f32[64,3],",
        "    %4 b2: f32[3],",
        ") {",
    ]
    assert "  %5: f32[B,64] = matmul %0 %1" in out and "= tanh %" in out


def test_a_script_that_defines_program(tmp_path, capsys):
    script = tmp_path / "mine.py"
    script.write_text(
        textwrap.dedent(
            """
            import verigrad

            def program():
                n = verigrad.dims("n")
                w = verigrad.ones(3, 2)
                return verigrad.trace(lambda x: (x @ w).relu(), verigrad.spec([n, 3]))
            """
        )
    )
    code, out, err = _run(capsys, "ir", str(script), "--no-passes")
    assert code == 0 and err == ""
    assert out == (
        "program(%0 x: f32[n,3], %1 w: f32[3,2]) {\n"
        "  %2: f32[n,2] = matmul %0 %1\n"
        "  %3: f32[n,2] = relu %2\n"
        "  return %3\n"
        "}\n"
    )


def test_a_script_that_defines_model_and_example_spec(tmp_path, capsys):
    script = tmp_path / "model.py"
    script.write_text(
        textwrap.dedent(
            """
            import verigrad
            from verigrad import nn

            model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
            example_spec = verigrad.spec([verigrad.dims("batch"), 4])
            """
        )
    )
    code, out, _ = _run(capsys, "ir", str(script), "--no-passes")
    assert code == 0
    assert out.startswith(
        "program(\n    %0 x: f32[batch,4],\n    %1 0.weight: f32[8,4],\n    %2 0.bias: f32[8],"
    )
    assert "f32[batch,2] = add" in out


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("x = 1\n", "defines neither program() nor model and example_spec"),
        ("def program():\n    return 42\n", "program() returned int, not a verigrad Program"),
        (
            "import verigrad\n\ndef program():\n    return undefined_name\n",
            ":4: NameError: name 'undefined_name'",
        ),
    ],
)
def test_script_errors_are_one_line(tmp_path, capsys, body, message):
    script = tmp_path / "bad.py"
    script.write_text(body)
    code, out, err = _run(capsys, "ir", str(script))
    assert code == 1 and out == ""
    assert err.startswith("verigrad ir: error: ") and message in err and err.count("\n") == 1


def test_a_shape_error_in_a_script_names_its_line(tmp_path, capsys):
    script = tmp_path / "shapes.py"
    script.write_text(
        "import verigrad\n"
        "\n"
        "def program():\n"
        "    w = verigrad.ones(5, 2)\n"
        "    return verigrad.trace(lambda x: x @ w, verigrad.spec([verigrad.dims('n'), 3]))\n"
    )
    code, _, err = _run(capsys, "ir", str(script))
    assert code == 1 and err.count("\n") == 1
    assert "matmul(f32[n, 3], f32[5, 2])" in err and f"(at {script}:5 (in <lambda>))" in err


def test_missing_script_and_bad_combinations(tmp_path, capsys):
    code, _, err = _run(capsys, "ir", str(tmp_path / "absent.py"))
    assert code == 1 and err == f"verigrad ir: error: no such script: {tmp_path / 'absent.py'}\n"
    script = tmp_path / "s.py"
    script.write_text("x = 1\n")
    code, _, err = _run(capsys, "ir", str(script), "--train")
    assert code == 1 and "not both" in err and err.count("\n") == 1


def test_unknown_model_is_one_line(capsys):
    with pytest.raises(SystemExit) as info:
        main(["ir", "--model", "resnet"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "invalid choice: 'resnet'" in err


def test_the_command_runs_as_a_program():
    result = subprocess.run(
        [sys.executable, "-m", "verigrad", "ir", "--model", "cnn"], capture_output=True, text=True, check=True
    )
    assert result.stdout.startswith("program(\n    %0 x: f32[B,1,8,8],")
