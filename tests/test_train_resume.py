"""`verigrad train --save-every N` and `--resume [PATH]`: a run stopped and resumed writes the checkpoint
bytes (weights, optimizer state, step, generator, history) of a run never stopped, compiled and eager,
from a periodic checkpoint too, on another rank count; a resume with other options is refused by name
before any work; the checkpoint stays readable by `verigrad eval`."""

from __future__ import annotations

import shutil

import pytest
from test_distributed import mpirun

from verigrad.cli import main, trainer
from verigrad.cli.trainer import TrainConfig
from verigrad.errors import WeightFileError
from verigrad.io import load
from verigrad.io.safetensors_format import read_metadata

# 1437 training digits in batches of 240: 5 steps an epoch, 10 in all
SMALL = {"epochs": 2, "batch_size": 240, "threads": 1}


def small(out, **kw) -> TrainConfig:
    return TrainConfig(out=str(out), **(SMALL | kw))


def checkpoint_of(out) -> str:
    return str(out / trainer.CHECKPOINT)


@pytest.mark.parametrize(
    "kw, stop",
    [
        ({"compiled": False}, 7),  # within the second epoch
        ({"compiled": True}, 7),
        ({"compiled": True}, 5),  # at the end of the first, its test accuracy taken before the save
        ({"compiled": False, "optimizer": "sgd"}, 3),
        ({"compiled": False, "optimizer": "adamw", "lr": 3e-3}, 8),
    ],
)
def test_a_stopped_and_resumed_run_writes_the_bytes_of_an_unbroken_one(tmp_path, kw, stop):
    straight = trainer.train(small(tmp_path / "a", **kw))
    first = trainer.train(small(tmp_path / "b", **kw), stop_after=stop)
    assert read_metadata(first.checkpoint)["step"] == str(stop)
    assert first.checkpoint.read_bytes() != straight.checkpoint.read_bytes()
    resumed = trainer.train(small(tmp_path / "b", resume=checkpoint_of(tmp_path / "b"), **kw))
    assert resumed.checkpoint.read_bytes() == straight.checkpoint.read_bytes()
    assert resumed.history == straight.history and len(resumed.history["loss"]) == 10
    assert resumed.test_accuracy == straight.test_accuracy
    tensors = load(resumed.checkpoint)
    assert any(k.startswith("optimizer.") for k in tensors)  # the optimizer's state is in the bytes compared


def test_save_every_writes_checkpoints_a_run_resumes_from(tmp_path, monkeypatch):
    straight = trainer.train(small(tmp_path / "a"))
    steps, real = [], trainer._save_checkpoint

    def keeping(run, path, meta):  # a copy of each checkpoint as it is written
        real(run, path, meta)
        steps.append(run.start)
        shutil.copy(path, tmp_path / f"step{run.start}.safetensors")

    monkeypatch.setattr(trainer, "_save_checkpoint", keeping)
    trainer.train(small(tmp_path / "b", save_every=3))
    assert steps == [3, 6, 9, 10]
    assert (tmp_path / "step10.safetensors").read_bytes() == straight.checkpoint.read_bytes()
    monkeypatch.setattr(trainer, "_save_checkpoint", real)
    resumed = trainer.train(small(tmp_path / "c", save_every=3, resume=str(tmp_path / "step6.safetensors")))
    assert resumed.checkpoint.read_bytes() == straight.checkpoint.read_bytes()


def test_the_command_resumes_from_its_out_folder(tmp_path, capsys):
    args = ["train", "--epochs", "2", "--batch-size", "240", "--threads", "1", "--eager"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    trainer.train(small(tmp_path / "b", compiled=False), stop_after=4)
    capsys.readouterr()
    assert main([*args, "--out", str(tmp_path / "b"), "--resume"]) == 0
    assert "resuming" in capsys.readouterr().out
    ours, theirs = (tmp_path / d / trainer.CHECKPOINT for d in "ab")
    assert ours.read_bytes() == theirs.read_bytes()
    _, config = trainer.load_model(ours)  # eval's reader skips the optimizer's tensors
    assert config.epochs == 2 and config.resume is None
    assert main(["eval", str(ours)]) == 0 and "test accuracy" in capsys.readouterr().out


def test_epochs_may_grow(tmp_path):
    trainer.train(small(tmp_path, epochs=1))
    longer = trainer.train(small(tmp_path, epochs=2, resume=checkpoint_of(tmp_path)))
    assert len(longer.history["loss"]) == 10 and len(longer.history["test_accuracy"]) == 2
    assert read_metadata(longer.checkpoint)["step"] == "10"
    with pytest.raises(ValueError, match=r"is at step 10, past the 5 steps of --epochs 1"):
        trainer.prepare(small(tmp_path, epochs=1, resume=checkpoint_of(tmp_path)))


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"batch_size": 120}, "--batch-size 240 -> 120"),
        ({"optimizer": "sgd"}, "--optimizer 'adam' -> 'sgd'"),
        ({"lr": 0.05}, "--lr None -> 0.05"),
        ({"seed": 3}, "--seed 0 -> 3"),
        ({"compiled": False}, "--eager off -> on"),
        ({"shards": 2}, "--shards 1 -> 2"),
    ],
)
def test_a_resume_with_other_options_is_refused_naming_them(tmp_path, kw, message):
    trainer.train(small(tmp_path, epochs=1))
    before = (tmp_path / trainer.CHECKPOINT).read_bytes()
    with pytest.raises(ValueError, match=rf"--resume: .* was trained with other options \({message}\)"):
        trainer.prepare(small(tmp_path, resume=checkpoint_of(tmp_path), **kw))
    assert (tmp_path / trainer.CHECKPOINT).read_bytes() == before


