"""`verigrad train lm`: the text corpus and its cache (data/text.py), the batches, the schedule, the
options' checks, the loop with its checkpoints, a resumed run bit-identical to an unbroken one, and the
command with `verigrad generate --model` on what it trained."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os

import numpy as np
import pytest

import verigrad as vg
from verigrad.cli import lm_trainer, main
from verigrad.cli.lm_trainer import LMTrainConfig, lr_at
from verigrad.data import text
from verigrad.data.text import TokenBatches, prepare_corpus, split_files, stdlib_files, text_files
from verigrad.io.safetensors_format import read_metadata
from verigrad.models.catalog import load_language_model
from verigrad.models.gpt import GPT

WORDS = ["alpha", "beta", "gamma", "delta", "value", "total", "items", "index", "result", "name"]


def write_corpus(folder, files: int = 8, functions: int = 30, seed: int = 0):
    """Python-like files of small functions, written by the test (no network, no stdlib)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        lines = []
        for i in range(functions):
            a, b, c = rng.choice(WORDS, 3)
            lines += [f"def {a}_{i}({b}, {c}):", f"    return {b} + {c} * {i % 7}", ""]
        (folder / f"module_{f}.py").write_text("\n".join(lines))
    return folder


@pytest.fixture
def corpus_dir(tmp_path):
    return write_corpus(tmp_path / "corpus")


@pytest.fixture
def data_cache(tmp_path, monkeypatch):
    """The token cache in the test's own folder (the CLI reads it from verigrad's cache folder)."""
    cache = tmp_path / "lm-cache"
    monkeypatch.setattr(text, "cache_dir", lambda: cache)
    return cache / "lm-data"


def tiny(corpus_dir, out, **kw) -> LMTrainConfig:
    fields = {
        "layers": 1,
        "heads": 2,
        "width": 16,
        "context": 16,
        "batch": 2,
        "steps": 6,
        "warmup": 2,
        "eval_every": 3,
        "save_every": 3,
        "eval_batches": 2,
        "sample_tokens": 4,
        "vocab_size": 300,
        "data": str(corpus_dir),
        "out": str(out),
        "threads": 1,
    }
    return LMTrainConfig(**{**fields, **kw})


# the corpus -----------------------------------------------------------------------------------------
def test_stdlib_files_leave_out_tests_idle_and_packages():
    files = stdlib_files()
    assert len(files) > 100 and all(f.suffix == ".py" for f in files)
    for f in files:
        assert not {"test", "tests", "idlelib", "site-packages"} & set(f.parts[-4:-1]), f
    assert stdlib_files(limit=5) == files[:5]


def test_text_files_of_a_folder_skip_hidden_ones_and_a_missing_path_is_refused(tmp_path, corpus_dir):
    (corpus_dir / ".hidden").write_text("x")
    assert [f.name for f in text_files(corpus_dir)] == [f"module_{i}.py" for i in range(8)]
    assert text_files(corpus_dir / "module_0.py") == [corpus_dir / "module_0.py"]
    with pytest.raises(ValueError, match="no such file or folder"):
        text_files(tmp_path / "nothing")


def test_split_is_by_file_fixed_by_the_seed_and_keeps_both_sides():
    a, b = split_files(40, seed=0), split_files(40, seed=0)
    np.testing.assert_array_equal(a, b)
    assert a.sum() == 2 and not np.array_equal(a, split_files(40, seed=1))
    assert split_files(2, seed=0).sum() == 1
    with pytest.raises(ValueError, match="at least 2"):
        split_files(1, seed=0)


