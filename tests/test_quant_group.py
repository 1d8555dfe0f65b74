"""qmatmul_q8_group and rms_norm_qmatmul_q8_group: several quantized weights on one input, x quantized once
(per block scheme) for all of them; the cpu kernel (quant.c's vg_qmatmul_q8_group) bit for bit against the
reference and against each part's own kernel, on every path and thread count, with the errors that name
what is wrong."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad as vg
from verigrad.backends import cpu
from verigrad.backends.cpu import quant as cpu_quant
from verigrad.backends.reference import composite_reference
from verigrad.ops.quant import qmatmul_q8, qmatmul_q8_group, random_blocks, rms_norm_qmatmul_q8_group

pytestmark = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")

GROUPS = [
    ("q5_0", "q8_0"),  # a Q4_K_M file's q/k and v
    ("q4_k", "q6_k", "q5_0"),
    ("q8_0", "q4_0", "q4_1", "q5_1", "iq4_nl", "iq4_xs", "q2_k", "q3_k", "q5_k"),  # more than GROUP_PARTS
]


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, np.float32).view(np.uint32)


@pytest.mark.parametrize("qtypes", GROUPS, ids="+".join)
def test_the_group_kernel_gives_each_part_the_bits_of_its_own_product(qtypes, monkeypatch):
    monkeypatch.setattr(cpu_quant, "MIN_BAND_BYTES", 1)  # bands of a few rows: every thread count splits
    rng = np.random.default_rng(3)
    ws = [random_blocks(rng, q, 5 + 4 * i, 512) for i, q in enumerate(qtypes)]
    x = rng.standard_normal((9, 512)).astype(np.float32)
    x[1, 7] = np.inf  # a block of NaNs
    x[2, :256] = 0.0
    weight = rng.uniform(0.5, 1.5, 512).astype(np.float32)
    group = cpu.cpu.native(vg.REGISTRY["qmatmul_q8_group"], vg.f32)
    normed = cpu.cpu.native(vg.REGISTRY["rms_norm_qmatmul_q8_group"], vg.f32)
    single = cpu.cpu.native(vg.REGISTRY["qmatmul_q8"], vg.f32)
    normed_reference = composite_reference(rms_norm_qmatmul_q8_group)
    try:
        for t in (1, 2, 9):
            want = qmatmul_q8_group.reference(x[:t], *ws, qtypes=qtypes)
            np.testing.assert_array_equal(
                _bits(want),
                _bits(np.concatenate([qmatmul_q8.reference(x[:t], w, q) for w, q in zip(ws, qtypes)], -1)),
            )
            want_normed = normed_reference(x[:t], weight, *ws, qtypes=qtypes, eps=1e-5)
            for path in cpu_quant.PATHS:
                taken = cpu_quant.path(path)
                for threads in (1, 2, 3):
                    vg.set_threads(threads)
                    where = f"{taken}, {threads} threads, {t} rows"
                    np.testing.assert_array_equal(_bits(group(x[:t], *ws, qtypes=qtypes)), _bits(want), where)
                    parts = np.concatenate([single(x[:t], w, qtype=q) for w, q in zip(ws, qtypes)], -1)
                    np.testing.assert_array_equal(_bits(parts), _bits(want), where)
                    got = normed(x[:t], weight, *ws, qtypes=qtypes, eps=1e-5)
                    np.testing.assert_array_equal(_bits(got), _bits(want_normed), where)
    finally:
        vg.set_threads(1)
        cpu_quant.simd(True)


def test_the_ops_take_symbolic_shapes_and_name_what_is_wrong():
    w0, w1 = (
        vg.tensor(np.zeros((3, 18), np.uint8), dtype="u8"),
        vg.tensor(np.zeros((2, 34), np.uint8), dtype="u8"),
    )
    n = vg.dims("n")
    out = vg.check(
        lambda x, a, b: qmatmul_q8_group(x, a, b, qtypes=("q4_0", "q8_0")), vg.spec([n, 32]), w0.spec, w1.spec
    )
    assert tuple(out.shape) == (n, 5)
    x = vg.zeros(2, 32)
    with pytest.raises(vg.ShapeError, match="one qtype per weight: got 2 weights"):
        qmatmul_q8_group(x, w0, w1, qtypes=("q4_0",))
    with pytest.raises(vg.ShapeError, match="q4_k"):
        qmatmul_q8_group(x, w0, w1, qtypes=("q4_0", "q4_k"))
    with pytest.raises(ValueError, match="qtypes must be a sequence of format names"):
        qmatmul_q8_group(x, w0, qtypes="q4_0")
    with pytest.raises(vg.ShapeError, match="the norm's weight must be"):
        rms_norm_qmatmul_q8_group(x, vg.ones(16), w0, w1, qtypes=("q4_0", "q8_0"), eps=1e-5)
