"""The GGML block formats against the `gguf` package's own de-quantization (an independent implementation),
bit for bit, on random blocks: finite random scales, and blocks whose f16 scales are the extremes (the
largest finite, subnormals, signed zeros, infinities, NaN)."""

from __future__ import annotations

import dataclasses

import gguf
import numpy as np
import pytest
from test_llm_models import _gguf_state, _random_llama

import verigrad as vg
from verigrad.backends import cpu
from verigrad.backends.cpu import quant as cpu_quant
from verigrad.errors import WeightFileError
from verigrad.io.gguf import read_gguf
from verigrad.models.llama import Llama, LlamaConfig
from verigrad.nn.quant import QEmbedding, QLinear
from verigrad.ops.quant import (
    BLOCK_QTYPES,
    FORMATS,
    dequantize,
    dequantize_op,
    qmatmul_q8,
    quantize_q8,
    random_blocks,
)

Q = gguf.GGMLQuantizationType
NEW = ("q5_0", "q5_1", "q2_k", "q3_k", "q5_k", "iq4_nl", "iq4_xs")
EXTREMES = np.array(
    [65504, -65504, 6.1e-5, 6e-8, -6e-8, 0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -2.0], "<f2"
)  # the largest finite, the smallest normal, the smallest subnormals, zeros, infinities, NaN


def _same(ours: np.ndarray, theirs: np.ndarray) -> bool:
    """The same f32 bits, NaN in the same places (a NaN's payload aside)."""
    theirs = np.asarray(theirs, np.float32)
    nan = np.isnan(ours)
    return (
        ours.dtype == np.float32
        and ours.shape == theirs.shape
        and np.array_equal(nan, np.isnan(theirs))
        and np.array_equal(ours[~nan].view(np.uint32), theirs[~nan].view(np.uint32))
    )


def _check(raw: np.ndarray, qtype: str, rows: int) -> None:
    fmt = FORMATS[qtype]
    k = raw.size // rows // fmt.nbytes * fmt.block
    ours = dequantize(raw, qtype, (rows, k))
    with np.errstate(invalid="ignore", over="ignore"):
        theirs = gguf.quants.dequantize(raw, Q[qtype.upper()])
    assert _same(ours, theirs), qtype


def test_the_formats_are_listed():
    assert set(NEW) <= set(BLOCK_QTYPES)
    for qtype in BLOCK_QTYPES:
        fmt = FORMATS[qtype]
        assert (fmt.block, fmt.nbytes) == gguf.GGML_QUANT_SIZES[Q[qtype.upper()]]
        assert all(0 <= at <= fmt.nbytes - 2 for at in fmt.scales) and fmt.scales