def test_the_command_refuses_a_resume_before_any_work(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--out", str(out), "--resume"]) == 1
    assert "is not a checkpoint file to continue from" in capsys.readouterr().err
    assert not out.exists()
    trainer.train(small(out, epochs=1))
    assert main(["train", "--out", str(out), "--batch-size", "240", "--resume", "--optimizer", "sgd"]) == 1
    err = capsys.readouterr().err
    assert "trained with other options (--epochs" not in err and "--optimizer 'adam' -> 'sgd'" in err
    assert "--threads" not in err  # not saved: it does not decide the bits


def test_a_checkpoint_without_training_state_is_refused(tmp_path):
    from verigrad.io import save

    model, _ = trainer.load_model(trainer.train(small(tmp_path, epochs=1)).checkpoint)
    meta = read_metadata(tmp_path / trainer.CHECKPOINT)
    old = {k: meta[k] for k in ("model", "height", "width", "config")}  # as earlier versions wrote
    save(model.state_dict(), tmp_path / "old.safetensors", metadata=old)
    with pytest.raises(WeightFileError, match="not a checkpoint of `verigrad train` with its training state"):
        trainer.prepare(small(tmp_path, resume=str(tmp_path / "old.safetensors")))


def test_a_one_process_run_resumed_on_two_ranks_writes_the_same_bits(tmp_path):
    """--shards 2 stopped after 7 steps in one process, resumed under mpiexec -n 2: the bytes of the
    unbroken one-process run."""
    straight = trainer.train(small(tmp_path / "a", shards=2)).checkpoint.read_bytes()
    trainer.train(small(tmp_path / "b", shards=2), stop_after=7)
    args = ["--epochs", "2", "--batch-size", "240", "--threads", "1", "--shards", "2"]
    done = mpirun(2, "verigrad", "train", *args, "--out", str(tmp_path / "b"), "--resume", timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("verigrad train") == 1  # rank 0 alone prints
    assert (tmp_path / "b" / trainer.CHECKPOINT).read_bytes() == straight


@pytest.mark.parametrize("compiled", [False, True])
def test_a_random_op_draws_what_the_unbroken_run_draws(tmp_path, monkeypatch, compiled):
    """A dropout after the CNN (no parameters: the same names): the generator's state is restored."""
    from verigrad.nn import Dropout, Sequential

    real = trainer.digits_cnn
    monkeypatch.setattr(trainer, "digits_cnn", lambda h, w: Sequential(*real(h, w), Dropout(0.3)))
    straight = trainer.train(small(tmp_path / "a", compiled=compiled))
    trainer.train(small(tmp_path / "b", compiled=compiled), stop_after=6)
    resumed = trainer.train(small(tmp_path / "b", compiled=compiled, resume=checkpoint_of(tmp_path / "b")))
    assert resumed.checkpoint.read_bytes() == straight.checkpoint.read_bytes()


def test_a_two_rank_run_resumed_in_one_process_writes_the_same_bits(tmp_path):
    """One epoch on 2 ranks (--shards 2), a second in one process: the bytes of both epochs in one."""
    trainer.train(small(tmp_path / "a", epochs=1, shards=2))
    one = trainer.train(small(tmp_path / "a", shards=2, resume=checkpoint_of(tmp_path / "a")))
    args = ["--epochs", "1", "--batch-size", "240", "--threads", "1", "--shards", "2", "--save-every", "2"]
    done = mpirun(2, "verigrad", "train", *args, "--out", str(tmp_path / "b"), timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    resumed = trainer.train(small(tmp_path / "b", shards=2, resume=checkpoint_of(tmp_path / "b")))
    assert resumed.checkpoint.read_bytes() == one.checkpoint.read_bytes()
