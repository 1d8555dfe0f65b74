"""A native build (VERIGRAD_NATIVE=1: FMA contraction and -march=native) states what it computes: the
kernels whose bits contraction can change claim a tolerance, and the verification suite holds every
kernel to its claim, on 1, 2 and 3 threads (so no thread count changes a bit there either)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from verigrad.backends import cpu
from verigrad.backends.cpu import build

pytestmark = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")

VERIFY_NATIVE = """
import json
from verigrad.backends import verification
from verigrad.backends import cpu
report = verification.verify("cpu")
claims = {f"{r.op} {r.dtype}": str(r.exactness) for r in report.results}
failed = [f"{r.op} {r.dtype}: {r.message}" for r in report.results if r.status == "fail"]
print(json.dumps({"native": cpu.build_info()["native"], "claims": claims, "failed": failed}))
"""


def run_native(script: str) -> dict:
    """What `script` prints last (JSON) in a process whose kernels are the native build's."""
    env = {**os.environ, "VERIGRAD_NATIVE": "1"}
    command = [sys.executable, "-c", script]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["native"] is True
    return found


def test_a_native_build_meets_the_claims_it_states():
    found = run_native(VERIFY_NATIVE)
    assert found["failed"] == []
    claims = found["claims"]
    units = build.CONTRACTED_UNITS
    for dtype, u in build.UNIT_ROUNDOFF.items():
        # 1 - x * x and the norms' and rotation's sums of products: contracted, so a tolerance now
        for op in ("tanh_deriv", "layer_norm", "rope"):
            assert claims[f"{op} {dtype}"] == f"rtol={units * u:g}, atol={units * u:g}"
    assert claims["argmax i64"] == "exact" and claims["add i64"] == "exact"  # integers: no rounding
    # computed in f32 arithmetic there: the ulps measured on every f32 input, which verify holds them to
    assert claims["sigmoid f32"] == "ulp(2)" and claims["silu f32"] == "ulp(3)"
    assert claims["exp f32"] == "ulp(2)" and claims["tanh f32"] == "ulp(3)"
    assert claims["gelu f32"] == "ulp(6)" and claims["gelu_tanh f32"] == "ulp(15)"
    assert claims["gelu_deriv f32"] == f"rtol={2**-22:g}, atol={2**-23:g}"
    assert claims["sigmoid f64"].startswith("rtol=")  # f64: the double formula, its claim contracted
    # no product feeds an addition in these: contraction changes nothing, so the reference's bits
    uncontracted = ("add", "mul", "div", "maximum", "relu", "sqrt", "rsqrt", "sigmoid_deriv", "cast")
    uncontracted += ("sum", "mean", "max", "im2col", "col2im", "max_pool2d", "avg_pool2d", "max_pool2d_grad")
    for op in uncontracted:
        assert claims[f"{op} f32"] == claims[f"{op} f64"] == "exact", op


def test_the_default_build_states_the_reference_bits():
    assert cpu.build_info()["native"] is False
    for op in ("tanh_deriv", "layer_norm", "rope", "add"):
        assert cpu.cpu.exactness(op, "f32").is_exact
    assert build.contracted(cpu.cpu.exactness("add", "f32"), "f32", False).is_exact


FLOAT_ACTIVATIONS = """
import json
import numpy as np
import verigrad
from verigrad.backends import cpu
from verigrad.ops import REGISTRY

# about a million floats of every exponent and both signs, and the edges of the vector paths' range
spread = np.arange(0, 2**32, 4099, dtype=np.uint64).astype(np.uint32).view(np.float32)
edges = [0.0, -0.0, np.inf, -np.inf, np.nan, -87.0, -87.00001, -88.0, 87.0, 88.0, 1e30, -1e30, 2**-149]
edges += [88.5, 88.50001, 88.72, 88.73, 89.0]  # exp: its float path's top, and overflow
edges += [1e-30, -1e-30, 2**-126, 43.5, -43.5, 9.0, -9.02]  # tanh: tiny, and near +-1
x = np.concatenate([spread, np.array(edges, np.float32)])
def ordered(a):
    i = a.view(np.int32).astype(np.int64)
    return np.where(i < 0, -2**31 - i, i)
cpu.set_min_chunk(1000)
found = {"native": cpu.build_info()["native"], "paths": list(cpu.vector_paths())}
for name in ("exp", "tanh", "sigmoid", "silu"):
    kernel, expected = cpu.cpu.native(REGISTRY[name], verigrad.f32), REGISTRY[name].reference(x)
    for path in cpu.vector_paths():
        cpu.vector_path(path)
        bits = set()
        for threads in (1, 2, 3):
            verigrad.set_threads(threads)
            y = kernel(x)
            bits.add(y.tobytes())
        nan = np.isnan(expected)
        ulps = np.abs(ordered(y) - ordered(expected))[~nan]
        found[f"{name} {path}"] = {"same_nan": bool((np.isnan(y) == nan).all()), "max_ulps": int(ulps.max()),
            "inexact": int((ulps > 0).sum()), "bits": len(bits), "digest": hash(y.tobytes()),
            "same_inf": bool((np.isinf(y) == np.isinf(expected)).all())}
print(json.dumps(found))
"""


