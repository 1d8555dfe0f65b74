"""`verigrad train` and `verigrad eval`: the default run's accuracy and time, its checkpoint and picture,
bit-identical reruns, thread-count independence, and one-line errors for bad arguments."""

from __future__ import annotations

import gzip
import hashlib
import re
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

import verigrad
import verigrad.cli.plot
import verigrad.cli.trainer as vt
from verigrad import nn
from verigrad.backends import blas_threads
from verigrad.cli import main
from verigrad.cli.trainer import TrainConfig, train, training_step
from verigrad.data import DataLoader, load_digits, split
from verigrad.models import digits_cnn
from verigrad.optim import Adam

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def plain(text: str) -> str:
    return ANSI.sub("", text)


def spy_on_train(monkeypatch) -> list:
    """Record the TrainResult of every `train` the command runs."""
    results = []
    real = vt.train

    def recording(config, on_step=None, data=None):
        results.append(real(config, on_step, data))
        return results[-1]

    monkeypatch.setattr(vt, "train", recording)
    return results


def png_size(path: Path) -> tuple[int, int]:
    blob = path.read_bytes()
    assert blob[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert blob[12:16] == b"IHDR"
    assert blob[-12:] == b"\0\0\0\0IEND\xaeB`\x82", "the PNG is cut short"
    return struct.unpack(">II", blob[16:24])


# the full run -------------------------------------------------------------------------------------
def test_the_default_run_reaches_97_percent_and_eval_agrees(tmp_path, monkeypatch, capsys):
    results = spy_on_train(monkeypatch)
    out_dir = tmp_path / "run"
    assert main(["train", "--out", str(out_dir)]) == 0
    (result,) = results
    assert result.config == TrainConfig(out=str(out_dir))  # the defaults: 12 epochs, adam, seed 0
    assert result.config.epochs == 12
    assert len(result.history["test_accuracy"]) == 12
    assert result.test_accuracy >= 0.97, result.history["test_accuracy"]
    assert result.seconds <= 30, result.seconds
    out = plain(capsys.readouterr().out)
    assert f"test accuracy {result.test_accuracy:.2%}" in out
    checkpoint = out_dir / "model.safetensors"
    assert result.checkpoint == checkpoint and checkpoint.stat().st_size > 10_000

    picture = out_dir / "training.png"  # matplotlib is in the test extra: the picture is always made
    width, height = png_size(picture)
    assert 600 <= width <= 3000 and 300 <= height <= 1500, (width, height)
    assert 20_000 <= picture.stat().st_size <= 3_000_000
    import matplotlib.pyplot as plt

    pixels = plt.imread(picture)
    assert pixels.shape[:2] == (height, width) and pixels[..., :3].std() > 0.05  # not blank
    assert "picture" in out

    assert main(["eval", str(checkpoint)]) == 0
    out = capsys.readouterr().out
    assert out.strip() == f"{checkpoint}: test accuracy {result.test_accuracy:.2%} on 359 images"
    assert vt.evaluate(checkpoint) == (result.test_accuracy, 359)  # the very same number
    model, config = vt.load_model(checkpoint)
    for field in vt.SAVED_FIELDS:  # what decides the weights (not the output folder or thread count)
        assert getattr(config, field) == getattr(result.config, field), field
    for name, value in result.model.state_dict().items():
        assert np.array_equal(model.state_dict()[name].numpy(), value.numpy()), name


# reproducibility ----------------------------------------------------------------------------------
def short_run(tmp_path: Path, name: str, **overrides) -> vt.TrainResult:
    config = TrainConfig(epochs=2, out=str(tmp_path / name), **overrides)
    return vt.train(config)


@pytest.mark.parametrize("size", [8, 28])
def test_the_digit_panel_shows_each_digit_under_its_label(size):
    """The digits are tiles of one image: each tile is its digit, under "predicted (true)" in green,
    or in red where the prediction is wrong."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(5)
    images = rng.random((9, size, size))
    labels, predicted = np.arange(9), np.arange(9)
    predicted[4] = 7
    fig, ax = plt.subplots()
    try:
        verigrad.cli.plot._digit_mosaic(ax, images, labels, predicted, grid=3)
        (shown,) = ax.get_images()
        mosaic = np.ma.getdata(shown.get_array())
        texts = sorted(ax.texts, key=lambda t: (round(t.get_position()[1]), t.get_position()[0]))
        assert [t.get_text() for t in texts] == [f"{p} ({y})" for p, y in zip(predicted, labels)]
        for t, image, right in zip(texts, images, predicted == labels):
            assert t.get_color() == ("green" if right else "red")
            x, y = t.get_position()  # centred over its tile, just above it
            top, left = int(np.ceil(y)), round(x - (size - 1) / 2)
            np.testing.assert_array_equal(mosaic[top : top + size, left : left + size], image)
        assert np.isnan(mosaic).sum() == mosaic.size - 9 * size * size  # the rest is blank
    finally:
        plt.close(fig)


def test_the_picture_leaves_pyplot_alone(tmp_path):
    """Drawn on a figure of its own: a user's open pyplot figures and backend stay as they were."""
    import matplotlib
    import matplotlib.pyplot as plt

    backend = matplotlib.get_backend()
    mine = plt.figure()
    try:
        history = {"loss": [2.0, 1.0, 0.5, 0.25], "test_accuracy": [0.5, 0.75]}
        digits = np.random.default_rng(6).random((4, 1, 8, 8))
        path = verigrad.cli.plot.training_picture(
            history, digits, np.arange(4), np.arange(4), tmp_path / "p.png"
        )
        assert path.stat().st_size > 10_000
        assert plt.get_fignums() == [mine.number] and plt.gcf() is mine
        assert matplotlib.get_backend() == backend
    finally:
        plt.close(mine)


def test_same_seed_gives_bit_identical_weights_and_another_seed_does_not(tmp_path):
    a, b = short_run(tmp_path, "a", seed=5), short_run(tmp_path, "b", seed=5)
    c = short_run(tmp_path, "c", seed=6)
    sa, sb, sc = (r.model.state_dict() for r in (a, b, c))
    assert sa.keys() == sb.keys() == sc.keys() and len(sa) == 6
    for name in sa:
        assert np.array_equal(sa[name].numpy(), sb[name].numpy()), name
        assert not np.array_equal(sa[name].numpy(), sc[name].numpy()), name
    assert a.history["loss"] == b.history["loss"] != c.history["loss"]
    digests = [hashlib.sha256(r.checkpoint.read_bytes()).hexdigest() for r in (a, b, c)]
    assert digests[0] == digests[1] != digests[2]  # the same run, the same file, in another folder
    saved_a, saved_b = verigrad.io.load(a.checkpoint), verigrad.io.load(b.checkpoint)
    for name in sa:  # the checkpoints hold those same bits
        assert np.array_equal(saved_a[name].numpy(), sa[name].numpy())
        assert np.array_equal(saved_a[name].numpy(), saved_b[name].numpy())


@pytest.fixture
def restore_threads():
    yield
    verigrad.set_threads(1)


def eager_steps(threads: int, steps: int = 4) -> dict[str, np.ndarray]:
    """A few eager training steps of the CNN on the digits, with `threads` threads."""
    verigrad.set_threads(threads)
    if blas_threads() is not None:
        assert blas_threads() == threads  # the setting reached the BLAS library
    train_x, train_y, _, _ = split(*load_digits(), seed=0)
    verigrad.manual_seed(0)
    model = digits_cnn()
    step = training_step(model, Adam(model.parameters(), lr=1e-2), nn.CrossEntropyLoss())
    loader = DataLoader(train_x, train_y, batch_size=256, shuffle=True, seed=0)
    for (xb, yb), _ in zip(loader, range(steps)):
        step(xb, yb)
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


def test_eager_training_steps_do_not_depend_on_the_thread_count(restore_threads):
    one, two, again = eager_steps(1), eager_steps(2), eager_steps(1)
    verigrad.manual_seed(0)
    start = {k: v.numpy() for k, v in digits_cnn().state_dict().items()}
    for name in one:
        assert not np.array_equal(one[name], start[name]), name  # the steps did move the weights
        assert np.array_equal(one[name], two[name]), name
        assert np.array_equal(one[name], again[name]), name


# every optimizer learns ----------------------------------------------------------------------------
@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_the_other_optimizers_learn_in_one_epoch(tmp_path, optimizer):
    result = vt.train(TrainConfig(epochs=1, optimizer=optimizer, out=str(tmp_path)))
    loss = result.history["loss"]
    assert np.mean(loss[-10:]) < 0.6 * np.mean(loss[:10])
    assert result.test_accuracy > 0.6


# MNIST files -------------------------------------------------------------------------------------------
def write_mnist(directory: Path, rng, n_train: int = 40, n_test: int = 16) -> None:
    """Four small IDX files in MNIST's layout (images gzipped, labels plain)."""
    directory.mkdir(parents=True, exist_ok=True)
    for n, image_name, label_name in (
        (n_train, "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte"),
        (n_test, "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte"),
    ):
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        header = struct.pack(">IIII", 0x803, n, 28, 28)
        (directory / image_name).write_bytes(gzip.compress(header + images.tobytes()))
        labels = rng.integers(0, 10, size=n, dtype=np.uint8)
        (directory / label_name).write_bytes(struct.pack(">II", 0x801, n) + labels.tobytes())


def test_train_and_eval_on_mnist_files(tmp_path, rng, monkeypatch, capsys):
    data = tmp_path / "mnist"
    write_mnist(data, rng)
    results = spy_on_train(monkeypatch)
    monkeypatch.setattr(verigrad.cli.plot, "have_matplotlib", lambda: False)
    args = ["train", "--data", "mnist", "--data-dir", str(data), "--epochs", "1", "--batch-size", "8"]
    assert main([*args, "--out", str(tmp_path / "run")]) == 0
    (result,) = results
    assert len(result.history["loss"]) == 5  # 40 images in batches of 8
    assert result.model[7].in_features == 32 * 7 * 7  # built for 28 x 28 images
    capsys.readouterr()
    assert main(["eval", str(result.checkpoint)]) == 0
    assert f"test accuracy {result.test_accuracy:.2%} on 16 images" in capsys.readouterr().out


# without matplotlib -------------------------------------------------------------------------------
def test_without_matplotlib_one_line_says_how_to_get_the_picture(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    assert not verigrad.cli.plot.have_matplotlib()
    assert main(["train", "--epochs", "1", "--out", str(tmp_path)]) == 0
    lines = [line for line in plain(capsys.readouterr().out).splitlines() if "picture" in line]
    assert lines == ['no picture: matplotlib is missing (pip install "verigrad[plot]")']
    assert (tmp_path / "model.safetensors").exists() and not (tmp_path / "training.png").exists()


EPOCHS = "expected a positive integer of at most 1000000"


# bad arguments ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["train", "--epochs", "0"],
            "argument --epochs: expected a positive integer of at most 1000000, got 0",
        ),
        (
            ["train", "--epochs", "two"],
            "argument --epochs: expected a positive integer of at most 1000000, got 'two'",
        ),
        (["train", "--batch-size", "-4"], "argument --batch-size: expected a positive integer"),
        (["train", "--lr", "0"], "argument --lr: expected a positive number, got 0.0"),
        (["train", "--optimizer", "foo"], "argument --optimizer: invalid choice: 'foo'"),
        (["train", "--data", "cifar"], "argument --data: invalid choice: 'cifar'"),
    ],
    ids=["epochs_0", "epochs_word", "batch_negative", "lr_0", "optimizer_foo", "data_cifar"],
)
def test_bad_arguments_are_refused_by_the_parser(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and errors[0].startswith(f"verigrad train: error: {message}"), err


def assert_one_line_error(capsys, command: str, *fragments: str) -> None:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"verigrad {command}: error: ")
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