def test_corpus_is_tokenized_once_then_read_from_the_cache(corpus_dir, tmp_path, monkeypatch):
    files = text_files(corpus_dir)
    first = prepare_corpus(files, 300, seed=0, cache=tmp_path / "c")
    assert first.train.dtype == np.uint16 and isinstance(first.train, np.memmap)
    assert first.train_files == 7 and first.validation_files == 1 and first.vocab_size == 300
    from verigrad.cli.lm_trainer import load_tokenizer

    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "tokenizer.json").write_text(first.tokenizer_json)
    tokenizer = load_tokenizer(tmp_path / "tok")
    end = tokenizer.eos_id
    held_out = [f for f in files if f.read_text() + "<|endoftext|>" == tokenizer.decode(first.validation)]
    assert len(held_out) == 1 and first.validation[-1] == end  # one whole file, then the end token
    assert first.validation_bytes == len(held_out[0].read_bytes())

    def no_training(*args):
        raise AssertionError("the tokenizer was trained again")

    monkeypatch.setattr(text, "train_tokenizer", no_training)
    again = prepare_corpus(files, 300, seed=0, cache=tmp_path / "c")
    np.testing.assert_array_equal(again.train, first.train)
    (corpus_dir / "module_3.py").write_text("def changed():\n    pass\n" * 40)  # a new key: made again
    with pytest.raises(AssertionError, match="trained again"):
        prepare_corpus(files, 300, seed=0, cache=tmp_path / "c")


def test_a_failed_cache_write_leaves_no_temporary_file(corpus_dir, tmp_path, monkeypatch):
    def disk_full(*args):
        raise OSError("No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)  # each file written, then not moved into place
    with pytest.raises(OSError, match="No space left"):
        prepare_corpus(text_files(corpus_dir), 300, seed=0, cache=tmp_path / "c")
    left = [p.name for p in (tmp_path / "c").rglob("*") if p.is_file()]
    assert left == []  # no temporary, and no info.json: the folder is not taken for a complete one
    monkeypatch.undo()
    assert prepare_corpus(text_files(corpus_dir), 300, seed=0, cache=tmp_path / "c").train_files == 7


def test_a_corpus_without_text_is_refused(tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "a.dat").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "bin" / "b.txt").write_text("   \n")
    with pytest.raises(ValueError, match="0 readable UTF-8 text file"):
        prepare_corpus(text_files(tmp_path / "bin"), 300, cache=tmp_path / "c")


def test_batches_depend_on_the_seed_and_step_alone():
    ids = np.arange(1000, dtype=np.uint16)
    batches = TokenBatches(ids, context=8, batch=3, accumulate=2, seed=5)
    x, y = batches(7)
    assert x.shape == y.shape == (2, 3, 8) and x.dtype == np.int64
    np.testing.assert_array_equal(x[..., 1:], y[..., :-1])
    np.testing.assert_array_equal(y - x, 1)
    again = TokenBatches(ids, context=8, batch=3, accumulate=2, seed=5)
    np.testing.assert_array_equal(again(7)[0], x)  # a new sampler (a resumed run) reads the same batch
    assert not np.array_equal(batches(8)[0], x)
    assert not np.array_equal(TokenBatches(ids, 8, 3, 2, seed=6)(7)[0], x)
    with pytest.raises(ValueError, match="too few for one sequence of context 8"):
        TokenBatches(np.arange(9), context=8, batch=1)


# the schedule and the options ---------------------------------------------------------------------
def test_warmup_then_cosine():
    c = LMTrainConfig(steps=110, warmup=10, lr=1.0, min_lr=0.1)
    np.testing.assert_allclose([lr_at(s, c) for s in range(3)], [0.1, 0.2, 0.3], rtol=1e-15)
    assert lr_at(9, c) == 1.0 and lr_at(10, c) == 1.0
    assert math.isclose(lr_at(109, c), 0.1) and math.isclose(lr_at(59.5, c), 0.55)
    after = [lr_at(s, c) for s in range(10, 110)]
    assert all(a >= b for a, b in itertools.pairwise(after))
    assert lr_at(0, dataclasses.replace(c, warmup=0)) == 1.0


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"layers": -1}, "--layers must be a positive integer, got -1"),
        ({"width": 0}, "--width must be a positive integer"),
        ({"heads": 3}, "--heads 3 does not divide --width 128"),
        ({"context": 1 << 17}, "context must be an integer in 1..65536"),
        ({"lr": 0.0}, "--lr must be a finite positive number"),
        ({"clip": -1.0}, "--clip must be a finite non-negative number"),
        ({"min_lr": 1.0}, "min_lr 1.0 is above --lr"),
        ({"vocab_size": 100}, "--vocab-size must be an integer in 257"),
        ({"positions": "rotary", "width": 6, "heads": 2}, "rotary positions need an even head size"),
    ],
)
def test_bad_options_are_refused_when_the_config_is_made(kw, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        LMTrainConfig(**kw)


def test_cli_refuses_bad_options_in_one_line_before_any_work(tmp_path, capsys, data_cache):
    out = tmp_path / "run"
    assert main(["train", "lm", "--heads", "3", "--width", "32", "--out", str(out)]) == 1
    assert "--heads 3 does not divide --width 32" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "lm", "--layers", "-2"])
    assert "expected a positive integer" in capsys.readouterr().err
    assert main(["train", "lm", "--resume", "--out", str(out), "--data", str(tmp_path)]) == 1
    assert "has no checkpoint lm.safetensors to continue from" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["train", "lm", "--data", str(empty), "--out", str(out)]) == 1
    assert "no files in it" in capsys.readouterr().err
    assert not out.exists() and not data_cache.exists()


