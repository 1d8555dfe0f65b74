"""`verigrad quantize`: the NumPy quantizers (llama.cpp's reference ones), the type rules of its mixtures,
and the files it writes, loaded back into a Llama."""

from __future__ import annotations

import hashlib

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType
from hypothesis import given, settings
from hypothesis import strategies as st

from verigrad.cli import main
from verigrad.errors import WeightFileError
from verigrad.io.gguf import read_gguf
from verigrad.io.gguf_quantize import TYPES, _use_more_bits, plan, quantize_gguf
from verigrad.io.quantizers import QUANTIZERS, quantize
from verigrad.models.llama import Llama
from verigrad.ops.quant import FORMATS, dequantize

GGUF_QUANTIZED = ("q8_0", "q4_0", "q4_1", "q5_0", "q5_1")  # the types the gguf package quantizes too
K_QUANTS = ("q2_k", "q3_k", "q4_k", "q5_k", "q6_k")
# rms error of each type on Gaussian rows, relative to their rms: llama.cpp's quantizers reach these
RMS_ERROR = {"f16": 3e-4, "q8_0": 0.006, "q6_k": 0.02, "q5_1": 0.04, "q5_0": 0.045, "q5_k": 0.04}
RMS_ERROR |= {"q4_1": 0.08, "q4_0": 0.09, "q4_k": 0.075, "q3_k": 0.16, "q2_k": 0.31}


def _rows(rng: np.random.Generator, rows: int, k: int) -> np.ndarray:
    """Gaussian rows of several scales, with the cases the C treats apart: an all-zero block, a constant
    block, a block of equal magnitudes of both signs, one of only negatives, ties at the block's largest."""
    x = (rng.standard_normal((rows, k)) * rng.uniform(0.01, 3, (rows, 1))).astype(np.float32)
    x[0, :256] = 0
    x[1, :256] = 1.5
    x[2, :32] = np.where(np.arange(32) % 2, 0.25, -0.25)
    x[3, :256] = -np.abs(x[3, :256])
    x[4, 3] = x[4, 7] = -np.abs(x[4, :32]).max() * 1.25
    return x


@pytest.mark.parametrize("qtype", GGUF_QUANTIZED)
def test_blocks_are_the_gguf_packages(qtype):
    # the gguf package reproduces llama.cpp's quantize_row_*_ref for these: the same bytes
    x = _rows(np.random.default_rng(1), 8, 512)
    expected = gguf.quants.quantize(x, GGMLQuantizationType[qtype.upper()])
    np.testing.assert_array_equal(quantize(x, qtype), expected)


@settings(database=None, derandomize=True, max_examples=30, deadline=None)
@given(
    st.sampled_from(GGUF_QUANTIZED),
    st.lists(
        st.sampled_from([0.0, 1.0, -1.0, 0.5, -0.5, 7.0, 1e-3, -3.25, 65504.0, 1e-8]),
        min_size=32,
        max_size=32,
    ),
)
def test_blocks_of_special_values_are_the_gguf_packages(qtype, values):
    x = np.array([values], np.float32)
    expected = gguf.quants.quantize(x, GGMLQuantizationType[qtype.upper()])
    np.testing.assert_array_equal(quantize(x, qtype), expected)


# sha256 (first 16 hex digits) of the blocks llama.cpp's quantize_row_*_ref (compiled without FMA
# contraction) makes of _rows(default_rng(7), 16, 512): the gguf package has no K-quant quantizer to
# compare with, so the C's bytes are pinned here
K_QUANT_SHA256 = {"q2_k": "5b2b19bdf6009aec", "q3_k": "9b2ce34ef79a1c62", "q4_k": "86be43c2de7da5b4"}
K_QUANT_SHA256 |= {"q5_k": "1b2bcfb58396c85b", "q6_k": "3e1a23d076f297a8"}


@pytest.mark.parametrize("qtype", K_QUANTS)
def test_k_quant_blocks_are_llama_cpps(qtype):
    x = _rows(np.random.default_rng(7), 16, 512)
    assert hashlib.sha256(quantize(x, qtype).tobytes()).hexdigest()[:16] == K_QUANT_SHA256[qtype]


