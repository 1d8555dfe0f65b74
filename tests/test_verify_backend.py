"""The backend verification suite (`verigrad.backends.verification`): every native kernel of the cpu
backend held to its op's reference at its stated exactness, with 1, 2 and 3 threads; proof that the
suite catches wrong kernels (an ulp off against an exact claim, bits that depend on the thread count,
wrong only on NaN, on a strided view, on an empty array); and a compiled CNN training step on cpu
against the reference."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import verigrad
from verigrad import nn
from verigrad.backends import active, cpu, verification
from verigrad.backends.cpu import matmul as cpu_matmul
from verigrad.backends.kernel_table import EXACT, Backend, tolerance, ulp
from verigrad.cli.trainer import training_step
from verigrad.ops import REGISTRY

HAS_CC = cpu.available()
needs_cc = pytest.mark.skipif(not HAS_CC, reason="the cpu backend could not be built here")
CPU_KERNELS = verification.native_kernels(cpu.cpu) if HAS_CC else []


# the suite on the cpu backend: whatever kernels it has, each a test of its own --------------------------
@needs_cc
@pytest.mark.parametrize(
    ("op", "dtype"),
    [pytest.param(o, d, id=f"{o}-{d or '*'}") for o, d in CPU_KERNELS],
)
def test_cpu_kernel_meets_its_stated_exactness(op, dtype):
    result = verification.verify_kernel(cpu.cpu, op, dtype)
    assert result.passed, f"{op} {result.dtype} ({result.exactness}) {result.status}: {result.message}"
    assert result.cases > 0


def test_the_suite_restores_threads_and_chunk():
    threads, chunk = cpu.cpu.threads, cpu.min_chunk()
    verification.verify(_wrong("relu", _shifted_relu), ["relu"])
    verification.verify(cpu.cpu, ["neg"])
    assert (cpu.cpu.threads, cpu.min_chunk()) == (threads, chunk)


def test_the_cases_cover_special_values_sizes_views_and_dtypes():
    # sqrt: its f32 kernel also gets int and bool operands (relu keeps ints, as PyTorch's)
    cases = list(verification.cases_for(REGISTRY["sqrt"], lambda d: d == "f32"))
    names = " | ".join(c.what for c in cases)
    for words in ("special values", "signed zeros and ones", "->0", "->1", "->600", *verification.LAYOUTS):
        assert words in names, words
    values = np.concatenate([c.arrays[0].ravel() for c in cases if c.arrays[0].dtype == np.float32])
    fi = np.finfo(np.float32)
    assert np.isnan(values).any() and np.isposinf(values).any() and np.isneginf(values).any()
    assert (np.signbit(values) & (values == 0)).any() and (values == fi.max).any()
    assert ((values != 0) & (np.abs(values) < fi.tiny)).any()  # subnormals
    assert {c.arrays[0].dtype for c in cases} >= {np.dtype(np.float32), np.dtype(np.int64), np.dtype(bool)}
    assert all(c.out.dtype.name == "f32" for c in cases)  # every case reaches the f32 kernel
    layouts = [c.arrays[0] for c in cases if "transposed" in c.what or "offset and strided" in c.what]
    assert layouts and not any(a.flags.c_contiguous for a in layouts if a.size > 1)
    assert any(0 in c.arrays[0].shape for c in cases) and any(c.arrays[0].size >= 600 for c in cases)
    binary = list(verification.cases_for(REGISTRY["add"], lambda d: d == "f64"))
    assert any("(first input)" in c.what and not c.arrays[0].flags.c_contiguous for c in binary)


def test_tolerance_claims_leave_the_largest_values_out():
    exact = {c.what: c for c in verification.cases_for(REGISTRY["sum"], lambda d: d == "f32")}
    summed = {
        c.what: c for c in verification.cases_for(REGISTRY["sum"], lambda d: d == "f32", tolerance=True)
    }
    top = np.finfo(np.float32).max
    assert any((np.abs(c.arrays[0]) == top).any() for c in exact.values())
    assert not any((np.abs(c.arrays[0]) == top).any() for c in summed.values())


# compare: hand-computed verdicts ---------------------------------------------------------------------
def _f32(*values: float) -> np.ndarray:
    return np.array(values, np.float32)


def test_compare_counts_ulps_and_matches_nan_with_nan():
    one_up = np.nextafter(np.float32(1), np.float32(2))
    v = verification.compare(_f32(1, one_up), _f32(1, 1), EXACT)
    assert v.message.startswith("other bits") and v.ulps == 1 and v.index == (1,)
    assert verification.compare(_f32(1, one_up), _f32(1, 1), ulp(1)) == verification.Verdict(ulps=1)
    assert "2 ulps" in verification.compare(_f32(3, 1), _f32(3, np.nextafter(one_up, 2)), ulp(1)).message
    nans = np.array([np.nan, -np.nan, np.inf], np.float32)
    assert verification.compare(nans, nans[[1, 0, 2]], EXACT).message == ""  # NaN meets NaN, either sign
    assert "NaN where" in verification.compare(_f32(np.nan), _f32(0), ulp(100)).message
    zeros = verification.compare(_f32(-0.0), _f32(0.0), EXACT)
    assert "other bits" in zeros.message and zeros.ulps == 0
    assert verification.compare(_f32(-0.0), _f32(0.0), ulp(1)).message == ""
    big = np.finfo(np.float32).max
    assert verification.compare(_f32(np.inf), _f32(big), ulp(1)).ulps == 1  # the next float after max is inf
    ints = verification.compare(np.array([1, 2]), np.array([1, 3]), EXACT)
    assert "other values" in ints.message and ints.index == (1,)
    u8 = verification.compare(np.array([[7]], np.uint8), np.array([[9]], np.uint8), ulp(4))
    assert "other values" in u8.message and "kernel 7, reference 9" in u8.message
    bf16 = verification.compare(np.array([0x3F80], np.uint16), np.array([0x3F81], np.uint16), EXACT)
    assert bf16.ulps == 1 and "bf16 0x3f80" in bf16.message  # bf16 bits, an ulp of bf16
    shapes = verification.compare(np.zeros(2), np.zeros(3), EXACT)
    assert "reference gives float64[3]" in shapes.message


def test_compare_holds_tolerances_to_rtol_and_atol():
    claim = tolerance(1e-6, 1e-9)
    v = verification.compare(np.array([1 + 5e-7, 0.0, np.inf]), np.array([1.0, 5e-10, np.inf]), claim)
    assert v.message == "" and v.error == pytest.approx(5e-10 / (1e-6 * 5e-10 + 1e-9))
    assert "times the claimed" in verification.compare(np.array([1 + 3e-6]), np.array([1.0]), claim).message
    assert "infinity" in verification.compare(np.array([np.inf]), np.array([1e308]), claim).message


# the suite catches wrong kernels -----------------------------------------------------------------------
def _wrong(op: str, kernel, dtype: str = "f32", exactness=EXACT) -> Backend:
    backend = Backend("wrong", "deliberately wrong kernels")
    backend.register(op, kernel, dtype, exactness)
    return backend


def _one_ulp_up(op: str):
    def kernel(x):
        """The reference, one ulp up (NaN stays NaN, inf stays inf)."""
        r = np.asarray(REGISTRY[op].reference(x)).astype(np.float32)
        return np.nextafter(r, np.float32(np.inf))

    return kernel


_shifted_relu = _one_ulp_up("relu")


def _only(backend: Backend) -> verification.KernelResult:
    [result] = verification.verify(backend).results
    return result


def test_an_ulp_off_fails_an_exact_claim_and_meets_an_ulp_claim():
    # sqrt: its f32 kernel also gets bool operands (relu refuses them, as PyTorch's)
    result = _only(_wrong("sqrt", _one_ulp_up("sqrt")))
    assert result.status == "fail" and result.worst_ulps == 1 and result.failing is not None
    assert "other bits than the reference (claimed exact)" in result.message
    assert result.message.startswith("sample 0, bool (bool[])")  # bool input, f32 result
    assert result.message.endswith(
        "kernel 1.0000001192092896 (0x3f800001), reference 1.0 (0x3f800000); inputs there: True"
    )
    loose = _only(_wrong("sqrt", _one_ulp_up("sqrt"), exactness=ulp(1)))
    assert loose.passed and loose.worst_ulps == 1 and loose.cases > 100


def test_bits_that_depend_on_the_thread_count_fail():
    """exp whose first thread's chunk gives the reference's bits and whose other chunks give an ulp more
    (as another code path for a chunk's edge might): within the claimed 4 ulps on any thread count,
    but not the same bits on 1 and on 2 threads."""
    backend = Backend("wrong")

    def exp(x):
        r = np.asarray(REGISTRY["exp"].reference(x)).astype(np.float32)
        flat = r.reshape(-1)
        cut = -(-flat.size // backend.threads)
        flat[cut:] = np.nextafter(flat[cut:], np.float32(np.inf))
        return r

    backend.register("exp", exp, "f32", ulp(4))
    result = _only(backend)
    assert result.status == "fail", result.message
    assert "2 threads (min chunk 3) gives other bits than 1 thread at the default chunk" in result.message
    assert result.worst_ulps == 0  # on one thread, the reference's bits


class TwoPaths(Backend):
    """A backend whose exp kernel has a second code path ("slow") giving an ulp more where x > 1."""

    path = "fast"

    def paths(self, op, dtype):
        return ("fast", "slow") if op == "exp" else ("",)

    def on_path(self, path):
        import contextlib

        @contextlib.contextmanager
        def chosen():
            before, self.path = self.path, path or self.path
            try:
                yield
            finally:
                self.path = before

        return chosen()


def test_a_path_that_gives_other_bits_fails_and_is_named():
    backend = TwoPaths("paths")

    def exp(x):
        r = np.asarray(REGISTRY["exp"].reference(x)).astype(np.float32)
        if backend.path == "slow":
            r[x > 1] = np.nextafter(r[x > 1], np.float32(np.inf))
        return r

    backend.register("exp", exp, "f32", ulp(4))
    result = _only(backend)
    assert result.status == "fail", result.message
    path = "1 thread (min chunk 3) on the slow path"
    assert f"{path} gives other bits than 1 thread at the default chunk on the fast path" in result.message
    assert result.worst_ulps == 0  # the default path: the reference's bits


def _record_paths(monkeypatch, module, name: str) -> list[str]:
    """module.<name> (path() reads the kernel path, path(p) sets it) patched to record each path set; the
    list it fills."""
    taken = []
    real = getattr(module, name)

    def spy(path=None):
        if path is not None:
            taken.append(path)
        return real(path)

    monkeypatch.setattr(module, name, spy)
    return taken


@needs_cc
def test_the_vector_paths_of_the_cpu_kernels_are_each_verified(monkeypatch):
    """verify_kernel takes each path the machine has (the AVX-512, AVX2 and scalar ones on x86), and is
    left on the default path after."""
    chosen = cpu.vector_path()
    taken = _record_paths(monkeypatch, cpu, "vector_path")
    assert verification.verify_kernel(cpu.cpu, "sigmoid", "f32").passed
    assert set(taken) >= set(cpu.vector_paths()) and cpu.vector_path() == chosen
    assert cpu.cpu.paths("sigmoid", "f64") == cpu.cpu.paths("relu", "f32") == ("",)


def test_a_kernel_wrong_only_on_nan_fails_on_the_special_values():
    def maximum(a, b):  # drops a NaN in b
        r = REGISTRY["maximum"].reference(a, b)
        return np.where(np.isnan(b) & ~np.isnan(a), a, r)

    result = _only(_wrong("maximum", maximum, "f64"))
    assert result.status == "fail" and "special values" in result.message
    assert "NaN where the reference has a number" in result.message and "inputs there" in result.message


def test_a_kernel_wrong_only_on_strided_views_fails_on_them():
    def neg(x):  # reads the elements in memory order, as a loop over the buffer would
        x = np.asarray(x)
        return np.negative(x.ravel(order="K")).reshape(x.shape)

    result = _only(_wrong("neg", neg, "f64"))
    assert result.status == "fail"
    assert any(f"special values {layout}" in result.message for layout in ("transposed", "reversed"))
    assert not result.failing.arrays[0].flags.c_contiguous


def test_a_kernel_that_writes_into_its_input_or_raises_on_empty_arrays_fails():
    def in_place(x):
        return np.maximum(x, 0, out=x) if x.dtype == np.float32 else REGISTRY["relu"].reference(x)

    assert "wrote into an input" in _only(_wrong("relu", in_place)).message

    def no_empty(x):
        if x.size == 0:
            raise ValueError("empty")
        return REGISTRY["relu"].reference(x)

    result = _only(_wrong("relu", no_empty))
    assert "raised ValueError: empty; the reference returned a result" in result.message
    assert 0 in result.failing.arrays[0].shape


def test_a_kernel_must_raise_where_the_reference_does():
    def take(x, idx, axis):  # clips an index out of range, where the reference raises IndexError
        return np.take(x, idx, axis=axis, mode="clip")

    result = _only(_wrong("take", take))
    assert "the reference raises IndexError" in result.message and "the kernel returned" in result.message


class Rerunning(Backend):
    """A backend whose matmul gives the reference's result but says it computed it again, as a fast
    kernel whose infinity or NaN was recomputed does: on every call, or only on inputs beyond 2^20."""

    def __init__(self, always: bool) -> None:
        super().__init__("rerunning")
        self.count = 0

        def matmul(a, b):
            if always or not (np.abs(a) <= 2.0**20).all() or not (np.abs(b) <= 2.0**20).all():
                self.count += 1
            return REGISTRY["matmul"].reference(a, b)

        self.register("matmul", matmul, "f32")

    def reruns(self) -> int:
        return self.count


def test_a_rerun_on_inputs_that_cannot_overflow_fails():
    """The recomputed result is right, but it hides a kernel whose result held a NaN or an infinity."""
    result = _only(Rerunning(always=True))
    assert result.status == "fail" and verification.HIDDEN in result.message
    assert _only(Rerunning(always=False)).passed  # reruns where the inputs may overflow are allowed
    checked = verification.CheckedBackend(Rerunning(always=True))  # and in a checked program's calls
    matmul = checked.native(REGISTRY["matmul"], verigrad.f32)
    matmul(np.ones((2, 3), np.float32), np.ones((3, 2), np.float32))
    assert len(checked.failures) == 1 and verification.HIDDEN in checked.failures[0]
    matmul(np.full((2, 3), 1e30, np.float32), np.ones((3, 2), np.float32))  # may overflow: allowed
    assert len(checked.failures) == 1


class TwoModes(Backend):
    """A backend whose matmul has a "fast" mode (the reference's result, claimed within a tolerance) and
    an "exact" one whose stated definition is the naive loop; `exact_bits` says whether that mode's
    kernel really gives the loop's bits or a result one ulp above them (within the tolerance)."""

    def __init__(self, exact_bits: bool) -> None:
        super().__init__("two-modes")
        self.exact_bits, self.mode = exact_bits, "fast"

        def matmul(a, b):
            if self.mode == "exact":
                loop = cpu_matmul.reference_exact(a, b)
                return loop if self.exact_bits else np.nextafter(loop, np.float32(np.inf))
            return REGISTRY["matmul"].reference(a, b)

        self.register("matmul", matmul, "f32", exactness=tolerance(1e-6, 1e-6))

    def modes(self, op, dtype):
        return {"fast": None, "exact": cpu_matmul.reference_exact}

    @contextlib.contextmanager
    def in_mode(self, mode):
        before, self.mode = self.mode, mode
        try:
            yield
        finally:
            self.mode = before


def test_each_mode_of_a_kernel_is_verified_and_held_to_its_own_definition():
    fast, exact = verification.verify(TwoModes(exact_bits=True)).results
    assert (fast.name, exact.name) == ("matmul (fast)", "matmul (exact)") and fast.passed and exact.passed
    fast, exact = verification.verify(TwoModes(exact_bits=False)).results
    assert fast.passed and exact.status == "fail"  # within the tolerance, not the loop's bits
    assert "other bits than the exact mode's definition" in exact.message


def test_the_cpu_matmul_is_verified_on_its_fast_and_exact_paths():
    results = verification.verify(cpu.cpu, ["matmul"]).results
    assert {(r.dtype, r.mode) for r in results} == {(d, m) for d in ("f32", "f64") for m in ("fast", "exact")}
    assert all(r.passed and r.cases > 100 for r in results)
    assert cpu_matmul.exact_default() is False  # each mode was left as it was


def test_kernels_no_case_reaches_are_untested_not_passed():
    backend = Backend("wrong")
    backend.register("eq", REGISTRY["eq"].reference, "f32")  # eq gives bool: an f32 kernel never runs
    backend.register("no_such_op", lambda x: x, "f32")
    results = {r.op: r for r in verification.verify(backend).results}
    assert results["eq"].status == "untested" and "no sample" in results["eq"].message
    assert results["no_such_op"].status == "untested" and not verification.verify(backend).ok


def test_a_reference_kernel_passes_for_every_dtype():
    backend = Backend("wrong")
    backend.register("where", REGISTRY["where"].reference)  # every dtype
    result = _only(backend)
    assert result.passed and result.dtype == "*" and result.cases > 50


def test_an_unknown_op_is_refused_before_any_work():
    with pytest.raises(ValueError, match="unknown op 'nope'"):
        verification.verify(cpu.cpu, ["nope"])


def test_a_checked_backend_catches_a_wrong_kernel_inside_a_compiled_program(monkeypatch):
    checked = verification.CheckedBackend(_wrong("relu", _shifted_relu), name="checked-wrong")
    monkeypatch.setitem(active._BACKENDS, checked.name, checked)
    double_relu = verigrad.compile(lambda x: x.relu() * 2)
    x = verigrad.tensor(np.array([-1.0, 0.5, 3.0], np.float32))
    with verigrad.backend(checked.name):
        out = double_relu(x).numpy()
    assert out.tobytes() == (_shifted_relu(x.numpy()) * 2).tobytes()  # the wrapped kernel's result
    assert checked.calls == {("relu", "f32"): 1} and len(checked.failures) == 1
    assert checked.failures[0].startswith("relu f32 (f32[3], {}): other bits than the reference")


# a compiled training step on cpu against the same step on the reference ------------------------------
def _run_steps(backend_name: str, steps: int = 20, threads: int = 1) -> dict[str, list[bytes]]:
    """`steps` compiled Adam steps of the digits CNN on random batches; the bits of every loss and
    logits, and of the parameters and optimizer state at the end."""
    verigrad.manual_seed(7)
    model = verigrad.models.digits_cnn()
    opt = verigrad.optim.Adam(model.parameters(), lr=1e-2)
    loss_fn = nn.CrossEntropyLoss()

    step = training_step(model, opt, loss_fn, logits=True)

    compiled = verigrad.compile(step)
    rng = np.random.default_rng(0)
    out: dict[str, list[bytes]] = {"losses": [], "logits": []}
    verigrad.set_threads(threads)
    try:
        with verigrad.backend(backend_name):
            for _ in range(steps):
                x = rng.standard_normal((8, 1, 8, 8)).astype(np.float32)
                loss, logits = compiled(verigrad.tensor(x), verigrad.tensor(rng.integers(0, 10, 8)))
                out["losses"].append(loss.numpy().tobytes())
                out["logits"].append(logits.numpy().tobytes())
    finally:
        verigrad.set_threads(1)
    out["params"] = [p.numpy().tobytes() for p in model.parameters()]
    out["state"] = [np.asarray(t.numpy()).tobytes() for s in opt.state.values() for t in s.values()]
    return out


@needs_cc
def test_a_compiled_training_step_on_cpu_meets_every_stated_exactness(monkeypatch):
    """Kernels that claim exactness give the reference's bits, so with only those the 20 steps are
    bit-identical to the reference's. A kernel within some ulps or a tolerance bounds each result
    against the reference on the same inputs, not the drift of a training run (a step amplifies the
    difference of its inputs by however much the network does, and 20 steps compound it). So with
    every kernel, the sound comparison is per call: each kernel call of the 20 compiled steps is held
    to the reference on that call's inputs at its stated exactness; and the run gives the same bits on
    1 and 3 threads (with a small chunk, so the threads do split the work)."""
    reference = _run_steps("reference")
    exact = {k: kernel for k, (kernel, exactness) in cpu.cpu.registered().items() if exactness.is_exact}
    with monkeypatch.context() as m:
        m.setattr(cpu.cpu, "_kernels", exact)
        assert _run_steps("cpu") == reference

    checked = verification.CheckedBackend(cpu.cpu)
    monkeypatch.setitem(active._BACKENDS, checked.name, checked)
    one = _run_steps(checked.name)
    assert checked.failures == [], checked.failures[:3]
    inexact = {key for key in checked.calls if not cpu.cpu.exactness(*key).is_exact}
    assert inexact, "no kernel with a looser claim ran: the check above proved nothing beyond the bits"
    cpu.set_min_chunk(64)
    try:
        three = _run_steps("cpu", threads=3)
    finally:
        cpu.set_min_chunk(None)
    assert three == one


@needs_cc
@pytest.mark.parametrize(
    "op",
    [
        "qmatmul",
        "qmatmul_q8",
        "qembedding",
        "dequantize",
    ],
)
def test_the_quant_paths_of_the_cpu_kernels_are_each_verified(monkeypatch, op):
    """verify_kernel takes each path of the quantized kernels the machine has (quant.PATHS' names: vnni,
    avx512, avx2, scalar on x86), and leaves both families on their default paths after."""
    from verigrad.backends.cpu import quant

    chosen, chosen_vector = quant.path(), cpu.vector_path()
    taken = _record_paths(monkeypatch, quant, "path")
    paths = cpu.quant_paths()
    assert paths[0] == chosen and paths[-1] == "scalar" and set(paths) <= set(quant.PATHS)
    assert cpu.cpu.paths(op, "f32") == paths
    assert verification.verify_kernel(cpu.cpu, op, "f32").passed
    assert set(taken) >= set(paths) and quant.path() == chosen and cpu.vector_path() == chosen_vector