def test_the_digits_trainer_keeps_its_command(capsys):
    from verigrad.cli import build_parser

    args = build_parser().parse_args(["train", "--epochs", "2"])
    assert args.epochs == 2 and args.run.__name__ == "run_train"
    assert build_parser().parse_args(["train", "lm"]).run.__name__ == "run_train_lm"


# the loop -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("compiled", [False, True])
def test_resumed_run_is_bit_identical_to_an_unbroken_one(tmp_path, corpus_dir, compiled):
    kw = {"accumulate": 2, "dropout": 0.1, "compiled": compiled}  # dropout: the generator's state is saved
    cache = str(tmp_path / "cache")
    straight = lm_trainer.train(lm_trainer.prepare(tiny(corpus_dir, tmp_path / "a", **kw), cache=cache))
    first = lm_trainer.prepare(tiny(corpus_dir, tmp_path / "b", **kw), cache=cache)
    lm_trainer.train(first, stop_after=3)
    assert read_metadata(tmp_path / "b" / "lm.safetensors")["step"] == "3"
    resumed = lm_trainer.train(
        lm_trainer.prepare(tiny(corpus_dir, tmp_path / "b", **kw), resume=True, cache=cache)
    )
    assert resumed.history["loss"] == straight.history["loss"] and len(straight.history["loss"]) == 6
    assert resumed.history["val_loss"] == straight.history["val_loss"]
    ours, theirs = straight.model.state_dict(), resumed.model.state_dict()
    for name in ours:
        assert ours[name].numpy().tobytes() == theirs[name].numpy().tobytes(), name
    a, b = straight.optimizer.state_dict()["state"], resumed.optimizer.state_dict()["state"]
    for i in a:
        for key in a[i]:
            assert np.array_equal(np.asarray(a[i][key].numpy()), np.asarray(b[i][key].numpy())), (i, key)


def test_compiled_resume_continues_bit_identically(tmp_path, corpus_dir):
    cache = str(tmp_path / "cache")
    straight = lm_trainer.train(lm_trainer.prepare(tiny(corpus_dir, tmp_path / "a"), cache=cache))
    lm_trainer.train(lm_trainer.prepare(tiny(corpus_dir, tmp_path / "b"), cache=cache), stop_after=3)
    resumed = lm_trainer.train(lm_trainer.prepare(tiny(corpus_dir, tmp_path / "b"), resume=True, cache=cache))
    assert resumed.history["loss"] == straight.history["loss"]
    ours, theirs = straight.model.state_dict(), resumed.model.state_dict()
    assert all(ours[k].numpy().tobytes() == theirs[k].numpy().tobytes() for k in ours)


def test_resume_refuses_a_run_of_other_options(tmp_path, corpus_dir):
    cache = str(tmp_path / "cache")
    lm_trainer.train(lm_trainer.prepare(tiny(corpus_dir, tmp_path / "a", steps=3), cache=cache))
    with pytest.raises(ValueError, match=r"trained with other options \(--width 16 -> 32\)"):
        lm_trainer.prepare(tiny(corpus_dir, tmp_path / "a", width=32), resume=True, cache=cache)
    with pytest.raises(ValueError, match=r"lm.safetensors is at step 3, past --steps 2$"):
        lm_trainer.prepare(tiny(corpus_dir, tmp_path / "a", steps=2), resume=True, cache=cache)