@pytest.mark.parametrize("qtype", list(QUANTIZERS))
def test_round_trip_error(qtype):
    x = _rows(np.random.default_rng(2), 24, 1024)
    raw = quantize(x, qtype)
    fmt = FORMATS[qtype]
    assert raw.shape == (24, fmt.row_bytes(1024)) and raw.dtype == np.uint8
    y = dequantize(raw, qtype, x.shape)
    if qtype != "f32":  # the gguf package's own dequantizer reads the same values
        np.testing.assert_array_equal(y, gguf.quants.dequantize(raw, GGMLQuantizationType[qtype.upper()]))
    np.testing.assert_array_equal(y[0, :256], 0)  # an all-zero block stays zero
    if qtype == "f32":
        np.testing.assert_array_equal(y, x)
        return
    rel = np.sqrt(((y[5:] - x[5:]) ** 2).mean() / (x[5:] ** 2).mean())
    assert rel < RMS_ERROR[qtype], rel
    assert rel > RMS_ERROR[qtype] / 3  # a quantizer that kept more bits than its type would be a bug too
    # a constant block is held closely by every type (by the minimum for the affine ones)
    assert np.abs(y[1, :256] - 1.5).max() <= 1.5 * 0.07


def test_k_quants_choose_scales_by_search():
    # llama.cpp's K-quant searches beat the plain max-based scale: fewer errors than rounding to it
    x = _rows(np.random.default_rng(3), 16, 256)[5:]
    for qtype, levels in (("q4_k", 15), ("q6_k", 63)):
        y = dequantize(quantize(x, qtype), qtype, x.shape)
        lo, hi = x.min(1, keepdims=True), x.max(1, keepdims=True)
        naive = np.round((x - lo) / (hi - lo) * levels) / levels * (hi - lo) + lo
        assert np.abs(y - x).mean() < np.abs(naive - x).mean()


def test_quantize_refuses_what_it_cannot_hold():
    with pytest.raises(ValueError, match="not whole q4_k blocks of 256"):
        quantize(np.zeros((2, 96), np.float32), "q4_k")
    with pytest.raises(ValueError, match="cannot quantize to 'iq4_xs'"):
        quantize(np.zeros((2, 256), np.float32), "iq4_xs")
    with pytest.raises(ValueError, match="infinity or a NaN"):
        quantize(np.array([[np.nan] + [0.0] * 31], np.float32), "q8_0")


# the mixtures' rules ----------------------------------------------------------------------------------------
def _write_llama(path, dim: int = 256, layers: int = 8, ffn: int = 512, tied: bool = False, seed: int = 0):
    """A random Llama in f32 GGUF: 4 query heads sharing 2 key heads (or `heads` 8: 4 per key head)."""
    rng = np.random.default_rng(seed)
    vocab, heads, kv_heads, head_dim = 48, 4, 2, dim // 4
    w = gguf.GGUFWriter(str(path), "llama")
    keys = {"context_length": 64, "embedding_length": dim, "block_count": layers, "feed_forward_length": ffn}
    keys |= {"attention.head_count": heads, "attention.head_count_kv": kv_heads}
    for k, v in keys.items():
        w.add_uint32(f"llama.{k}", v)
    w.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5)
    w.add_float32("llama.rope.freq_base", 10000.0)
    w.add_string("general.name", "tiny")
    w.add_array("tokenizer.ggml.tokens", [f"t{i}" for i in range(vocab)])

    def tensor(name: str, *shape: int, gain: float = 0.5) -> None:  # gain < 1: a calm residual stream
        w.add_tensor(name, rng.normal(0, gain / np.sqrt(shape[-1]), shape).astype(np.float32))

    tensor("token_embd.weight", vocab, dim, gain=16)
    w.add_tensor("output_norm.weight", (1 + 0.1 * rng.standard_normal(dim)).astype(np.float32))
    if not tied:
        tensor("output.weight", vocab, dim, gain=16)
    for i in range(layers):
        b = f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", (1 + 0.1 * rng.standard_normal(dim)).astype(np.float32))
        w.add_tensor(b + "ffn_norm.weight", (1 + 0.1 * rng.standard_normal(dim)).astype(np.float32))
        tensor(b + "attn_q.weight", heads * head_dim, dim)
        tensor(b + "attn_k.weight", kv_heads * head_dim, dim)
        tensor(b + "attn_v.weight", kv_heads * head_dim, dim)
        tensor(b + "attn_output.weight", dim, heads * head_dim)
        tensor(b + "ffn_gate.weight", ffn, dim)
        tensor(b + "ffn_up.weight", ffn, dim)
        tensor(b + "ffn_down.weight", dim, ffn)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="module")
def llama8(tmp_path_factory):
    return _write_llama(tmp_path_factory.mktemp("q") / "llama8.gguf")


def _types(steps) -> dict[str, str]:
    return {s.tensor.name: s.qtype for s in steps}


def test_use_more_bits_is_llama_cpps():
    # the first and last eighth of the layers and every third between
    assert [i for i in range(32) if _use_more_bits(i, 32)] == [
        0,
        1,
        2,
        3,
        6,
        9,
        12,
        15,
        18,
        21,
        24,
        27,
        28,
        29,
        30,
        31,
    ]


