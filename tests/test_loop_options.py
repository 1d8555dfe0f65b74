"""The shared loop's options of `verigrad train lm` and `verigrad finetune` (cli/loop_options.py): one
declaration, the same parsing in both commands, each command's own defaults."""

from __future__ import annotations

from dataclasses import fields

import pytest

from verigrad.cli import build_parser, finetune, lm_train
from verigrad.cli.finetune_trainer import FinetuneConfig
from verigrad.cli.lm_trainer import LMTrainConfig

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