def test_mnist_without_a_data_dir(tmp_path, capsys):
    assert main(["train", "--data", "mnist", "--out", str(tmp_path)]) == 1
    assert_one_line_error(capsys, "train", "--data mnist needs --data-dir")


def test_mnist_from_an_empty_folder(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["train", "--data", "mnist", "--data-dir", str(empty), "--out", str(tmp_path)]) == 1
    assert_one_line_error(capsys, "train", str(empty), "train-images-idx3-ubyte")
    assert not (tmp_path / "model.safetensors").exists()


def test_mnist_from_a_missing_folder(tmp_path, capsys):
    absent = tmp_path / "absent"
    assert main(["train", "--data", "mnist", "--data-dir", str(absent), "--out", str(tmp_path)]) == 1
    assert_one_line_error(capsys, "train", str(absent), "not a directory")


def test_mnist_with_a_truncated_gzip(tmp_path, rng, capsys):
    data = tmp_path / "mnist"
    write_mnist(data, rng)
    images = data / "train-images-idx3-ubyte.gz"
    images.write_bytes(images.read_bytes()[:-200])
    assert main(["train", "--data", "mnist", "--data-dir", str(data), "--out", str(tmp_path)]) == 1
    assert_one_line_error(capsys, "train", str(images))


def test_eval_of_a_missing_file(tmp_path, capsys):
    missing = tmp_path / "nothing.safetensors"
    assert main(["eval", str(missing)]) == 1
    assert_one_line_error(capsys, "eval", str(missing), "no such checkpoint")