def test_mixture_rules(llama8):
    source = read_gguf(llama8)
    more = [0, 3, 6, 7]  # _use_more_bits(i, 8)
    q4km = _types(plan(source, "q4_k_m"))
    assert q4km["output.weight"] == "q6_k" and q4km["token_embd.weight"] == "q4_k"
    assert q4km["output_norm.weight"] == "f32" and q4km["blk.3.attn_norm.weight"] == "f32"
    for i in range(8):
        assert q4km[f"blk.{i}.attn_v.weight"] == ("q6_k" if i in more else "q4_k")
        assert q4km[f"blk.{i}.ffn_down.weight"] == ("q6_k" if i in more else "q4_k")
        assert q4km[f"blk.{i}.attn_q.weight"] == q4km[f"blk.{i}.ffn_up.weight"] == "q4_k"
    q5km = _types(plan(source, "q5_k_m"))
    assert q5km["blk.3.attn_v.weight"] == "q6_k" and q5km["blk.4.ffn_down.weight"] == "q5_k"
    q4ks = _types(plan(source, "q4_k_s"))
    assert [q4ks[f"blk.{i}.attn_v.weight"] for i in (0, 3, 4)] == ["q5_k", "q5_k", "q4_k"]
    assert [q4ks[f"blk.{i}.ffn_down.weight"] for i in (0, 1)] == ["q5_k", "q4_k"]
    q3km = _types(plan(source, "q3_k_m"))
    assert [q3km[f"blk.{i}.attn_v.weight"] for i in (0, 1, 2)] == ["q5_k", "q5_k", "q4_k"]
    assert q3km["blk.0.ffn_down.weight"] == "q4_k" and q3km["blk.5.attn_output.weight"] == "q4_k"
    assert q3km["blk.5.ffn_gate.weight"] == "q3_k" and q3km["output.weight"] == "q6_k"
    q2k = _types(plan(source, "q2_k"))  # 2 query heads per key head: attn_v gets q3_k
    assert (
        q2k["blk.2.attn_v.weight"]
        == q2k["blk.2.ffn_down.weight"]
        == q2k["blk.2.attn_output.weight"]
        == "q3_k"
    )
    assert q2k["blk.2.attn_k.weight"] == "q2_k"
    q40 = _types(plan(source, "q4_0"))  # the plain types' output matrix gets q6_k too
    assert q40["output.weight"] == "q6_k" and q40["blk.0.attn_v.weight"] == "q4_0"
    assert _types(plan(source, "q8_0"))["output.weight"] == "q8_0"
    for single in ("q4_k", "q3_k"):  # single types and --pure: every matrix in the type
        assert set(_types(plan(source, single)).values()) == {single, "f32"}
    assert set(_types(plan(source, "q4_k_m", pure=True)).values()) == {"q4_k", "f32"}
    assert set(_types(plan(source, "f16")).values()) == {"f16", "f32"}
    # tensors in llama.cpp's order: outside the layers first, then by layer number (2 before 10)
    names = [s.tensor.name for s in plan(source, "q8_0")]
    assert names[:3] == ["output.weight", "output_norm.weight", "token_embd.weight"]
    assert names[3:5] == ["blk.0.attn_k.weight", "blk.0.attn_norm.weight"]


def test_tied_embedding_and_fallback(tmp_path):
    # rows of 64 values: the K-types fall back (q4_k -> q5_0, q6_k -> q8_0); a tied token embedding is
    # quantized as the output matrix
    source = read_gguf(_write_llama(tmp_path / "small.gguf", dim=64, layers=2, ffn=96, tied=True))
    q4km = _types(plan(source, "q4_k_m"))
    assert q4km["token_embd.weight"] == "q8_0" and q4km["blk.1.attn_q.weight"] == "q5_0"
    # the last layer (use_more_bits): q6_k, which falls back to q8_0; the first: q4_k -> q5_0
    assert [q4km[f"blk.{i}.attn_v.weight"] for i in (0, 1)] == ["q5_0", "q8_0"]
    assert [q4km[f"blk.{i}.ffn_down.weight"] for i in (0, 1)] == ["q5_0", "q8_0"]
    assert _types(plan(source, "q5_k"))["blk.1.attn_q.weight"] == "q5_1"
    assert _types(plan(source, "q2_k", pure=True))["blk.1.attn_q.weight"] == "q4_0"
    with pytest.raises(ValueError, match="unknown type 'q7_k'"):
        plan(source, "q7_k")