@pytest.mark.parametrize("qtype", BLOCK_QTYPES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_blocks_match_the_gguf_package(qtype, seed):
    rng = np.random.default_rng(seed)
    rows = 5
    _check(random_blocks(rng, qtype, rows, 3 * FORMATS[qtype].block), qtype, rows)


@pytest.mark.parametrize("qtype", BLOCK_QTYPES)
def test_extreme_scales_match_the_gguf_package(qtype):
    """Every scale of the block takes each extreme value in turn, the others random extremes too."""
    fmt = FORMATS[qtype]
    rng = np.random.default_rng(3)
    n = 4 * len(EXTREMES)
    raw = rng.integers(0, 256, (n, fmt.nbytes), dtype=np.uint8)
    for i, at in enumerate(fmt.scales):
        values = np.roll(np.tile(EXTREMES, 4), i * 5) if i else np.repeat(EXTREMES, 4)
        raw[:, at : at + 2] = values.view(np.uint8).reshape(-1, 2)
    _check(raw, qtype, n)


@pytest.mark.parametrize("qtype", BLOCK_QTYPES)
def test_every_byte_value_in_every_position(qtype):
    """Block i holds byte value (i + j) % 256 at position j outside its scales (scale 1.0): every bit
    pattern of every quant and sub-scale byte is decoded."""
    fmt = FORMATS[qtype]
    raw = ((np.arange(256)[:, None] + np.arange(fmt.nbytes)) % 256).astype(np.uint8)
    for at in fmt.scales:
        raw[:, at : at + 2] = np.array([1.0], "<f2").view(np.uint8)
    _check(raw, qtype, 256)


def test_hand_decoded_blocks():
    """A few values worked out from llama.cpp's layouts by hand (the cross-checks above share nothing with
    them)."""
    one = np.array([1.0], "<f2").view(np.uint8)
    # q5_0: value j = d * (nibble | bit j of qh << 4) - 16 d
    b = np.zeros(22, np.uint8)
    b[0:2], b[2:6], b[6] = one, [0b1, 0, 0, 0b10000000], 0x3A  # values 0 and 16 from byte 6; bits 0 and 31
    v = dequantize(b, "q5_0", (32,))
    assert (v[0], v[16], v[31], v[1]) == (10 + 16 - 16, 3 - 16, 16 - 16, -16)
    # iq4_nl: d * table[nibble]
    b = np.zeros(18, np.uint8)
    b[0:2], b[2] = np.array([0.5], "<f2").view(np.uint8), 0xF0
    v = dequantize(b, "iq4_nl", (32,))
    assert (v[0], v[16], v[1]) == (-63.5, 56.5, -63.5)
    # q2_k: sub-block 0 (values 0..15) scale 3 min 2: d * 3 * q - dmin * 2, q the low 2 bits of qs[0..15]
    b = np.zeros(84, np.uint8)
    b[0], b[16], b[80:82], b[82:84] = 0x23, 0b11, one, one
    v = dequantize(b, "q2_k", (256,))
    assert (v[0], v[1], v[16]) == (3 * 3 - 2, -2, 0)


# loading: a tiny Llama whose matrices are stored in each format --------------------------------------
CONFIG_256 = LlamaConfig(  # every matrix's rows are whole k-quant blocks (256 values)
    vocab_size=24, dim=256, n_layers=1, n_heads=4, n_kv_heads=2, head_dim=64, ffn_dim=256, context_length=16
)


def _write_llama(path, config: LlamaConfig, state: dict[str, np.ndarray], store) -> None:
    """The GGUF file of `state` (llama.cpp's names and row order); `store(name, array)` gives a matrix's
    (bytes, GGML type)."""
    c = config
    w = gguf.GGUFWriter(str(path), "llama")
    for key, value in {
        "context_length": c.context_length,
        "embedding_length": c.dim,
        "block_count": c.n_layers,
        "feed_forward_length": c.ffn_dim,
        "attention.head_count": c.n_heads,
        "attention.head_count_kv": c.n_kv_heads,
    }.items():
        w.add_uint32(f"llama.{key}", value)
    w.add_float32("llama.attention.layer_norm_rms_epsilon", c.norm_eps)
    for name, array in _gguf_state(state, c).items():
        if name.endswith("norm.weight"):
            w.add_tensor(name, array)
        else:
            raw, kind = store(name, array)
            w.add_tensor(name, raw, raw_dtype=kind)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.mark.parametrize("qtype", NEW)
def test_a_llama_stored_in_each_format_loads(tmp_path, qtype):
    """The matrices stay in `qtype` (QLinear, QEmbedding), `dequantize` of what was loaded is the gguf
    package's value of the bytes written, and the logits are those of the model built from those values."""
    config = dataclasses.replace(CONFIG_256, tie_embeddings=False)
    rng = np.random.default_rng(0)
    _, state = _random_llama(config)
    path = tmp_path / f"{qtype}.gguf"
    kind, written = Q[qtype.upper()], {}

    def store(name: str, array: np.ndarray) -> tuple[np.ndarray, object]:
        try:  # the gguf package quantizes some formats; the others are random blocks
            raw = gguf.quants.quantize(array, kind)
        except NotImplementedError:
            raw = random_blocks(rng, qtype, *array.shape)
        written[name] = raw
        return raw, kind

    _write_llama(path, config, state, store)
    model = Llama.from_gguf(path)
    assert isinstance(model.embed_tokens, QEmbedding) and model.embed_tokens.qtype == qtype
    down = model.layers[0].mlp.down_proj
    assert isinstance(down, QLinear) and down.qtype == qtype
    loaded = dequantize_op(down.weight, qtype=qtype).numpy()
    assert _same(loaded, gguf.quants.dequantize(written["blk.0.ffn_down.weight"], Q[qtype.upper()]))
    reader = read_gguf(path)
    values = {}
    for ours, theirs in zip(state, _gguf_state(state, config)):
        v = reader.tensors[theirs].dequantize()
        if ours.endswith(("q_proj.weight", "k_proj.weight")):  # back to Hugging Face's half-split rows
            heads = config.n_heads if "q_proj" in ours else config.n_kv_heads
            v = v.reshape(heads, v.shape[0] // heads // 2, 2, -1).swapaxes(1, 2).reshape(v.shape)
        values[ours] = v
    ids = np.array([[1, 5, 9, 2, 23, 7]])
    expected = Llama.from_state(config, values)(ids).numpy()
    got = model(ids).numpy()
    assert np.isfinite(expected).all()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())


def test_a_type_verigrad_does_not_read_is_refused_by_name(tmp_path):
    config = dataclasses.replace(CONFIG_256, tie_embeddings=True)
    _, state = _random_llama(config)
    path = tmp_path / "mixed.gguf"

    def store(name: str, array: np.ndarray) -> tuple[np.ndarray, object]:
        if name == "blk.0.ffn_up.weight":  # IQ2_XXS: 66 bytes a block of 256
            return np.zeros((array.shape[0], 66), np.uint8), Q.IQ2_XXS
        return array, Q.F32

    _write_llama(path, config, state, store)
    with pytest.raises(WeightFileError, match=r"tensor blk\.0\.ffn_up\.weight is stored as iq2_xxs"):
        Llama.from_gguf(path)


@pytest.mark.skipif(not cpu.available(), reason="the cpu backend cannot be built here")
@pytest.mark.parametrize("qtype", ["q5_0", "q5_1", "iq4_nl"])
def test_qmatmul_q8_of_the_new_formats_over_many_rows(qtype, monkeypatch):
    """qmatmul_q8's kernel on q5_0, q5_1 and iq4_nl with more activation rows than it takes at once (16), and
    weight rows fewer than, as many as and more than its groups of 8 (q5_0, q5_1), on every vector path and
    1-3 threads: the reference's bits; the reference is the 8-bit x times the weight's integers (value / d,
    exact in f32) scaled per block."""
    monkeypatch.setattr(cpu_quant, "MIN_BAND_BYTES", 1)  # bands of a few rows on 2 and 3 threads
    rng = np.random.default_rng(5)
    raw, x = random_blocks(rng, qtype, 19, 256), rng.standard_normal((37, 256)).astype(np.float32)
    want = qmatmul_q8.reference(x, raw, qtype)
    q, d, _ = quantize_q8(x)
    values = dequantize(raw, qtype, (19, 256)).astype(np.float64)
    np.testing.assert_allclose(want, (q * d[..., None]).reshape(37, 256) @ values.T, rtol=1e-6, atol=1e-6)
    kernel = cpu.cpu.native(vg.REGISTRY["qmatmul_q8"], vg.f32)
    try:
        for path in cpu_quant.PATHS:
            cpu_quant.path(path)
            for threads in (1, 2, 3):
                vg.set_threads(threads)
                for n, t in [(19, 37), (8, 1), (8, 2), (9, 3), (7, 1), (17, 1), (16, 5)]:
                    got = kernel(x[:t], raw[:n], qtype=qtype)
                    where = f"{path} {threads} {n}x{t}"
                    np.testing.assert_array_equal(got.view(np.uint32), want[:t, :n].view(np.uint32), where)
    finally:
        cpu_quant.simd(True)
        vg.set_threads(1)
