"""The shared loop on the command line of `verigrad train lm` and `verigrad finetune`: its options
(cli/loop_options.py: one declaration, the same parsing in both commands, each command's own defaults) and
its progress bar (cli/loop_progress.py)."""

from __future__ import annotations

import io
from dataclasses import fields

import pytest
from rich.console import Console

from verigrad.cli import build_parser, finetune, lm_train
from verigrad.cli.finetune_trainer import FinetuneConfig
from verigrad.cli.lm_trainer import LMTrainConfig
from verigrad.cli.loop_options import run_config
from verigrad.cli.loop_progress import loop_progress

LOOP = [
    "--batch",
    "3",
    "--accumulate",
    "2",
    "--steps",
    "7",
    "--lr",
    "0.01",
    "--min-lr",
    "0.001",
    "--warmup",
    "2",
    "--weight-decay",
    "0.5",
    "--clip",
    "0",
    "--eval-every",
    "4",
    "--save-every",
    "5",
    "--seed",
    "9",
    "--threads",
    "2",
    "--eager",
    "--backend",
    "reference",
]
PARSED = {
    "batch": 3,
    "accumulate": 2,
    "steps": 7,
    "lr": 0.01,
    "min_lr": 0.001,
    "warmup": 2,
    "weight_decay": 0.5,
    "clip": 0.0,
    "eval_every": 4,
    "save_every": 5,
    "seed": 9,
    "threads": 2,
    "compiled": False,
    "backend": "reference",
}
COMMANDS = [
    (["train", "lm"], lm_train, LMTrainConfig),
    (["finetune", "--data", "chats.jsonl"], finetune, FinetuneConfig),
]


@pytest.mark.parametrize("command, module, config", COMMANDS)
def test_both_commands_parse_the_loop_options_into_their_configs(tmp_path, command, module, config):
    args = build_parser().parse_args([*command, *LOOP, "--out", str(tmp_path)])
    made = module.config_from(args)
    assert {k: getattr(made, k) for k in PARSED} == PARSED and not args.resume
    assert build_parser().parse_args([*command, "--resume"]).resume


@pytest.mark.parametrize("command, module, config", COMMANDS)
def test_the_defaults_are_the_configs(command, module, config):
    args = build_parser().parse_args(command)
    made, default = module.config_from(args), {f.name: f.default for f in fields(config)}
    assert all(getattr(made, k) == default[k] for k in PARSED if k != "threads")


@pytest.mark.parametrize("command, module, config", COMMANDS)
def test_a_bad_loop_option_is_refused_by_name(capsys, command, module, config):
    with pytest.raises(SystemExit):
        build_parser().parse_args([*command, "--min-lr", "-1"])
    assert "--min-lr: expected a non-negative number, got -1.0" in capsys.readouterr().err


def test_the_progress_bar_shows_the_step_loss_and_throughput():
    console = Console(file=io.StringIO(), width=200, force_terminal=False)
    with loop_progress(console, "train", 10, 2, "answer tokens") as (progress, on_step):
        on_step({"step": 3, "loss": 1.23456, "tokens_per_s": 4567.0})
        task = progress.tasks[0]
        assert (task.completed, task.total, task.fields["loss"]) == (3, 10, 1.23456)
        progress.refresh()
    text = console.file.getvalue()
    assert "step 3/10" in text and "loss 1.235" in text and "4,567 answer tokens/s" in text


@pytest.mark.parametrize("command", [["train"], ["train", "lm"]])
def test_both_trainers_take_shards(capsys, command):
    assert build_parser().parse_args([*command, "--shards", "2"]).shards == 2
    assert build_parser().parse_args(command).shards is None  # the ranks'
    with pytest.raises(SystemExit):
        build_parser().parse_args([*command, "--shards", "0"])
    assert "--shards: expected a positive integer, got 0" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["train"], ["train", "lm"], ["finetune", "--data", "chats.jsonl"]])
def test_every_trainer_takes_threads_eager_and_backend(command):
    args = build_parser().parse_args([*command, "--threads", "2", "--eager", "--backend", "reference"])
    assert (args.threads, args.eager, args.backend) == (2, True, "reference")
    assert run_config(args) == {"threads": 2, "compiled": False, "backend": "reference"}
    args = build_parser().parse_args(command)
    assert (args.threads, args.eager, args.backend) == (None, False, "cpu")