# files written and loaded -------------------------------------------------------------------------------
# max |logit error| / max |logit| of each --type's model against the f32 one (tiny random Llama, 8 layers)
LOGIT_ERROR = {"f32": 0.0, "f16": 5e-4, "q8_0": 0.015, "q6_k": 0.05, "q5_0": 0.08, "q5_1": 0.1, "q5_k": 0.08}
LOGIT_ERROR |= {"q5_k_m": 0.07, "q5_k_s": 0.075, "q4_0": 0.18, "q4_1": 0.17, "q4_k": 0.19, "q4_k_m": 0.14}
LOGIT_ERROR |= {"q4_k_s": 0.15, "q3_k": 0.45, "q3_k_m": 0.27, "q2_k": 0.5}


@pytest.mark.parametrize("type_name", list(TYPES))
def test_quantized_model_logits(llama8, tmp_path, type_name):
    ids = np.array([[1, 5, 9, 2, 33, 7, 40, 11]])
    expected = Llama.from_gguf(llama8)(ids).numpy()
    out = tmp_path / f"{type_name}.gguf"
    steps = quantize_gguf(llama8, out, type_name)
    written = read_gguf(out)
    assert {n: t.qtype for n, t in written.tensors.items()} == _types(steps)
    assert written.get("general.file_type") == int(TYPES[type_name].ftype)
    assert written.get("general.quantization_version") == 2
    assert written.get("general.name") == "tiny" and written.get("tokenizer.ggml.tokens")[47] == "t47"
    err = np.abs(Llama.from_gguf(out)(ids).numpy() - expected).max() / np.abs(expected).max()
    assert err <= LOGIT_ERROR[type_name], err
    assert list(tmp_path.iterdir()) == [out]  # no temporary left beside it


def test_requantizing_a_quantized_file(llama8, tmp_path):
    q8 = tmp_path / "q8.gguf"
    quantize_gguf(llama8, q8, "q8_0")
    steps = quantize_gguf(q8, tmp_path / "q4.gguf", "q4_k_m")
    assert any(s.requantized for s in steps) and not any(s.requantized for s in plan(read_gguf(q8), "q8_0"))
    # the same type again: the blocks are copied, not decoded and rounded twice
    quantize_gguf(q8, tmp_path / "again.gguf", "q8_0")
    a, b = read_gguf(q8), read_gguf(tmp_path / "again.gguf")
    for name, t in a.tensors.items():
        np.testing.assert_array_equal(np.asarray(b.tensors[name].raw), np.asarray(t.raw))


def test_cli(llama8, tmp_path, capsys):
    out = tmp_path / "m.gguf"
    assert main(["quantize", str(llama8), str(out), "--type", "q4_k_m"]) == 0
    err = capsys.readouterr().err
    assert "wrote" in err and "q6_k" in err and "warning" not in err
    assert main(["quantize", str(out), str(tmp_path / "r.gguf"), "--type", "q6_k"]) == 0
    assert "warning" in capsys.readouterr().err  # requantizing q4_k blocks
    # refused before any work: the output is the input, a folder, a missing or broken input
    assert main(["quantize", str(out), str(out), "--type", "q8_0"]) == 1
    assert "is the input file" in capsys.readouterr().err
    assert main(["quantize", str(llama8), str(tmp_path), "--type", "q8_0"]) == 1
    assert "is a folder" in capsys.readouterr().err
    assert main(["quantize", str(tmp_path / "none.gguf"), str(tmp_path / "x.gguf"), "--type", "q8_0"]) == 1
    assert "no such GGUF file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["quantize", str(llama8), str(tmp_path / "x.gguf"), "--type", "q7_k"])
    assert not (tmp_path / "x.gguf").exists()


def test_non_finite_weights_leave_no_file(tmp_path):
    path = tmp_path / "bad.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    bad = np.zeros((4, 32), np.float32)
    bad[2, 5] = np.inf
    w.add_tensor("blk.0.attn_q.weight", bad)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(WeightFileError, match=r"blk\.0\.attn_q\.weight: .*infinity or a NaN"):
        quantize_gguf(path, tmp_path / "out.gguf", "q8_0")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.gguf"]


def test_a_type_verigrad_cannot_decode_is_refused_before_any_work(tmp_path):
    path = tmp_path / "iq2.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tensor("blk.0.attn_q.weight", np.zeros((2, 66), np.uint8), raw_dtype=GGMLQuantizationType.IQ2_XXS)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(WeightFileError, match=r"attn_q\.weight .* cannot decode to quantize it again \(1 "):
        quantize_gguf(path, tmp_path / "out.gguf", "q8_0")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["iq2.gguf"]
