"""A GGUF file whose fused q/k/v or gate/up parts are stored in different formats (as a Q4_K_M file made by
`verigrad quantize` has them): each fused matrix stays quantized (QLinearGroup, a QLinear per format),
gives the bits of separate QLinears, trains LoRA adapters, becomes f32 for full fine-tuning and exports."""

from __future__ import annotations

import numpy as np
import pytest
from llama_gguf import write_llama_gguf

import verigrad as vg
from verigrad.io.gguf import read_gguf
from verigrad.io.gguf_writer import write_like
from verigrad.models.catalog import matmul_description
from verigrad.models.llama import Llama
from verigrad.models.lora import add_lora, dense, gguf_weights, to_f32
from verigrad.nn import Linear, Module
from verigrad.nn.lora import LoRALinear, TrainingQLinear
from verigrad.nn.quant import QLinear, QLinearGroup
from verigrad.ops import concat

MIXED = {"attn_q": "Q5_0", "attn_k": "Q5_0", "ffn_gate": "Q4_0"}  # attn_v, ffn_up: the default Q8_0
IDS = np.array([[1, 40, 50, 60, 70, 80, 90, 100, 3, 4]])


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    return write_llama_gguf(tmp_path_factory.mktemp("mixed") / "mixed.gguf", qtypes=MIXED)


class Separate(Module):
    """The old reading of a fused matrix as pieces, written apart from QLinearGroup: a QLinear per GGUF
    tensor, outputs concatenated (no `normed`: the model norms first)."""

    def __init__(self, tensors, activations):
        super().__init__()
        self.pieces = [QLinear(t.raw, t.qtype, t.shape, activations) for t in tensors]

    def forward(self, x):
        return concat(*(p(x) for p in self.pieces), axis=-1)


def separate(path, activations: str) -> Llama:
    model, gguf = Llama.from_gguf(path, activations=activations), read_gguf(path)
    for i, block in enumerate(model.layers):
        names = {"self_attn": ("attn_q", "attn_k", "attn_v"), "mlp": ("ffn_gate", "ffn_up")}
        for owner, parts in names.items():
            tensors = [gguf.tensors[f"blk.{i}.{p}.weight"] for p in parts]
            attr = "qkv_proj" if owner == "self_attn" else "gate_up_proj"
            setattr(getattr(block, owner), attr, Separate(tensors, activations))
    return model


def logits(model: Llama) -> tuple[np.ndarray, np.ndarray]:
    """The prompt's logits in one forward pass, and those of the cached (compiled) decode steps."""
    full = model(IDS).numpy()
    cache = model.new_cache()
    steps = [model(IDS[:, :3], cache).numpy()]
    steps += [model(IDS[:, i : i + 1], cache).numpy() for i in range(3, 10)]
    return full, np.concatenate(steps, axis=1)


@pytest.mark.parametrize("activations", ["f32", "q8"])
def test_mixed_groups_stay_quantized_with_the_bits_of_separate_qlinears(path, activations):
    model = Llama.from_gguf(path, activations=activations)
    qkv, gate_up = model.layers[0].self_attn.qkv_proj, model.layers[0].mlp.gate_up_proj
    assert isinstance(qkv, QLinearGroup) and [p.qtype for p in qkv.parts] == ["q5_0", "q8_0"]  # q, k in one
    assert [(p.out_features, p.in_features) for p in qkv.parts] == [(96, 64), (32, 64)]
    assert isinstance(gate_up, QLinearGroup) and [p.qtype for p in gate_up.parts] == ["q4_0", "q8_0"]
    assert not any(type(m) is Linear for m in model.modules())  # no f32 copy
    assert "qtypes=q5_0+q8_0" in repr(qkv)
    got, want = logits(model), logits(separate(path, activations))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_allclose(got[1], got[0], rtol=1e-4, atol=1e-4)  # the cache's steps: the same model
    kind = "qmatmul_q8" if activations == "q8" else "qmatmul"
    assert f"{kind} (q5_0 weights" in matmul_description(model)


@pytest.mark.parametrize("activations", ["f32", "q8"])
def test_the_decode_step_of_mixed_groups_replays_with_the_same_tokens(path, activations):
    """As tests/test_generate.py's: generated again and again, the compiled decode step's plans replay
    their recorded calls (where vg_call records them) and the tokens stay those of the first run."""
    from verigrad.backends import cpu
    from verigrad.models.catalog import load_language_model
    from verigrad.models.lm import generate

    model, tok = load_language_model(path, activations=activations)
    prompt = tok.encode("hello world")
    with vg.backend("cpu"):
        runs = [generate(model, tok, prompt, max_tokens=6, temperature=0.0).ids for _ in range(12)]
    assert all(ids == runs[0] for ids in runs) and len(runs[0]) >= 1
    plans = list(model.cached_step.decode["f32"]._plans.values())  # by the cache's dtype
    assert plans and all(p.runs >= 12 for p in plans)
    recorded = cpu.cpu.tape() is not None
    assert any(type(p._replay).__name__ == "Replay" for p in plans) == recorded