def test_validation_bits_per_byte_and_the_checkpoint(tmp_path, corpus_dir):
    run = lm_trainer.prepare(
        tiny(corpus_dir, tmp_path / "a", steps=3, eval_every=3), cache=str(tmp_path / "c")
    )
    lm_trainer.train(run)
    loss, bpb = lm_trainer.evaluate(run)
    assert loss == run.history["val_loss"][-1]
    assert math.isclose(bpb, loss / math.log(2) * len(run.corpus.validation) / run.corpus.validation_bytes)
    meta = read_metadata(tmp_path / "a" / "lm.safetensors")
    assert meta["step"] == "3" and json.loads(meta["gpt"])["width"] == 16
    assert json.loads(meta["config"])["steps"] == 3
    model, tokenizer = load_language_model(tmp_path / "a")
    assert isinstance(model, GPT) and not model.training
    ours = run.model.state_dict()
    assert all(np.array_equal(t.numpy(), ours[k].numpy()) for k, t in model.state_dict().items())
    assert tokenizer.vocab_size == run.corpus.vocab_size


def test_a_short_run_learns_the_corpus(tmp_path, corpus_dir):
    config = tiny(
        corpus_dir,
        tmp_path / "a",
        steps=40,
        lr=1e-2,
        min_lr=1e-3,
        warmup=5,
        eval_every=40,
        save_every=40,
        width=32,
        context=32,
        batch=4,
    )
    run = lm_trainer.train(lm_trainer.prepare(config, cache=str(tmp_path / "c")))
    assert np.mean(run.history["loss"][-5:]) < run.history["loss"][0] - 1.5
    assert run.history["val_loss"][-1] < math.log(300) - 1.5


def test_stdlib_corpus_with_a_cap_on_files(tmp_path):
    config = LMTrainConfig(
        max_files=12,
        layers=1,
        heads=2,
        width=16,
        context=16,
        batch=2,
        steps=2,
        vocab_size=300,
        eval_every=2,
        save_every=2,
        eval_batches=1,
        sample_tokens=4,
        out=str(tmp_path / "a"),
        threads=1,
    )
    run = lm_trainer.train(lm_trainer.prepare(config, cache=str(tmp_path / "c")))
    assert run.corpus.train_files + run.corpus.validation_files == 12
    assert all(math.isfinite(v) for v in run.history["loss"])


# the command ----------------------------------------------------------------------------------------
def test_train_lm_command_then_generate_from_its_folder(tmp_path, corpus_dir, data_cache, capsys):
    out = tmp_path / "run"
    args = [
        "train",
        "lm",
        "--data",
        str(corpus_dir),
        "--out",
        str(out),
        "--layers",
        "1",
        "--heads",
        "2",
        "--width",
        "16",
        "--context",
        "16",
        "--batch",
        "2",
        "--steps",
        "4",
        "--eval-every",
        "2",
        "--save-every",
        "2",
        "--vocab-size",
        "300",
        "--threads",
        "1",
        "--warmup",
        "1",
    ]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "validation loss" in printed and "bits per byte" in printed and "step 4/4" in printed
    assert (out / "lm.safetensors").is_file() and (out / "tokenizer.json").is_file()
    assert data_cache.is_dir()
    assert main(["generate", "--model", str(out), "def ", "--max-tokens", "5", "--threads", "1"]) == 0
    captured = capsys.readouterr()
    assert "GPT, context 16, vocab 300" in captured.err and "generated: " in captured.err
    assert main(["chat", "--model", str(out)]) == 1
    assert "has no chat template" in capsys.readouterr().err


def test_the_symbolic_check_of_the_step_changes_nothing_and_finds_shape_errors(monkeypatch):
    config = LMTrainConfig(layers=1, heads=2, width=16, context=16, vocab_size=300)
    model = GPT(config.model_config(300))
    optimizer = lm_trainer.make_optimizer(model, config)
    before = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    lm_trainer.check_step(model, optimizer, config)
    assert all(np.array_equal(v.numpy(), before[k]) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())
    assert all(not s or float(s["step"]) == 0 for s in optimizer.state_dict()["state"].values())

    def wrong_targets(ids, targets):  # a loss that only fails for sequences of other lengths
        return GPT.loss(model, ids, targets[:, :-1])

    monkeypatch.setattr(model, "loss", wrong_targets)
    with pytest.raises(vg.ShapeError):
        lm_trainer.check_step(model, optimizer, config)
