"""vg_call (fastcall.py): the library's functions called without ctypes' conversions give what the ctypes
calls give, for signatures with integers past the registers and doubles among them; arguments it does
not take go to ctypes."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from verigrad import settings
from verigrad.backends import cpu
from verigrad.backends.cpu import fastcall

pytestmark = [
    pytest.mark.skipif(
        not (cpu.available() and fastcall.supported()), reason="vg_call is built on Linux x86-64 and AArch64"
    ),
    pytest.mark.skipif(
        settings.env_flag("VERIGRAD_CTYPES", False), reason="VERIGRAD_CTYPES asks for ctypes calls"
    ),
]

P, I64, INT = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
LAYER_NORM = [P, P, P, P, I64, I64, ctypes.c_double, I64, I64, INT]  # rows.c: 9 integers, a double between


def _both(name: str, argtypes: list, restype=None):
    plain = getattr(cpu.cpu.library.cdll, name)
    plain.argtypes, plain.restype = argtypes, restype
    return fastcall.function(plain, argtypes, restype), plain


def test_the_extension_is_loaded_and_reported():
    assert fastcall.status() == "vg_call" and cpu.build_info()["calls"] == "vg_call"
    fast, plain = _both("vg_layer_norm_f32", LAYER_NORM)
    assert type(fast).__name__ == "Function" and fast is not plain


@pytest.mark.parametrize("threads", [1, 2])
def test_a_call_with_stack_integers_and_a_double_gives_the_ctypes_bits(threads):
    fast, plain = _both("vg_layer_norm_f32", LAYER_NORM)
    data = cpu.cpu.library.data
    rng = np.random.default_rng(0)
    x = rng.standard_normal((37, 24), dtype=np.float32)
    w, b = rng.standard_normal(24, dtype=np.float32), rng.standard_normal(24, dtype=np.float32)
    outs = []
    for fn, eps in ((fast, 1e-5), (plain, 1e-5), (fast, 0.25)):
        out = np.full_like(x, np.nan)
        fn(data(x), data(w), data(b), data(out), 37, 24, eps, 8, 4, threads)
        outs.append(out)
    assert outs[0].tobytes() == outs[1].tobytes() and np.isfinite(outs[0]).all()
    assert not np.array_equal(outs[0], outs[2])  # the double reached its parameter


def test_ctypes_arrays_go_by_address_and_other_objects_to_ctypes():
    fast, _ = _both("vg_add_bc_f32", [P, P, P, P, I64, INT])
    data = cpu.cpu.library.data
    a, b = np.arange(6, dtype=np.float32).reshape(2, 3), np.array([10, 20, 30], np.float32)
    dims = (ctypes.c_int64 * 12)(1, 1, 2, 3, 0, 0, 3, 1, 0, 0, 0, 1)  # rank 4: b broadcast over rows
    out = np.zeros_like(a)
    fast(data(a), data(b), data(out), dims, 1, 1)
    assert out.tolist() == (a + b).tolist()
    out[:] = 0
    fast(ctypes.c_void_p(data(a)), data(b), data(out), dims, 1, 1)  # a pointer object: ctypes converts it
    assert out.tolist() == (a + b).tolist()
    with pytest.raises(TypeError):  # ctypes' own message for a wrong count
        fast(data(a), data(b))
    with pytest.raises(ctypes.ArgumentError):
        fast(1.5, data(b), data(out), dims, 1, 1)


def test_arrays_go_as_their_data_pointers(tmp_path):
    """A NumPy array (a view at an offset, a memmap) is passed as its data pointer: `Library.ptr`."""
    assert fastcall.passes_arrays() and cpu.cpu.library.ptr(np.zeros(1)) is not None
    fast, _ = _both("vg_add_bc_f32", [P, P, P, P, I64, INT])
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    mapped = np.memmap(tmp_path / "b.bin", np.float32, "w+", shape=(4,))
    mapped[:] = [100, 200, 300, 400]
    a = base[1:, 1:]  # rows 1-2, columns 1-3: an offset, strided view
    dims = (ctypes.c_int64 * 12)(1, 1, 2, 3, 0, 0, 4, 1, 0, 0, 0, 1)
    out = np.zeros((2, 3), np.float32)
    fast(a, mapped[1:], out, dims, 1, 1)
    assert out.tolist() == (a + np.asarray(mapped[1:])).tolist()


def test_signatures_it_does_not_take_stay_ctypes():
    assert fastcall.signature([P, ctypes.c_float], None) is None  # a float parameter
    assert fastcall.signature([P] * 17, None) is None  # more integers than it passes
    assert fastcall.signature([P, ctypes.c_double], ctypes.c_double) is None  # a double result
    assert fastcall.signature([P, INT, ctypes.c_double], INT) == ("iid", 1)


def test_verigrad_ctypes_keeps_the_ctypes_calls():
    code = "from verigrad.backends import cpu; print(cpu.build_info()['calls'])"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "VERIGRAD_CTYPES": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ctypes (VERIGRAD_CTYPES is set)"


def test_without_python_headers_the_kernels_run_through_ctypes():
    """No Python.h for the extension: one reason in build_info, and every kernel still runs."""
    code = (
        "import sysconfig, numpy as np\n"
        "paths = sysconfig.get_paths()\n"
        "sysconfig.get_paths = lambda: {**paths, 'include': '/nonexistent'}\n"
        "import verigrad\n"
        "from verigrad.backends import cpu\n"
        "from verigrad.ops import REGISTRY\n"
        "x = np.linspace(-2, 2, 50000, dtype=np.float32)\n"
        "out = cpu.cpu.native(REGISTRY['relu'], verigrad.f32)(x)\n"
        "assert out.tobytes() == np.maximum(x, 0).tobytes()\n"
        "print(cpu.build_info()['calls'])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ctypes (no Python.h for the vg_call extension)"


def _layout_samples() -> list:
    rng = np.random.default_rng(3)
    base = rng.standard_normal((4, 6, 5))
    return [
        base,
        base.astype(np.float32),
        base[:, ::2],
        base.transpose(2, 0, 1),
        base[1:, :, 3],
        np.broadcast_to(base[0, 0], (3, 5)),  # stride 0, read-only
        np.zeros((), np.int64),
        np.zeros((2, 0, 3), np.bool_),
        np.ones(4, ">f4"),
        np.frombuffer(bytearray(4 * 9), np.float32, 8, 4),  # aligned, its own buffer
        np.frombuffer(bytearray(4 * 9 + 1), np.float32, 8, 1),  # not aligned
        None,
    ]


def test_layout_bytes_say_shape_strides_dtype_and_flags():
    """`layout` gives, item by item, what NumPy says of each array; two tuples of arrays get equal bytes
    exactly when those are equal (the fused kernels' layout cache relies on it); a non-array: None."""
    layout = fastcall.layout_key()
    assert layout is not None
    samples = _layout_samples()
    for a in samples:
        assert layout((a,)) == fastcall.expected_layout((a,))
    assert layout(tuple(samples)) == b"".join(fastcall.expected_layout((a,)) for a in samples)
    keys = [layout((a,)) for a in samples]
    assert len(set(keys)) == len(keys)  # every sample differs from every other in something
    copy = samples[1].copy()
    assert layout((copy,)) == keys[1] and copy is not samples[1]  # the same layout, another array
    copy.flags.writeable = False
    assert layout((copy,)) != keys[1]
    assert layout((samples[0], 1.0)) is None and layout((np.float32(1.0),)) is None


def test_a_fused_kernel_takes_arrays_vg_call_does_not_pass_with_the_same_bits():
    """Inputs at 4 bytes past an 8-byte boundary (f32 views: aligned to their items, which vg_call's
    pointer tuples do not take) go through ctypes; ones not aligned to their items, NumPy: the same bits."""
    from verigrad.ir import trace
    from verigrad.ir.passes import optimize
    from verigrad.ir.passes.fuse import is_fused
    from verigrad.shapes import spec

    program = optimize(trace(lambda a, b: (a * b + b).sqrt() - b, spec((1000,)), spec((1000,))))
    [instr] = [i for i in program.instrs if is_fused(i)]
    kernel = cpu.cpu.native(instr.op, instr.out.spec.dtype)
    params = instr.params["params"]
    rng = np.random.default_rng(4)
    a, b = rng.random(1000, dtype=np.float32), rng.random(1000, dtype=np.float32)
    expected = instr.op.reference(a, b, params=params)
    shifted = np.empty(1001, np.float32)[1:]  # 4 bytes past an 8-byte boundary
    shifted[...] = a
    unaligned = np.frombuffer(bytearray(4 * 1000 + 1), np.float32, 1000, 1)
    unaligned[...] = a
    for x in (a, shifted, unaligned):
        assert kernel(x, b, params=params).tobytes() == expected.tobytes()


ADD = [P, P, P, I64, I64, INT]  # vg_add_f32(a, b, out, n, min_chunk, threads)


def test_a_tape_makes_the_recorded_calls_again_and_moves_pointers_to_other_inputs():
    """Recorded calls (arrays held by the tape, results kept) are made again by `run`; `inputs` finds
    the pointers into the recording's inputs (a view at an offset included) and `rebind` moves them."""
    add, _ = _both("vg_add_f32", ADD)
    a, b = np.arange(8, dtype=np.float32), np.full(8, 10, np.float32)
    tmp, out = np.empty(8, np.float32), np.empty(4, np.float32)
    tape = fastcall.tape()
    fastcall.record(tape)
    try:
        add(a, b, tmp, 8, 1, 1)
        add(tmp[2:6], a[4:], out, 4, 1, 1)  # views: pointers into `a` at an offset, and into `tmp`
    finally:
        fastcall.record(None)
    assert len(tape) == 2 and tape.foreign == 0 and tape.checked(0, 2) == 0
    assert out.tolist() == [16, 18, 20, 22]
    a[:] = 100
    assert tape.run(0, 2) == -1 and out.tolist() == [210, 210, 210, 210]
    assert tape.inputs(((a.ctypes.data, a.nbytes),)) == 2  # a in the first call and a[4:] in the second
    other = np.arange(8, dtype=np.float32) * 2
    tape.rebind((other,))
    assert tape.run(0, 2) == -1 and out.tolist() == [(2 * k + 10) + 2 * (k + 2) for k in range(2, 6)]
    assert a.tolist() == [100] * 8  # nothing written into the old input
    with pytest.raises(IndexError):
        tape.run(1, 3)
    with pytest.raises(TypeError):
        tape.rebind((other, other))


def test_a_tape_counts_calls_that_went_to_ctypes_and_ignores_other_threads():
    add, _ = _both("vg_add_f32", ADD)
    a, out = np.ones(4, np.float32), np.zeros(4, np.float32)
    tape = fastcall.tape()
    fastcall.record(tape)
    try:
        pointer = ctypes.c_void_p(a.ctypes.data)  # a pointer object: ctypes makes the call
        add(pointer, a.ctypes.data, out.ctypes.data, 4, 1, 1)
        other = threading.Thread(target=lambda: add(a, a, out, 4, 1, 1))
        other.start()
        other.join()
    finally:
        fastcall.record(None)
    assert tape.foreign == 1 and len(tape) == 0 and out.tolist() == [2, 2, 2, 2]
    add(a, a, out, 4, 1, 1)  # after record(None): not on the tape
    assert len(tape) == 0


def test_a_recorded_result_is_compared_when_replayed():
    """A call that returns a value (a convolution's "done": 0 where its f32 result overflowed) stops
    `run` at the first record that returns another value than it did when recorded."""
    import verigrad
    from verigrad.ops import REGISTRY

    conv = cpu.cpu.native(REGISTRY["conv2d"], verigrad.f32)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 6, 6), dtype=np.float32)
    w = rng.standard_normal((4, 3, 3, 3), dtype=np.float32)
    params = {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "layout": "NCHW"}
    tape = fastcall.tape()
    fastcall.record(tape)
    try:
        first = conv(x, w, **params)
        conv(x, w, **params)
    finally:
        fastcall.record(None)
    assert len(tape) == 2 and tape.checked(0, 2) == 2
    assert tape.run(0, 2) == -1
    x[0, :, 2, 2] = 3e38  # the sums overflow: the C function says it did not finish
    assert tape.run(0, 2) == 0 and np.isinf(first).any()