def test_eval_of_a_garbage_file(tmp_path, capsys):
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(b"definitely not safetensors")
    assert main(["eval", str(garbage)]) == 1
    assert_one_line_error(capsys, "eval", str(garbage), "not a valid safetensors file")


def test_eval_of_a_checkpoint_not_written_by_train(tmp_path, capsys):
    other = verigrad.io.save(nn.Linear(2, 2).state_dict(), tmp_path / "linear.safetensors")
    assert main(["eval", str(other)]) == 1
    assert_one_line_error(capsys, "eval", str(other), "not a checkpoint written by `verigrad train`")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"epochs": 0}, "epochs must be a positive integer"),
        ({"batch_size": 0}, "batch_size must be a positive integer"),
        ({"threads": 0}, "threads must be a positive integer"),
        ({"lr": -0.1}, "lr must be a finite positive number, got -0.1"),
        ({"lr": float("inf")}, "lr must be a finite positive number, got inf"),
        ({"lr": float("nan")}, "lr must be a finite positive number, got nan"),
        ({"threads": 1025}, "threads must be at most 1024, got 1025"),
        ({"seed": -1}, "seed must be a non-negative integer, got -1"),
        ({"epochs": True}, "epochs must be a positive integer, got True"),
        ({"optimizer": "foo"}, "unknown optimizer 'foo'"),
    ],
)
def test_bad_configs_raise_value_error(overrides, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**overrides)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"data": "mnist"}, "needs --data-dir"),
        ({"data": "cifar"}, "unknown data set 'cifar'"),
        ({"backend": "nope"}, "unknown backend 'nope'"),
    ],
)
def test_bad_data_or_backend_raise_value_error(tmp_path, overrides, message):
    with pytest.raises(ValueError, match=message):
        vt.train(TrainConfig(out=str(tmp_path), **overrides))
    assert not (tmp_path / "model.safetensors").exists()


def test_compiled_training_gives_the_eager_bits(tmp_path):
    """`verigrad train` compiles its step by default; on the reference backend the weights, losses and
    batch accuracies are the same bits as running every step eagerly (--eager)."""
    runs = {}
    for compiled in (True, False):
        config = TrainConfig(epochs=2, out=str(tmp_path / str(compiled)), compiled=compiled)
        runs[compiled] = train(config)
    fast, slow = runs[True], runs[False]
    assert fast.history == slow.history
    for name, value in fast.model.state_dict().items():
        assert np.array_equal(value.numpy(), slow.model.state_dict()[name].numpy()), name


def test_a_diverging_compiled_run_stops_with_the_loss_named(tmp_path, capsys):
    """A loss that turns NaN after finite steps: the compiled step goes on running (its kernels return
    arrays on NaN too, and replay them; it raised a TypeError), and the trainer stops there in one line,
    writing no checkpoint."""
    out = tmp_path / "run"
    argv = ["train", "--epochs", "1", "--lr", "1e30", "--optimizer", "sgd", "--out", str(out)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("verigrad train: error: the loss is nan at step ") == 1, err
    assert not out.exists()
