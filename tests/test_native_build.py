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
from verigrad import verify
from verigrad.backends import cpu
report = verify.verify("cpu")
claims = {f"{r.op} {r.dtype}": str(r.exactness) for r in report.results}
failed = [f"{r.op} {r.dtype}: {r.message}" for r in report.results if r.status == "fail"]
print(json.dumps({"native": cpu.build_info()["native"], "claims": claims, "failed": failed}))
"""


def test_a_native_build_meets_the_claims_it_states():
    env = {**os.environ, "VERIGRAD_NATIVE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", VERIFY_NATIVE], env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["native"] is True
    assert found["failed"] == []
    claims = found["claims"]
    units = build.CONTRACTED_UNITS
    for dtype, u in build.UNIT_ROUNDOFF.items():
        # 1 - x * x and the norms' and rotation's sums of products: contracted, so a tolerance now
        for op in ("tanh_deriv", "layer_norm", "rope"):
            assert claims[f"{op} {dtype}"] == f"rtol={units * u:g}, atol={units * u:g}"
    assert claims["argmax i64"] == "exact" and claims["add i64"] == "exact"  # integers: no rounding


def test_the_default_build_states_the_reference_bits():
    assert cpu.build_info()["native"] is False
    for op in ("tanh_deriv", "layer_norm", "rope", "add"):
        assert cpu.cpu.exactness(op, "f32").is_exact
    assert build.contracted(cpu.cpu.exactness("add", "f32"), "f32", False).is_exact