def test_a_native_build_computes_exp_tanh_sigmoid_and_silu_in_float_within_a_few_ulps():
    found = run_native(FLOAT_ACTIVATIONS)
    for name, bound in (("exp", 2), ("tanh", 3), ("sigmoid", 2), ("silu", 3)):
        for path in found["paths"]:
            got = found[f"{name} {path}"]
            assert got["same_nan"] and got["bits"] == 1, (name, path, got)  # no thread count changes a bit
            assert got["same_inf"], (name, path, got)  # exp's overflow where the reference's is
            # f32 arithmetic: not the reference's bits everywhere, but within `bound` ulps of them
            assert 0 < got["max_ulps"] <= bound and got["inexact"] > 1000, (name, path, got)
        # every path (AVX-512, AVX2, one element at a time) runs the same operations on each element
        assert len({found[f"{name} {path}"]["digest"] for path in found["paths"]}) == 1, name


FLOAT_GELU = """
import json
import math
import numpy as np
import verigrad
from verigrad.backends import cpu
from verigrad.ops import REGISTRY

# about a million floats of every exponent and both signs, normal draws, and the float path's edges
spread = np.arange(0, 2**32, 4099, dtype=np.uint64).astype(np.uint32).view(np.float32)
normal = np.random.default_rng(7).normal(0.0, 2.0, 200_000).astype(np.float32)
edges = [0.0, -0.0, np.inf, -np.inf, np.nan, -5.5, -5.50001, -5.49999, 13.0, 13.00001, 2**-120, -2**-121]
edges += [-0.7517915, -0.75179, 4 * math.sqrt(2), -4 * math.sqrt(2), 3e38, -3e38, 2**-149]
edges += [-2.977654, -3.0, -3.00001, -1.8218912, 1e13, -1e13]  # gelu_tanh: its worst input, its edge
x = np.concatenate([spread, normal, np.array(edges, np.float32)])
def ordered(a):
    i = a.view(np.int32).astype(np.int64)
    return np.where(i < 0, -2**31 - i, i)
cpu.set_min_chunk(1000)
found = {"native": cpu.build_info()["native"], "paths": list(cpu.vector_paths())}
for name in ("gelu", "gelu_deriv", "gelu_tanh"):
    kernel, expected = cpu.cpu.native(REGISTRY[name], verigrad.f32), REGISTRY[name].reference(x)
    nan = np.isnan(expected)
    for path in cpu.vector_paths():
        cpu.vector_path(path)
        bits = set()
        for threads in (1, 2, 3):
            verigrad.set_threads(threads)
            y = kernel(x)
            bits.add(y.tobytes())
        ulps = np.abs(ordered(y) - ordered(expected))[~nan]
        finite = np.isfinite(expected)
        err = np.abs(y[finite].astype(np.float64) - expected[finite])
        excess = float((err - 2.0**-22 * np.abs(expected[finite].astype(np.float64))).max())
        found[f"{name} {path}"] = {"same_nan": bool((np.isnan(y) == nan).all()), "max_ulps": int(ulps.max()),
            "inexact": int((ulps > 0).sum()), "bits": len(bits), "digest": hash(y.tobytes()), "atol": excess,
            "same_inf": bool((np.isinf(y) == np.isinf(expected)).all())}
print(json.dumps(found))
"""


def test_a_native_build_computes_gelu_its_derivative_and_gelu_tanh_in_float_within_the_stated_bounds():
    found = run_native(FLOAT_GELU)
    for path in found["paths"]:
        for name in ("gelu", "gelu_deriv", "gelu_tanh"):
            got = found[f"{name} {path}"]
            assert got["same_nan"] and got["same_inf"] and got["bits"] == 1, (name, path, got)
            assert got["inexact"] > 1000, (name, path, got)  # f32 arithmetic, not the double path
        assert found[f"gelu {path}"]["max_ulps"] <= 6, found[f"gelu {path}"]
        assert found[f"gelu_tanh {path}"]["max_ulps"] <= 15, found[f"gelu_tanh {path}"]
        # near its zero no ulp bound holds: within 2^-22 |reference| + 2^-23
        assert found[f"gelu_deriv {path}"]["atol"] <= 2.0**-23, found[f"gelu_deriv {path}"]
    for name in ("gelu", "gelu_deriv", "gelu_tanh"):
        assert len({found[f"{name} {path}"]["digest"] for path in found["paths"]}) == 1, name