def test_lora_on_a_mixed_group_trains_a_step_and_the_merged_export_reads_back(path, tmp_path):
    vg.manual_seed(0)
    model = add_lora(Llama.from_gguf(path), ["q_proj", "v_proj", "up_proj"], 2, 4.0)
    qkv = model.layers[0].self_attn.qkv_proj
    assert isinstance(qkv, LoRALinear) and isinstance(qkv.base, QLinearGroup)
    assert all(type(p) is TrainingQLinear for p in qkv.base.parts)  # still quantized, dense for many rows
    base = Llama.from_gguf(path)(IDS).numpy()
    np.testing.assert_allclose(model(IDS).numpy(), base, rtol=1e-5, atol=1e-5)  # B = 0: the base
    trained = [p for p in model.parameters() if p.requires_grad]
    loss = vg.nn.functional.cross_entropy(model(IDS)[0, :-1], vg.from_numpy(IDS[0, 1:]))
    loss.backward()
    grads = [p.grad.numpy() for p in trained]
    assert all(np.isfinite(g).all() for g in grads) and any(np.abs(g).max() > 0 for g in grads)
    with vg.no_grad():
        for p in trained:
            p.sub_(p.grad * 0.1)
    after = model(IDS).numpy()
    assert np.abs(after - base).max() > 1e-3  # the step changed the model
    gguf = read_gguf(path)
    weights = gguf_weights(model, gguf.tensors)
    for name in ("blk.1.attn_k.weight", "blk.1.ffn_gate.weight"):  # no adapter: the file's values
        np.testing.assert_array_equal(weights[name], gguf.tensors[name].dequantize())
    written = write_like(tmp_path / "merged.gguf", path, weights, "f16")
    merged = Llama.from_gguf(written)(IDS).numpy()
    np.testing.assert_allclose(merged, after, atol=4e-3 * np.abs(after).max())  # F16's rounding


def test_full_fine_tuning_makes_a_mixed_group_one_f32_linear(path):
    model = Llama.from_gguf(path)
    group = model.layers[1].self_attn.qkv_proj
    want = np.concatenate([read_gguf(path).tensors[f"blk.1.attn_{x}.weight"].dequantize() for x in "qkv"])
    np.testing.assert_array_equal(dense(group), want)
    to_f32(model)
    qkv = model.layers[1].self_attn.qkv_proj
    assert type(qkv) is Linear and qkv.weight.requires_grad
    np.testing.assert_array_equal(qkv.weight.numpy(), want)
    assert not any(isinstance(m, QLinear | QLinearGroup) for m in model.modules())


def test_a_group_refuses_parts_it_cannot_stack():
    a = QLinear(np.zeros((4, 34), np.uint8), "q8_0", (4, 32))
    b = QLinear(np.zeros((4, 68), np.uint8), "q8_0", (4, 64))
    with pytest.raises(ValueError, match=r"QLinearGroup: the parts take inputs of different sizes \[32, 64"):
        QLinearGroup([a, b])
    with pytest.raises(TypeError, match="QLinearGroup: parts must be one or more QLinears"):
        QLinearGroup([])


def test_a_q8_group_quantizes_its_input_once_with_the_bits_of_its_parts(path):
    """With 8-bit activations a group is one op (rms_norm_qmatmul_q8_group where it takes the norm,
    qmatmul_q8_group otherwise): x normalized and quantized once for every part, each part's columns the
    bits of its own QLinear's op. A LoRA-trained part (TrainingQLinear) keeps the parts' own ops."""
    model = Llama.from_gguf(path, activations="q8")
    block = model.layers[0]
    qkv, norm = block.self_attn.qkv_proj, block.input_layernorm
    x = vg.from_numpy(np.random.default_rng(0).standard_normal((3, 64)).astype(np.float32) * 4)
    text = str(vg.trace(lambda x: qkv.normed(x, norm), vg.spec((3, 64), vg.f32)))
    assert text.count("rms_norm_qmatmul_q8_group") == 1 and "rms_norm_qmatmul_q8(" not in text
    assert "qmatmul_q8(" not in text and "concat" not in text
    text = str(vg.trace(lambda x: qkv(x), vg.spec((3, 64), vg.f32)))
    assert text.count("qmatmul_q8_group") == 1 and "qmatmul_q8(" not in text
    for backend in ("reference", "cpu"):
        with vg.backend(backend):
            want = concat(*(p.normed(x, norm) for p in qkv.parts), axis=-1).numpy()
            np.testing.assert_array_equal(qkv.normed(x, norm).numpy(), want)
            want = concat(*(p(x) for p in qkv.parts), axis=-1).numpy()
            np.testing.assert_array_equal(qkv(x).numpy(), want)
    trained = QLinearGroup(
        [TrainingQLinear(p.weight.numpy(), p.qtype, (p.out_features, 64)) for p in qkv.parts]
    )
    assert not trained._quantized_once()
