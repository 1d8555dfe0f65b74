"""cli/train_loop.py's checks of a resumed run, shared by `verigrad train`, `train lm` and `finetune`: the
output folder, the checkpoint's presence and kind, the options that must match (each named, saved value
-> new value) and the step it is at; the language-model steps traced for any batch and length; a model
evaluated in eval mode."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import numpy as np
import pytest

from verigrad import ones
from verigrad.cli.train_loop import (
    check_out_folder,
    check_same_run,
    check_step,
    check_token_step,
    evaluating,
    option_name,
    saved_run,
)
from verigrad.errors import ShapeError, WeightFileError
from verigrad.io import save
from verigrad.nn import Dropout, Linear, Sequential
from verigrad.ops.creation import Generator


@dataclass
class Config:
    out: str
    steps: int = 10
    min_lr: float = 0.1
    targets: tuple[str, ...] = ("q", "v")
    seed: int = 0


NAMES = ("min_lr", "targets", "seed")


def checkpoint(folder, config: Config, step: int, model: str = "m") -> None:
    """A trainer's checkpoint with the metadata every one holds (the loop's keys: checkpoint_checks.py)."""
    generator = json.loads(bytes(Generator(0).get_state().numpy()).decode())
    meta = {"model": model, "config": json.dumps(asdict(config)), "step": str(step)}
    meta |= {"generator": json.dumps(generator), "param_groups": "[]", "history": "{}"}
    save({"w": np.zeros(2, np.float32)}, folder / "run.safetensors", metadata=meta)


def test_each_differing_option_is_named_with_both_values():
    saved = {"min_lr": 0.1, "targets": ["q", "v"], "seed": 0}
    check_same_run("p", saved, Config("o"), NAMES)  # a tuple equals JSON's list of it
    with pytest.raises(ValueError) as e:
        check_same_run("p", saved, Config("o", min_lr=0.2, targets=("q",), seed=1), NAMES)
    assert str(e.value) == (
        "--resume: p was trained with other options "
        "(--min-lr 0.1 -> 0.2; --targets ['q', 'v'] -> ('q',); --seed 0 -> 1)"
    )
    shown = lambda name, value: "off" if value else "on"  # as `verigrad train`'s --eager
    with pytest.raises(ValueError, match=r"options \(--eager on -> off\)$"):
        check_same_run("p", {"seed": 0}, Config("o", seed=1), ["seed"], lambda name: "--eager", shown)
    check_same_run("p", saved, Config("o", steps=3), NAMES)  # options not named may change
    assert option_name("weight_decay") == "--weight-decay"


def test_a_step_past_the_runs_steps_is_refused():
    check_step("p", 10, 10, "--steps 10")
    with pytest.raises(ValueError, match=r"^--resume: p is at step 11, past --steps 10$"):
        check_step("p", 11, 10, "--steps 10")


def test_saved_run_checks_the_folder_then_the_checkpoint(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="the output folder exists and is not a directory"):
        check_out_folder(tmp_path / "file")
    with pytest.raises(ValueError, match="the output folder exists and is not a directory"):
        saved_run(Config(str(tmp_path / "file")), "run.safetensors", False, "m", "cmd", NAMES)
    assert saved_run(Config(str(tmp_path / "new")), "run.safetensors", False, "m", "cmd", NAMES) is None
    with pytest.raises(ValueError, match=r"--resume: .*new has no checkpoint run.safetensors to continue"):
        saved_run(Config(str(tmp_path / "new")), "run.safetensors", True, "m", "cmd", NAMES)
    checkpoint(tmp_path, Config(str(tmp_path), steps=10), step=7)
    saved = saved_run(Config(str(tmp_path)), "run.safetensors", True, "m", "cmd", NAMES)
    assert saved["step"] == 7 and saved["config"]["targets"] == ["q", "v"]
    with pytest.raises(WeightFileError, match="not a checkpoint of `cmd`"):
        saved_run(Config(str(tmp_path)), "run.safetensors", True, "other", "cmd", NAMES)
    with pytest.raises(ValueError, match=r"other options \(--seed 0 -> 2\)"):
        saved_run(Config(str(tmp_path), seed=2), "run.safetensors", True, "m", "cmd", NAMES)
    with pytest.raises(ValueError, match=r"is at step 7, past --steps 6$"):
        saved_run(Config(str(tmp_path), steps=6), "run.safetensors", True, "m", "cmd", NAMES)


def test_a_token_step_is_traced_for_every_batch_and_length():
    check_token_step(lambda x, y: (x + y).sum(), 2)
    with pytest.raises(ShapeError, match=r"matmul\(f32\[2, batch, tokens\], f32\[16, 2\]\)"):
        check_token_step(lambda x, y: x.float() @ ones(16, 2), 2)  # right for T = 16 only


def test_evaluating_puts_the_model_back_in_its_mode_even_after_an_error():
    model = Sequential(Linear(2, 2), Dropout(0.5))
    with evaluating(model):
        assert not model.training and not model[1].training
    assert model.training and model[1].training
    with pytest.raises(KeyError), evaluating(model):
        raise KeyError("a failed evaluation")
    assert model.training
    model.eval()
    with evaluating(model):
        pass
    assert not model.training  # as it was
