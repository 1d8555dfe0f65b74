"""torch.* names and Tensor attributes public programs use, against torch 2.13: anomaly detection
(set_detect_anomaly / detect_anomaly raising on a NaN gradient, naming the op), torch.dtype and the
layout, torch.version.cuda, the interop threads, is_complex / is_signed / is_nonzero / is_same_size,
asarray, chain_matmul, ger, adjoint, typename and Tensor's real / imag / layout / dim_order / ger /
unsafe_split / as_strided / histogram."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import verigrad

FRAMEWORKS = [torch, verigrad]


@pytest.mark.parametrize("t", FRAMEWORKS, ids=["torch", "verigrad"])
def test_anomaly_detection_raises_on_a_nan_gradient_naming_the_op(t):
    warnings.simplefilter("ignore")
    x = t.tensor([0.0, 1.0], requires_grad=True)
    assert not t.is_anomaly_enabled()
    with t.autograd.detect_anomaly():
        assert t.is_anomaly_enabled() and t.is_anomaly_check_nan_enabled()
        with pytest.raises(
            RuntimeError, match=r"^Function '(sqrt|Sqrt)Backward0?' returned nan values in its 0th output"
        ):
            (x.sqrt() * 0).sum().backward()
    assert not t.is_anomaly_enabled()
    with t.autograd.set_detect_anomaly(True, check_nan=False):
        (t.tensor([1.0], requires_grad=True) * float("nan")).sum().backward()  # not checked
    t.autograd.set_detect_anomaly(True)  # as a call: on until turned off
    try:
        assert t.is_anomaly_enabled()
        with pytest.raises(RuntimeError, match="returned nan values"):
            t.tensor([-1.0], requires_grad=True).sqrt().sum().backward()
        y = t.tensor([2.0], requires_grad=True)
        (y * 3).sum().backward()  # no NaN: as without detection
        assert y.grad.tolist() == [3.0]
    finally:
        t.autograd.set_detect_anomaly(False)
    assert not t.is_anomaly_enabled()
    (x.sqrt() * 0).sum().backward()  # off: the NaN gradient reaches x
    assert np.isnan(x.grad.numpy()[0])


def test_small_torch_names_as_pytorchs():
    for t in FRAMEWORKS:
        assert isinstance(t.float32, t.dtype) and isinstance(t.int64, t.dtype)
        assert t.version.cuda is None and t.get_num_interop_threads() >= 1
        x = t.ones(2, 3)
        assert str(x.layout) == "torch.strided" and x.layout == t.strided and isinstance(t.strided, t.layout)
        assert (t.is_complex(x), t.is_signed(x), t.is_signed(t.ones(2, dtype=t.uint8))) == (
            False,
            True,
            False,
        )
        assert (
            t.is_nonzero(t.tensor([1.5])) and not t.is_nonzero(t.tensor([0.0])) and t.tensor(2).is_nonzero()
        )
        with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
            t.is_nonzero(t.tensor([1, 2]))
        assert t.is_same_size(x, t.zeros(2, 3)) and not x.is_same_size(t.zeros(3, 2))
        assert not x.is_inference() and not x.is_complex()
        assert x.real is x
        with pytest.raises(RuntimeError, match="imag is not implemented for tensors with non-complex dtypes"):
            x.imag  # noqa: B018
        assert x.dim_order() == (0, 1) and x.t().dim_order() == (1, 0)
        assert t.typename(x) == "torch.FloatTensor" and t.typename(3) == "int"


def test_asarray_shares_copies_and_converts_as_torch():
    warnings.simplefilter("ignore")
    for t in FRAMEWORKS:
        assert t.asarray([1, 2]).dtype == t.int64 and t.asarray([1.0, 2]).dtype == t.float32
        array = np.ones(3, np.float32)
        shared, copied = t.asarray(array), t.asarray(array, copy=True)
        array[0] = 5
        assert shared[0].item() == 5.0 and copied[0].item() == 1.0
        x = t.ones(2)
        assert t.asarray(x) is x and t.asarray(x, dtype=t.float64).dtype == t.float64
        assert t.asarray(x, copy=True) is not x
        with pytest.raises(ValueError):
            t.asarray([1, 2], dtype=t.float32, copy=False)
        leaf = t.ones(2, requires_grad=True)
        assert t.asarray(leaf).requires_grad and not t.asarray(leaf, requires_grad=False).requires_grad


def test_products_and_views_against_torch():
    rng = np.random.default_rng(3)
    a, b, c = rng.standard_normal((3, 4)), rng.standard_normal((4, 5)), rng.standard_normal((5, 2))
    v, w = rng.standard_normal(3), rng.standard_normal(4)
    warnings.simplefilter("ignore")
    for fn in [
        lambda t, a, b, c, v, w: t.chain_matmul(a, b, c),
        lambda t, a, b, c, v, w: t.chain_matmul(a),
        lambda t, a, b, c, v, w: t.ger(v, w),
        lambda t, a, b, c, v, w: v.ger(w),
        lambda t, a, b, c, v, w: t.adjoint(a.reshape(2, 2, 3)),
        lambda t, a, b, c, v, w: a.adjoint(),
        lambda t, a, b, c, v, w: a.unsafe_split(3, 1)[1],
        lambda t, a, b, c, v, w: a.unsafe_chunk(2, 0)[1],
        lambda t, a, b, c, v, w: a.as_strided((2, 2), (1, 4), 1),
        lambda t, a, b, c, v, w: a.histogram(5)[0],
        lambda t, a, b, c, v, w: a.histogram(4, range=(-1.0, 1.0))[1],
    ]:
        ours = fn(verigrad, *(verigrad.from_numpy(z.copy()) for z in (a, b, c, v, w)))
        theirs = fn(torch, *(torch.from_numpy(z.copy()) for z in (a, b, c, v, w)))
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-15, atol=1e-15)


def test_random_and_compiler_namespaces_as_torch():
    for t in FRAMEWORKS:
        from_import = __import__(f"{t.__name__}.random", fromlist=["fork_rng"]).fork_rng
        t.random.manual_seed(1)
        assert t.random.initial_seed() == 1
        with from_import():
            inside = t.rand(3)
        after = t.rand(3)
        assert bool((inside == after).all())  # the block's draws did not move the default generator
        state = t.random.get_rng_state()
        first = t.rand(2)
        t.random.set_rng_state(state)
        assert bool((t.rand(2) == first).all())
        assert not t.compiler.is_compiling()
        assert t.compiler.disable(len)([1, 2]) == 2

        @t.compiler.disable
        def plain(x):
            return x + 1

        assert plain(t.ones(1)).tolist() == [2.0]
    traced = verigrad.compile(lambda x: x * (2.0 if verigrad.compiler.is_compiling() else 3.0))
    assert traced(verigrad.ones(2)).tolist() == [2.0, 2.0]  # traced: as under torch.compile


def test_frombuffer_views_the_buffer_as_torch():
    for t in FRAMEWORKS:
        raw = bytearray(np.arange(6, dtype=np.float32).tobytes())
        view = t.frombuffer(raw, dtype=t.float32, count=3, offset=4)
        assert view.tolist() == [1.0, 2.0, 3.0]
        raw[4:8] = np.float32(9).tobytes()
        assert view.tolist() == [9.0, 2.0, 3.0]  # the buffer's memory, shared
        assert t.frombuffer(bytearray(8), dtype=t.int32).dtype == t.int32
        for size, count in ((6, -1), (0, -1), (8, 3)):
            with pytest.raises(ValueError):
                t.frombuffer(bytearray(size), dtype=t.float32, count=count)


def test_post_accumulate_grad_hook_fuses_the_optimizer_step_into_backward_as_torch():
    """The tutorial's optimizer-in-backward: one optimizer per parameter, stepped by the parameter's hook."""
    x = np.random.default_rng(4).standard_normal((3, 4)).astype(np.float32)
    weights = []
    for t in FRAMEWORKS:
        t.manual_seed(0)
        model = t.nn.Linear(4, 2)
        model.load_state_dict({"weight": t.ones(2, 4) * 0.5, "bias": t.zeros(2)})
        optimizers = {p: t.optim.SGD([p], lr=0.1, momentum=0.9) for p in model.parameters()}
        order = []

        def hook(p, optimizers=optimizers, order=order):
            order.append(tuple(p.shape))
            optimizers[p].step()
            optimizers[p].zero_grad()

        handles = [p.register_post_accumulate_grad_hook(hook) for p in model.parameters()]
        for _ in range(3):
            model(t.from_numpy(x)).pow(2).sum().backward()
        assert all(p.grad is None for p in model.parameters()) and sorted(order) == sorted([(2, 4), (2,)] * 3)
        for h in handles:
            h.remove()
        model(t.from_numpy(x)).sum().backward()
        assert model.weight.grad is not None  # removed: no step, the gradient stays
        weights.append(model.weight.detach().numpy().copy())
        with pytest.raises(RuntimeError, match="non-leaf"):
            (model.weight * 2).register_post_accumulate_grad_hook(hook)
    np.testing.assert_allclose(weights[1], weights[0], rtol=1e-6, atol=1e-6 * np.abs(weights[0]).max())


def test_namespaces_import_as_modules_and_variable_as_torch():
    import importlib

    for t in FRAMEWORKS:
        name = t.__name__
        cudnn = importlib.import_module(f"{name}.backends.cudnn")
        # torch's own test utilities (imported by the OpInfo tests) freeze its flags for the process
        if not (name == "torch" and t.backends.flags_frozen()):
            before = cudnn.benchmark
            cudnn.benchmark = True  # `import torch.backends.cudnn as cudnn; cudnn.benchmark = True`
            assert t.backends.cudnn.benchmark is True
            cudnn.benchmark = before
        assert not importlib.import_module(f"{name}.backends.mps").is_available()
        amp = importlib.import_module(f"{name}.cuda.amp")
        assert hasattr(amp, "GradScaler") and hasattr(amp, "autocast")
        assert not importlib.import_module(f"{name}.cuda").is_available()
        assert importlib.import_module(f"{name}.version").cuda is None
        variable = importlib.import_module(f"{name}.autograd").Variable
        x = t.ones(2)
        v = variable(x, requires_grad=True)
        assert v is not x and v.requires_grad and not x.requires_grad and v.is_leaf
        assert v.data_ptr() == x.data_ptr() and isinstance(x, variable) and not isinstance(3, variable)
        made = t.ones(2, requires_grad=True) * 3
        assert not variable(made).requires_grad and variable(made).grad_fn is None


def test_process_switches_and_predicates_as_torch():
    for t in FRAMEWORKS:
        x = t.ones(2)
        assert t.set_flush_denormal(False) is True  # off: nothing to do
        assert not t.is_conj(x) and not t.is_neg(x) and not x.is_conj() and not x.is_neg()
        assert t.get_device(x) == -1 and not t.is_inference_mode_enabled()
        t.set_default_tensor_type(t.FloatTensor)
        t.set_default_tensor_type("torch.FloatTensor")
        assert t.ones(1).dtype == t.float32
        with pytest.raises(TypeError, match="only floating-point types"):
            t.set_default_tensor_type(t.LongTensor)
        state = t.default_generator.get_state()
        first = t.rand(2)
        t.default_generator.set_state(state)
        assert bool((t.rand(2) == first).all())
    assert verigrad.set_flush_denormal(True) is False  # not supported: subnormals are kept (PyTorch: True)
    with pytest.raises(NotImplementedError, match="set_default_dtype"):
        verigrad.set_default_tensor_type(verigrad.DoubleTensor)  # verigrad's default is f32 only
    signal = np.sin(np.arange(64) / 3.0).astype(np.float32)
    torch.stft(torch.from_numpy(signal), 16, return_complex=True)  # PyTorch answers (complex)
    for call in (
        lambda s: verigrad.stft(s, 16, return_complex=True),
        lambda s: s.stft(16),
        lambda s: s.istft(16),
    ):
        with pytest.raises(NotImplementedError, match="verigrad has no complex numbers"):
            call(verigrad.from_numpy(signal))
