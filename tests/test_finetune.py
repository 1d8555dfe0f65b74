"""`verigrad finetune`: LoRA layers (PEFT's semantics), chat examples with answer-only targets, the loop
(the quantized base untouched, resume bit-identical), and the exports: the merged GGUF (F16, Q8_0) and the
adapters under PEFT's names."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest
from finetune_fakes import write_chats
from gguf import GGUFWriter
from hypothesis import given, settings
from hypothesis import strategies as st
from llama_gguf import HEADS, KV_HEADS, write_llama_gguf

import verigrad as vg
from verigrad.cli import finetune_trainer as ft
from verigrad.cli import main
from verigrad.cli.finetune_data import IGNORE, ChatBatches, encode_chat, prepare_examples, read_jsonl, rows
from verigrad.io import load
from verigrad.io.atomic import temporaries
from verigrad.io.gguf import read_gguf
from verigrad.io.gguf_writer import write_like
from verigrad.io.tokenizer import Tokenizer
from verigrad.models.llama import Llama
from verigrad.models.lora import TARGETS, add_lora, gguf_weights, half_split_rows, interleaved_rows
from verigrad.nn import Linear
from verigrad.nn.lora import LoRA, LoRALinear
from verigrad.nn.quant import QLinear

ALL = TARGETS


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ft")
    return write_llama_gguf(folder / "tiny.gguf"), write_chats(folder / "chats.jsonl", 20), folder


def config(files, out, **kw) -> ft.FinetuneConfig:
    gguf, data, _ = files
    base = dict(model=str(gguf), data=str(data), out=str(out), steps=6, batch=2, context=64, eval_every=3)
    base |= dict(save_every=3, threads=1, lr=1e-2, min_lr=1e-3, warmup=2, targets=ALL, rank=4, alpha=8.0)
    return ft.FinetuneConfig(**(base | kw))


# the layer ------------------------------------------------------------------------------------------
def test_lora_is_the_base_plus_scaled_b_a_and_starts_as_the_base():
    vg.manual_seed(0)
    base = Linear(40, 12, bias=False)
    layer = LoRALinear(base, [("a", 5), ("b", 3), ("c", 4)], ["a", "c"], r=3, alpha=6.0)
    x = np.random.default_rng(0).normal(size=(2, 7, 40)).astype(np.float32)
    np.testing.assert_array_equal(layer(vg.from_numpy(x)).numpy(), base(vg.from_numpy(x)).numpy())
    a = layer.adapters["a"].lora_A.numpy()
    assert (
        a.shape == (3, 40) and np.abs(a).max() <= 1 / math.sqrt(40) and np.abs(a).max() > 0.5 / math.sqrt(40)
    )
    assert not base.weight.requires_grad and {n for n, _ in layer.named_parameters()} == {
        "base.weight",
        "adapters.a.lora_A",
        "adapters.a.lora_B",
        "adapters.c.lora_A",
        "adapters.c.lora_B",
    }
    rng = np.random.default_rng(1)
    with vg.no_grad():
        for name in ("a", "c"):
            b = layer.adapters[name].lora_B
            b.assign(vg.from_numpy(rng.normal(size=b.shape).astype(np.float32)))
    w = base.weight.numpy().astype(np.float64)
    for name, rows_ in (("a", slice(0, 5)), ("c", slice(8, 12))):
        adapter = layer.adapters[name]
        w[rows_] += 2.0 * adapter.lora_B.numpy().astype(np.float64) @ adapter.lora_A.numpy()
    np.testing.assert_allclose(layer(vg.from_numpy(x)).numpy(), x @ w.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(layer.delta() + base.weight.numpy(), w, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"r": 0}, "rank r must be a positive integer"),
        ({"alpha": float("inf")}, "alpha must be a positive finite number"),
        ({"targets": ["z"]}, "none of the parts"),
    ],
)
def test_lora_refuses_bad_settings(kw, message):
    args = {"r": 2, "alpha": 4.0, "targets": ["a"]} | kw
    with pytest.raises(ValueError, match=message):
        LoRALinear(Linear(8, 4), [("a", 4)], args["targets"], args["r"], args["alpha"])


@settings(database=None, derandomize=True, max_examples=10, deadline=None)
@given(heads=st.integers(1, 4), half=st.integers(1, 4), cols=st.integers(1, 3))
def test_rope_row_orders_invert_each_other(heads, half, cols):
    w = np.arange(heads * half * 2 * cols, dtype=np.float32).reshape(heads * half * 2, cols)
    np.testing.assert_array_equal(half_split_rows(interleaved_rows(w, heads), heads), w)
    # llama.cpp's order: within a head, row pairs (i, i + half) side by side
    assert interleaved_rows(w, heads)[1, 0] == w[half, 0]


# the data -------------------------------------------------------------------------------------------
def test_answer_tokens_are_the_assistant_turns_and_pairs_are_user_then_assistant(tmp_path):
    tok = Tokenizer.from_gguf(write_llama_gguf(tmp_path / "t.gguf"))
    chat = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "world"},
        {"role": "user", "content": "hell"},
        {"role": "assistant", "content": "hello world"},
    ]
    e = encode_chat(tok, chat)
    assert tok.decode(e.ids) == tok.apply_chat_template(chat, add_generation_prompt=False)
    spans, start = [], None
    for i, flag in enumerate([*e.answer.tolist(), False]):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            spans.append(tok.decode(e.ids[start:i]))
            start = None
    assert spans == ["world<|im_end|>\n", "hello world<|im_end|>\n"]
    path = tmp_path / "d.jsonl"
    path.write_text(
        json.dumps({"prompt": "hello", "completion": "world"})
        + "\n\n"
        + json.dumps(
            {"messages": [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "world"}]}
        )
        + "\n"
    )
    one, two = (encode_chat(tok, m) for m in read_jsonl(path))
    np.testing.assert_array_equal(one.ids, two.ids)
    np.testing.assert_array_equal(one.answer, two.answer)
    x, y = rows([one], len(one.ids) + 2, pad=2)  # targets: the next token where it is an answer, else IGNORE
    n = len(one.ids) - 1
    np.testing.assert_array_equal(x[0, :n], one.ids[:-1])
    np.testing.assert_array_equal(y[0, :n], np.where(one.answer[1:], one.ids[1:], IGNORE))
    assert (y[0, n:] == IGNORE).all() and (x[0, n:] == 2).all()


@pytest.mark.parametrize(
    "line, message",
    [
        ("not json", "line 2: not JSON"),
        ('{"text": "x"}', 'line 2: expected {"messages"'),
        ('{"messages": [{"role": "user", "content": "a"}]}', "line 2: no assistant message"),
        ('{"messages": [{"role": "user"}]}', "line 2: a message is"),
        ('{"prompt": 1, "completion": "a"}', "line 2: prompt and completion must be strings"),
    ],
)
def test_bad_lines_are_named(tmp_path, line, message):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"prompt": "a", "completion": "b"}) + "\n" + line + "\n")
    with pytest.raises(ValueError, match=message):
        read_jsonl(path)


def test_the_demo_data_is_shipped_and_valid(tmp_path):
    tok = Tokenizer.from_gguf(write_llama_gguf(tmp_path / "t.gguf"))
    examples, cut = prepare_examples("demo", tok, 256)
    assert len(examples) == 30 and cut == 0


def test_long_examples_are_cut_and_one_without_an_answer_in_the_context_is_refused(tmp_path):
    gguf = write_llama_gguf(tmp_path / "t.gguf")
    tok = Tokenizer.from_gguf(gguf)
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"prompt": "hi", "completion": "world " * 40}) + "\n")
    examples, cut = prepare_examples(path, tok, 80)
    assert cut == 1 and len(examples[0].ids) == 81
    path.write_text(json.dumps({"prompt": "hello " * 40, "completion": "world"}) + "\n")
    with pytest.raises(ValueError, match="example 1: no answer token within the first 80"):
        prepare_examples(path, tok, 80)


def test_batches_depend_on_the_seed_and_step_alone_and_cover_each_epoch(tmp_path):
    tok = Tokenizer.from_gguf(write_llama_gguf(tmp_path / "t.gguf"))
    examples, _ = prepare_examples(write_chats(tmp_path / "c.jsonl", 10), tok, 64)
    a = ChatBatches(examples, batch=2, accumulate=2, seed=3, pad=2)
    b = ChatBatches(examples, batch=2, accumulate=2, seed=3, pad=2)
    np.testing.assert_array_equal(a(7)[0], b(7)[0])
    firsts = np.concatenate([a.indices(s) for s in range(5)])  # 20 examples: two epochs of 10
    assert sorted(firsts[:10]) == list(range(10)) and sorted(firsts[10:]) == list(range(10))
    assert a(0)[0].shape == (2, 2, a.length)
    assert not np.array_equal(ChatBatches(examples, 2, 2, 4, 2).indices(0), a.indices(0))


# training -------------------------------------------------------------------------------------------
def test_lora_trains_the_adapters_alone_on_the_quantized_base(files, tmp_path):
    run = ft.prepare(config(files, tmp_path / "r"))
    qkv = run.model.layers[0].self_attn.qkv_proj
    assert isinstance(qkv, LoRALinear) and isinstance(qkv.base, QLinear)  # still quantized, in memory
    blocks = {n: b.numpy().copy() for n, b in run.model.named_buffers()}
    trained = {n for n, p in run.model.named_parameters() if p.requires_grad}
    assert trained and all(".lora_" in n for n in trained)
    ft.train(run)
    assert run.history["loss"][-1] < run.history["loss"][0]
    for name, value in run.model.named_buffers():
        np.testing.assert_array_equal(value.numpy(), blocks[name])
    assert all(not p.requires_grad for n, p in run.model.named_parameters() if n not in trained)


def test_the_loss_is_the_answer_tokens_mean_cross_entropy(files, tmp_path):
    run = ft.prepare(config(files, tmp_path / "r"))
    x, y = ChatBatches(run.train, 2, 1, 0, run.pad)(0)
    logits = run.model(vg.from_numpy(x[0])).numpy().astype(np.float64)
    logp = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True))
    logp -= logits.max(-1, keepdims=True)
    keep = y[0] != IGNORE
    expected = -np.take_along_axis(logp, np.where(keep, y[0], 0)[..., None], -1)[..., 0][keep].mean()
    assert float(ft.loss(run.model, vg.from_numpy(x[0]), vg.from_numpy(y[0]))) == pytest.approx(
        expected, 1e-5
    )


@pytest.mark.parametrize("compiled", [True, False])
def test_resumed_run_is_bit_identical_to_an_unbroken_one(files, tmp_path, compiled):
    straight = ft.train(ft.prepare(config(files, tmp_path / "a", compiled=compiled, accumulate=2)))
    first = ft.prepare(config(files, tmp_path / "b", compiled=compiled, accumulate=2))
    ft.train(first, stop_after=3)
    assert not (tmp_path / "b" / ft.ADAPTERS).exists()  # exported at the end only
    resumed = ft.train(
        ft.prepare(config(files, tmp_path / "b", compiled=compiled, accumulate=2), resume=True)
    )
    assert resumed.history["loss"] == straight.history["loss"]
    assert resumed.history["val_loss"] == straight.history["val_loss"]
    for (name, p), q in zip(straight.model.named_parameters(), resumed.model.parameters()):
        np.testing.assert_array_equal(p.numpy(), q.numpy(), err_msg=name)


def test_resume_refuses_a_run_of_other_options(files, tmp_path):
    ft.train(ft.prepare(config(files, tmp_path / "a", steps=3)))
    with pytest.raises(ValueError, match=r"other options .*--rank 4 -> 8"):
        ft.prepare(config(files, tmp_path / "a", rank=8), resume=True)
    with pytest.raises(ValueError, match=r"finetune.safetensors is at step 3, past --steps 2$"):  # no export
        ft.prepare(config(files, tmp_path / "a", steps=2), resume=True)


def test_full_fine_tuning_trains_every_weight_in_f32(files, tmp_path):
    run = ft.train(ft.prepare(config(files, tmp_path / "f", full=True, lr=1e-3, merge="f16")))
    assert not any(isinstance(m, QLinear) for m in run.model.modules())
    assert all(p.requires_grad for p in run.model.parameters())
    assert run.model.lm_head is None  # tied: the logits read the trained embedding
    assert run.history["loss"][-1] < run.history["loss"][0]
    assert not (tmp_path / "f" / ft.ADAPTERS).exists() and (tmp_path / "f" / "model-f16.gguf").is_file()


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"targets": ("q_proj", "wq")}, "LoRA targets must be distinct names among q_proj"),
        ({"rank": 0}, "rank r must be a positive integer"),
        ({"merge": "q4_0"}, "--merge must be one of f16, q8_0"),
        ({"min_lr": 1.0}, "min_lr 1.0 is above --lr"),
        ({"data": ""}, "--data: a JSONL file"),
    ],
)
def test_bad_options_are_refused_when_the_config_is_made(files, tmp_path, kw, message):
    with pytest.raises(ValueError, match=message):
        config(files, tmp_path, **kw)


# exports --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tuned(files, tmp_path_factory):
    out = tmp_path_factory.mktemp("tuned")
    run = ft.train(ft.prepare(config(files, out, steps=8)))
    for merge in ("f16", "q8_0"):
        run.config.merge = merge
        ft.export(run)
    return run, out


# The export rounds each merged weight once: F16 to 11 significant bits (rms relative error ~2^-11 / sqrt(3),
# 3e-4), Q8_0 to a step d = max|block| / 127 (rms error d / sqrt(12): ~0.6% of the weights' spread for
# normal weights). A product's relative error is about its weights' (first order), and this random
# 2-block model (weights N(0, 0.2), tied head) amplifies it through the blocks: measured 0.16% (F16) and
# 2.2% (Q8_0) of the largest logit. The bounds leave about 2x to spare.
BOUNDS = {"f16": 4e-3, "q8_0": 4e-2}
SHARE = {"f16": 0.02, "q8_0": 0.5}  # the error as a share of what fine-tuning changed


def test_the_merged_gguf_is_written_whole_or_not_at_all(files, tmp_path, monkeypatch):
    """As the checkpoints (io/atomic.py): a write that fails midway leaves the file before it and no
    temporary, and a temporary a writer that is gone left is removed."""
    weights = {name: t.dequantize() for name, t in read_gguf(files[0]).tensors.items()}
    path = write_like(tmp_path / "m.gguf", files[0], weights, "f16")
    before = path.read_bytes()
    stale = tmp_path / ".m.gguf.999999999.0123abcd.tmp"  # no process has that id
    stale.write_bytes(b"half a file")

    def failing(writer, *args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(GGUFWriter, "write_tensors_to_file", failing)
    with pytest.raises(RuntimeError, match="disk full"):
        write_like(path, files[0], weights, "q8_0")
    assert path.read_bytes() == before and temporaries(path) == []


@pytest.mark.parametrize("merge", ["f16", "q8_0"])
def test_the_merged_gguf_gives_the_fine_tuned_logits_within_the_rounding(tuned, files, merge):
    run, out = tuned
    path = out / f"model-{merge}.gguf"
    source, exported = read_gguf(files[0]), read_gguf(path)
    skip = ("general.file_type",)
    assert {k: v for k, v in exported.metadata.items() if k not in skip} == {
        k: v for k, v in source.metadata.items() if k not in skip
    }  # the tokenizer, chat template and hyperparameters
    assert exported.metadata["general.file_type"] == {"f16": 1, "q8_0": 7}[merge]
    assert list(exported.tensors) == list(source.tensors)
    weights = gguf_weights(run.model, source.tensors)
    for name, t in exported.tensors.items():  # each tensor is its merged weight rounded once
        want = weights[name]
        if t.qtype == "f16":
            np.testing.assert_array_equal(t.dequantize(), want.astype(np.float16).astype(np.float32))
        elif t.qtype == "f32":
            np.testing.assert_array_equal(t.dequantize(), want)
        else:
            step = np.abs(want.reshape(want.shape[0], -1, 32)).max(-1, keepdims=True) / 127
            error = np.abs(t.dequantize() - want).reshape(step.shape[0], -1, 32)
            # round(w / d) * d is within d / 2 of w; d itself is stored as f16 (relative error 2^-11,
            # times |q| <= 127)
            assert (error <= step * (0.5 + 127 * 2**-11) * (1 + 1e-3) + 1e-7).all(), name
    ids = np.array([[1, 40, 50, 60, 70, 80, 90, 100, 3, 4]])
    expected = run.model(ids).numpy()
    base = Llama.from_gguf(files[0], activations="f32")(ids).numpy()
    got = Llama.from_gguf(path, activations="f32")(ids).numpy()
    error = np.abs(got - expected).max()
    assert error <= BOUNDS[merge] * np.abs(expected).max()
    assert error < SHARE[merge] * np.abs(base - expected).max()  # the fine-tuning is in the file


def test_an_export_cut_between_its_two_files_is_detected(tuned, tmp_path, monkeypatch):
    """The config is written first, the adapters naming its digest last: an export interrupted after the
    config leaves the old adapters beside the new config, which check_adapters refuses."""
    run, _ = tuned
    cut = copy.copy(run)
    cut.config = copy.copy(run.config)
    cut.config.out, cut.config.merge = str(tmp_path), None
    ft.export(cut)
    ft.check_adapters(tmp_path)  # one export's pair
    old = (tmp_path / ft.ADAPTERS).read_bytes()
    cut.config.model = "another-base.gguf"  # a new config text

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(ft, "save", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ft.export(cut)
    assert (tmp_path / ft.ADAPTERS).read_bytes() == old and "another-base" in (
        tmp_path / ft.ADAPTER_CONFIG
    ).read_text()
    with pytest.raises(ValueError, match=r"not exported with this adapter_config\.json"):
        ft.check_adapters(tmp_path)
    monkeypatch.undo()
    ft.export(cut)  # exported again: a pair
    ft.check_adapters(tmp_path)
    assert not temporaries(tmp_path / ft.ADAPTERS) and not temporaries(tmp_path / ft.ADAPTER_CONFIG)


def test_peft_adapters_on_the_half_split_model_give_the_fine_tuned_logits(tuned, files):
    run, out = tuned
    saved = load(out / ft.ADAPTERS)
    cfg = json.loads((out / ft.ADAPTER_CONFIG).read_text())
    assert cfg["peft_type"] == "LORA" and cfg["r"] == 4 and cfg["lora_alpha"] == 8.0
    assert cfg["target_modules"] == list(ALL)
    key = "base_model.model.model.layers.1.self_attn.q_proj"
    assert saved[f"{key}.lora_A.weight"].shape == (4, 64) and saved[f"{key}.lora_B.weight"].shape == (64, 4)
    # Hugging Face's layout: the GGUF's dequantized weights, q/k rows back in half-split order, plus
    # (alpha / r) B A from PEFT's keys, in an unfused Llama with half-split RoPE
    config = run.model.config
    import dataclasses

    hf = dataclasses.replace(config, rope_interleaved=False, fused=False)
    state = {}
    source = read_gguf(files[0])
    names = {"token_embd": "embed_tokens", "output_norm": "norm"}
    parts = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj"}
    parts |= {"attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj"}
    parts |= {
        "ffn_down": "mlp.down_proj",
        "attn_norm": "input_layernorm",
        "ffn_norm": "post_attention_layernorm",
    }
    for name, t in source.tensors.items():
        stem = name.removesuffix(".weight")
        w = t.dequantize()
        if stem in names:
            state[f"{names[stem]}.weight"] = w
            continue
        _, i, part = stem.split(".")
        ours = f"layers.{i}.{parts[part]}"
        if part in ("attn_q", "attn_k"):
            w = half_split_rows(w, HEADS if part == "attn_q" else KV_HEADS)
        if f"base_model.model.model.{ours}.lora_A.weight" in saved:
            a = saved[f"base_model.model.model.{ours}.lora_A.weight"].numpy().astype(np.float64)
            b = saved[f"base_model.model.model.{ours}.lora_B.weight"].numpy().astype(np.float64)
            w = (w + 2.0 * b @ a).astype(np.float32)
        state[f"{ours}.weight"] = w
    ids = np.array([[1, 40, 50, 60, 70, 80, 90, 100, 3, 4]])
    np.testing.assert_allclose(
        Llama.from_state(hf, state)(ids).numpy(), run.model(ids).numpy(), rtol=1e-4, atol=1e-4
    )


def test_the_command_trains_exports_and_refuses_bad_options_in_one_line(files, tmp_path, capsys):
    gguf, data, _ = files
    out = tmp_path / "cli"
    args = ["finetune", "--model", str(gguf), "--data", str(data), "--out", str(out), "--steps", "2"]
    args += ["--context", "64", "--batch", "2", "--threads", "1", "--merge", "q8_0", "--eval-every", "2"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "LoRA r=8 alpha=16 on q_proj,v_proj" in text and "validation loss" in text
    assert (out / "model-q8_0.gguf").is_file() and (out / ft.ADAPTERS).is_file()
    assert main([*args, "--targets", "q_proj,nope"]) == 1
    assert "verigrad finetune: error: LoRA targets must be distinct names" in capsys.readouterr().err
    assert main(["finetune", "--model", str(tmp_path / "none.gguf"), "--data", str(data)]) == 1
    assert "not a model name" in capsys.readouterr().err


def test_lora_adds_adapters_to_an_unfused_model_too():
    from verigrad.models.llama import LlamaConfig

    c = LlamaConfig(vocab_size=30, dim=16, n_layers=1, n_heads=2, n_kv_heads=1, head_dim=8, ffn_dim=24)
    vg.manual_seed(0)
    model = add_lora(Llama(c), ["k_proj", "down_proj"], 2, 4.0)
    assert isinstance(model.layers[0].self_attn.k_proj, LoRALinear)
    assert isinstance(model.layers[0].mlp.down_proj.adapters["down_proj"], LoRA)
    assert not isinstance(model.layers[0].self_attn.q_proj, LoRALinear)
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) == 2 * (16 + 8) + 2 * (24 + 16)


def test_training_qlinear_is_qlinear_with_a_dense_product_for_many_rows():
    from verigrad.nn.lora import MANY_ROWS, TrainingQLinear
    from verigrad.ops.quant import dequantize, random_blocks

    rng = np.random.default_rng(0)
    raw = random_blocks(rng, "q4_1", 24, 64)
    layer = QLinear(raw, "q4_1", (24, 64))
    fast = TrainingQLinear.of(layer)
    assert fast.weight.numpy().ctypes.data == layer.weight.numpy().ctypes.data  # the same blocks, no copy
    w = dequantize(raw, "q4_1", (24, 64)).astype(np.float64)
    for count in (1, MANY_ROWS - 1, MANY_ROWS, 40):
        x = vg.from_numpy(rng.normal(size=(count, 64)).astype(np.float32)).requires_grad_(True)
        y = fast(x)
        np.testing.assert_allclose(y.numpy(), x.numpy() @ w.T, rtol=1e-5, atol=1e-5)
        if count < MANY_ROWS:  # decoding: qmatmul's bits
            np.testing.assert_array_equal(y.numpy(), layer(x).numpy())
        g = rng.normal(size=(count, 24)).astype(np.float32)
        (y * vg.from_numpy(g)).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), g @ w, rtol=1e-5, atol=1e-5)
