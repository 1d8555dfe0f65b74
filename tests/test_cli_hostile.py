"""Every `verigrad` command given bad values (zero, negative, huge, NaN or infinite numbers, missing files,
folders for files, files for folders, files that are not what they should be): one line
`verigrad CMD: error: ...` naming the argument or file, exit code 2 (the parser) or 1 (the command),
never a traceback, and nothing written. Parser errors run in this process (they stop before any work);
what only a fresh process shows (the environment at import, `python -m verigrad`) runs in one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from fresh_process import ROOT

import verigrad
from verigrad.cli import main

BIG = "99999999999999999999"

# (argv, the argument named, what the message says)
PARSER_ERRORS = [
    (["train", "--epochs", "0"], "--epochs", "expected a positive integer of at most 1000000, got 0"),
    (["train", "--epochs", "-3"], "--epochs", "got -3"),
    (["train", "--epochs", BIG], "--epochs", f"at most 1000000, got {BIG}"),
    (["train", "--epochs", "nan"], "--epochs", "got 'nan'"),
    (["train", "--epochs", "inf"], "--epochs", "got 'inf'"),
    (["train", "--epochs", "2.5"], "--epochs", "got '2.5'"),
    (["train", "--batch-size", "0"], "--batch-size", "expected a positive integer, got 0"),
    (["train", "--batch-size", "-32"], "--batch-size", "got -32"),
    (["train", "--lr", "inf"], "--lr", "expected a finite positive number, got 'inf'"),
    (["train", "--lr=-inf"], "--lr", "got '-inf'"),
    (["train", "--lr", "nan"], "--lr", "expected a finite positive number, got 'nan'"),
    (["train", "--lr", "1e999"], "--lr", "got '1e999'"),
    (["train", "--lr", "0"], "--lr", "expected a positive number, got 0.0"),
    (["train", "--lr", "-0.1"], "--lr", "got -0.1"),
    (["train", "--threads", "0"], "--threads", "expected a positive integer of at most 1024, got 0"),
    (["train", "--threads", BIG], "--threads", f"got {BIG}"),
    (["train", "--threads", "-2"], "--threads", "got -2"),
    (["train", "--seed", "-1"], "--seed", "expected a non-negative integer, got -1"),
    (["train", "--backend", "gpu"], "--backend", "invalid choice: 'gpu'"),
    (["eval", "x.safetensors", "--data-dir", "absent-folder"], "--data-dir", "absent-folder: no such folder"),
    (["demo", "--steps", "0"], "--steps", "got 0"),
    (["demo", "--steps", BIG], "--steps", "at most 100000000"),
    (["ir", "--batch", "0"], "--batch", "got 0"),
    (["ir", "--batch", BIG], "--batch", "at most 2147483647"),
    (["ir", "--model", "resnet"], "--model", "invalid choice: 'resnet'"),
    (["generate", "hi", "--temperature", "inf"], "--temperature", "expected a finite non-negative number"),
    (["generate", "hi", "--temperature", "nan"], "--temperature", "got 'nan'"),
    (["generate", "hi", "--temperature", "-1"], "--temperature", "got -1.0"),
    (["generate", "hi", "--top-p", "0"], "--top-p", "expected a positive number of at most 1, got 0.0"),
    (["generate", "hi", "--top-p", "1.5"], "--top-p", "got 1.5"),
    (["generate", "hi", "--top-p", "nan"], "--top-p", "got 'nan'"),
    (["generate", "hi", "--top-k", "-1"], "--top-k", "got -1"),
    (["generate", "hi", "--max-tokens", "0"], "--max-tokens", "got 0"),
    (["generate", "hi", "--repeat-penalty", "inf"], "--repeat-penalty", "got 'inf'"),
    (["generate", "hi", "--threads", BIG], "--threads", "at most 1024"),
    (["generate", "hi", "--seed", "-1"], "--seed", "expected a non-negative integer, got -1"),
    (["chat", "--seed", "-5"], "--seed", "got -5"),
    (["chat", "--context", "0"], "--context", "got 0"),
    (["chat", "--threads", "0"], "--threads", "got 0"),
    (["verify", "--backend", "gpu"], "--backend", "invalid choice: 'gpu'"),
    (["fetch", "gpt5"], "name", "invalid choice: 'gpt5'"),
]


def one_line(err: str, command: str, *fragments: str) -> str:
    """The one line of `err`, checked: `verigrad COMMAND: error: ...` with every fragment, no traceback."""
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"verigrad {command}: error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


@pytest.mark.parametrize(("argv", "argument", "message"), PARSER_ERRORS, ids=lambda v: None)
def test_a_bad_value_is_refused_by_the_parser_in_one_line(argv, argument, message, capsys, tmp_path):
    out = tmp_path / "run"
    argv = [*argv, "--out", str(out)] if argv[0] == "train" else argv
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    one_line(capsys.readouterr().err, argv[0], f"error: argument {argument}: ", message)
    assert not out.exists()


def test_a_data_dir_without_mnist_is_refused_not_ignored(tmp_path, capsys):
    """Before, `--data-dir` without `--data mnist` trained (or evaluated) on the digits, silently."""
    out = tmp_path / "run"
    assert main(["train", "--data-dir", str(tmp_path), "--out", str(out)]) == 1
    one_line(capsys.readouterr().err, "train", f"--data-dir {tmp_path} is for --data mnist")
    assert not out.exists()
    checkpoint = tmp_path / "digits.safetensors"
    verigrad.io.save(verigrad.models.digits_cnn().state_dict(), checkpoint, metadata=_cnn_metadata())
    assert main(["eval", str(checkpoint), "--data-dir", str(tmp_path)]) == 1
    one_line(capsys.readouterr().err, "eval", "is for --data mnist")


def test_an_output_folder_that_is_a_file_is_refused_before_training(tmp_path, capsys):
    taken = tmp_path / "taken"
    taken.write_text("precious")
    for out in (taken, taken / "below"):
        with pytest.raises(SystemExit) as info:
            main(["train", "--epochs", "1", "--out", str(out)])
        assert info.value.code == 2
        one_line(capsys.readouterr().err, "train", "argument --out:", str(taken))
    assert taken.read_text() == "precious"


def test_an_output_file_that_is_a_folder_is_refused_before_training(tmp_path, capsys):
    (tmp_path / "model.safetensors").mkdir()
    assert main(["train", "--epochs", "1", "--out", str(tmp_path)]) == 1
    one_line(capsys.readouterr().err, "train", str(tmp_path / "model.safetensors"), "is a directory")
    assert os.listdir(tmp_path) == ["model.safetensors"]


@pytest.mark.parametrize("batch", ["1439", "5000", BIG])
def test_a_batch_larger_than_the_data_is_refused_before_training(tmp_path, capsys, batch):
    """Before, an epoch of whole batches had no step: an untrained checkpoint was written, then an error."""
    out = tmp_path / "run"
    assert main(["train", "--batch-size", batch, "--out", str(out)]) == 1
    one_line(capsys.readouterr().err, "train", f"batch size {batch} is larger than the 1438 training images")
    assert not out.exists()


def test_a_diverging_run_stops_and_writes_no_checkpoint(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", "--epochs", "1", "--lr", "1e30", "--optimizer", "sgd", "--eager", "--out", str(out)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("verigrad train: error: the loss is nan at step ") == 1, err
    assert "training diverged, no checkpoint written; try a smaller learning rate than 1e+30" in err
    assert not out.exists()


def _cnn_metadata(**changes: str) -> dict[str, str]:
    meta = {"model": "digits_cnn", "height": "8", "width": "8", "config": json.dumps({"epochs": 1})}
    return {k: v for k, v in {**meta, **changes}.items() if v is not None}


@pytest.mark.parametrize(
    ("name", "metadata", "fragments"),
    [
        ("plain.safetensors", None, ["not a checkpoint written by `verigrad train`", "metadata keys: none"]),
        ("other.safetensors", {"format": "pt"}, ["no digits_cnn metadata", "['format']"]),
        ("noheight.safetensors", _cnn_metadata(height=None), ["metadata field 'height' is None"]),
        ("huge.safetensors", _cnn_metadata(width=BIG), [f"metadata field 'width' is '{BIG}'", "1 to 4096"]),
        ("list.safetensors", _cnn_metadata(config="[1]"), ["metadata field 'config' is not a `verigrad"]),
        ("field.safetensors", _cnn_metadata(config='{"evil": 1}'), ["metadata field 'config'", "evil"]),
        ("epochs.safetensors", _cnn_metadata(config='{"epochs": -1}'), ["epochs must be a positive integer"]),
        ("lr.safetensors", _cnn_metadata(config='{"lr": NaN}'), ["lr must be a finite positive number"]),
        ("tensors.safetensors", _cnn_metadata(), ["do not fit the digits CNN", "missing: 0.weight"]),
        ("state.pt", None, ["a PyTorch checkpoint of 1 entries, not one written by `verigrad train`"]),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_eval_of_a_checkpoint_train_did_not_write_says_so_in_one_line(
    tmp_path, capsys, name, metadata, fragments
):
    """Before, a file without verigrad's metadata (a .pt state dict, a plain safetensors) or with broken
    metadata gave a KeyError, a SafetensorError or a many-line error."""
    path = verigrad.io.save({"w": np.zeros(3, np.float32)}, tmp_path / name, metadata=metadata)
    assert main(["eval", str(path)]) == 1
    one_line(capsys.readouterr().err, "eval", str(path), *fragments)


@pytest.mark.parametrize("what", ["missing", "folder", "empty", "garbage"])
def test_eval_of_what_is_no_checkpoint(tmp_path, capsys, what):
    path = tmp_path / "model.safetensors"
    if what == "folder":
        path.mkdir()
    elif what != "missing":
        path.write_bytes(b"" if what == "empty" else b"\xff" * 100)
    assert main(["eval", str(path)]) == 1
    one_line(capsys.readouterr().err, "eval", str(path))


def test_ir_of_a_folder_or_a_missing_script(tmp_path, capsys):
    assert main(["ir", str(tmp_path)]) == 1
    one_line(capsys.readouterr().err, "ir", str(tmp_path), "is a directory, not a script")
    assert main(["ir", str(tmp_path / "absent.py")]) == 1
    one_line(capsys.readouterr().err, "ir", "no such script")


def verigrad_command(*argv: str, **env: str) -> subprocess.CompletedProcess:
    """`python -m verigrad ARGV` in a fresh process with `env` besides the environment."""
    return subprocess.run(
        [sys.executable, "-m", "verigrad", *argv],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT, **env},
        cwd=ROOT,
    )


def test_a_fresh_process_refuses_in_one_line_too(tmp_path):
    done = verigrad_command("train", "--lr", "nan", "--out", str(tmp_path / "run"))
    assert done.returncode == 2
    one_line(done.stderr, "train", "argument --lr: expected a finite positive number, got 'nan'")
    state = verigrad.io.save({"w": np.zeros(2)}, tmp_path / "state.pt")
    done = verigrad_command("eval", str(state))
    assert done.returncode == 1 and done.stdout == ""
    one_line(done.stderr, "eval", "a PyTorch checkpoint", "not one written by `verigrad train`")
    assert sorted(os.listdir(tmp_path)) == ["state.pt"]


def test_a_bad_verigrad_threads_is_a_warning_line_and_the_command_runs(tmp_path):
    """Before, `VERIGRAD_THREADS=abc verigrad ...` died at import with a traceback."""
    done = verigrad_command("ir", "--batch", "2", VERIGRAD_THREADS="abc")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "%" in done.stdout
    (line,) = done.stderr.splitlines()
    assert line.startswith(
        "<environment>:0: RuntimeWarning: VERIGRAD_THREADS='abc' is ignored: it must be a "
    )


def test_the_same_run_writes_the_same_checkpoint_bytes_wherever_it_is_written(tmp_path):
    """The checkpoint holds what decides the weights, not the output folder or the thread count."""
    paths, before = [], verigrad.backends.threads.THREAD_COUNT.explicit
    try:
        for name, threads in (("a", "1"), ("b", "2")):
            out = tmp_path / name
            argv = ["train", "--epochs", "1", "--batch-size", "256", "--eager", "--threads", threads]
            assert main([*argv, "--out", str(out)]) == 0
            paths.append(out / "model.safetensors")
    finally:
        verigrad.set_threads(before)
    assert paths[0].read_bytes() == paths[1].read_bytes()
    assert main(["eval", str(Path(paths[0]))]) == 0


def test_a_picture_that_fails_midway_leaves_the_old_one(tmp_path, monkeypatch):
    """The training picture is written whole or not at all, as the checkpoint is."""
    from matplotlib.figure import Figure

    from verigrad.cli import plot

    def half_then_fail(self, target, **kwargs):
        if isinstance(target, str | os.PathLike):  # as savefig writes to a path
            Path(target).write_bytes(b"\x89PNG half")
        else:
            target.write(b"\x89PNG half")
        raise OSError("No space left on device")

    picture = tmp_path / "training.png"
    picture.write_bytes(b"the old picture")
    monkeypatch.setattr(Figure, "savefig", half_then_fail)
    history = {"loss": [2.0, 1.0], "train_accuracy": [0.5, 0.6], "test_accuracy": [0.7]}
    images, labels = np.zeros((4, 1, 8, 8)), np.arange(4)
    with pytest.raises(OSError, match="No space left"):
        plot.training_picture(history, images, labels, labels, picture, grid=2)
    assert picture.read_bytes() == b"the old picture"
    assert os.listdir(tmp_path) == ["training.png"]
