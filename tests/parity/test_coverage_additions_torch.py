"""What PyTorch programs reach for that verigrad lacked, against PyTorch 2.13: Adafactor, Muon and
SparseAdam, CyclicLR, packed sequences through the recurrent layers, MultiheadAttention with other key and
value widths, AdaptiveLogSoftmaxWithLoss, nn.init.dirac_, linalg.lstsq's drivers and pinv(hermitian=True)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import verigrad

# optimizers ---------------------------------------------------------------------------------------


def _train(lib, name: str, kwargs: dict, inits, grads, dtype: str):
    params = [lib.tensor(a, dtype=getattr(lib, dtype), requires_grad=True) for a in inits]
    opt = getattr(lib.optim, name)(params, **kwargs)
    for step in grads:
        for p, g in zip(params, step):
            p.grad = lib.tensor(g, dtype=getattr(lib, dtype))
        opt.step()
    return [p.detach().numpy().copy() for p in params], opt


OPTIMIZERS = {
    "Adafactor": ({}, [(4, 5), (3,), (2, 3, 4), ()]),
    "Adafactor options": (
        {
            "lr": 0.1,
            "beta2_decay": -0.5,
            "eps": (1e-5, 1e-2),
            "d": 1.5,
            "weight_decay": 0.1,
            "foreach": True,
            "maximize": True,
        },
        [(4, 5), (3,), (2, 3, 4)],
    ),
    "Adafactor eps1 0": ({"eps": (0.0, 0.0), "lr": 0.5}, [(3, 2), (5,)]),
    "Muon": ({}, [(4, 6), (7, 3), (5, 5)]),
    "Muon options": (
        {
            "lr": 0.02,
            "nesterov": False,
            "adjust_lr_fn": "match_rms_adamw",
            "ns_steps": 3,
            "momentum": 0.9,
            "weight_decay": 0.0,
            "ns_coefficients": (3.0, -3.2, 1.2),
            "eps": 1e-5,
        },
        [(4, 6), (7, 3)],
    ),
    "Muon original": ({"adjust_lr_fn": "original", "weight_decay": 0.3}, [(9, 2)]),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_optimizer_steps_equal_pytorchs(name: str, dtype: str) -> None:
    kwargs, shapes = OPTIMIZERS[name]
    rng = np.random.default_rng(len(name))
    inits = [rng.standard_normal(s) for s in shapes]
    grads = [[rng.standard_normal(s) for s in shapes] for _ in range(6)]
    cls = name.split()[0]
    ours, opt = _train(verigrad, cls, kwargs, inits, grads, dtype)
    theirs, topt = _train(torch, cls, kwargs, inits, grads, dtype)
    tol = 1e-12 if dtype == "float64" else 1e-6
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    ours_state, their_state = opt.state_dict(), topt.state_dict()
    assert ours_state["param_groups"] == their_state["param_groups"]
    for k, entry in their_state["state"].items():
        assert set(ours_state["state"][k]) == set(entry)
        for key, value in entry.items():
            np.testing.assert_allclose(ours_state["state"][k][key].numpy(), value.numpy(), rtol=tol, atol=tol)


def test_muon_is_pytorchs_bf16_newton_schulz_to_the_bit() -> None:
    from torch.optim._muon import _zeropower_via_newtonschulz

    from verigrad.optim.muon import zeropower_via_newtonschulz

    rng = np.random.default_rng(3)
    for shape in [(4, 6), (6, 4), (8, 8), (16, 5), (3, 20), (32, 24)]:
        g = rng.standard_normal(shape)
        theirs = _zeropower_via_newtonschulz(torch.from_numpy(g), (3.4445, -4.775, 2.0315), 5, 1e-7)
        ours = zeropower_via_newtonschulz(verigrad.tensor(g), (3.4445, -4.775, 2.0315), 5, 1e-7)
        np.testing.assert_array_equal(ours.numpy(), theirs.float().numpy())


def test_state_dict_loads_from_pytorchs_adafactor() -> None:
    rng = np.random.default_rng(0)
    inits = [rng.standard_normal((3, 4)), rng.standard_normal(5)]
    grads = [[rng.standard_normal(a.shape) for a in inits] for _ in range(4)]
    _, topt = _train(torch, "Adafactor", {}, inits, grads[:2], "float64")
    params = [verigrad.tensor(a, requires_grad=True) for a in _train(torch, "Adafactor", {}, inits, grads[:2],
                                                                      "float64")[0]]  # fmt: skip
    opt = verigrad.optim.Adafactor(params)
    saved = topt.state_dict()
    opt.load_state_dict({"state": {k: {n: verigrad.tensor(v.numpy()) for n, v in s.items()}
                                   for k, s in saved["state"].items()},
                         "param_groups": saved["param_groups"]})  # fmt: skip
    tparams = topt.param_groups[0]["params"]
    for step in grads[2:]:
        for p, tp, g in zip(params, tparams, step):
            p.grad, tp.grad = verigrad.tensor(g), torch.tensor(g)
        opt.step()
        topt.step()
    for p, tp in zip(params, tparams):
        np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("lib", [torch, verigrad], ids=["torch", "verigrad"])
def test_optimizer_refusals_are_pytorchs(lib) -> None:
    vector = lib.zeros(3, requires_grad=True)
    with pytest.raises(ValueError, match="Muon only supports 2D parameters"):
        lib.optim.Muon([vector])
    with pytest.raises(ValueError, match="Adjust learning rate function"):
        lib.optim.Muon([lib.zeros(2, 2, requires_grad=True)], adjust_lr_fn="nope")
    with pytest.raises(ValueError, match="beta2_decay should be <= 0"):
        lib.optim.Adafactor([vector], beta2_decay=0.5)
    with pytest.raises(ValueError, match="Clipping threshold d should be >= 1"):
        lib.optim.Adafactor([vector], d=0.5)
    opt = lib.optim.SparseAdam([vector])
    vector.grad = lib.ones(3)
    with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients"):
        opt.step()


# CyclicLR -------------------------------------------------------------------------------------------


class _Halving:
    """A scale_fn that is an object: its attributes go into the state dict, as PyTorch's."""

    def __init__(self) -> None:
        self.base = 0.5

    def __call__(self, x: float) -> float:
        return self.base**x


CYCLIC = {
    "triangular": ("SGD", {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 3}),
    "triangular2 uneven": (
        "SGD",
        {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 2, "step_size_down": 5, "mode": "triangular2"},
    ),
    "exp_range": (
        "SGD",
        {
            "base_lr": [0.01, 0.02],
            "max_lr": [0.1, 0.3],
            "step_size_up": 4,
            "mode": "exp_range",
            "gamma": 0.9,
            "base_momentum": [0.7, 0.8],
        },
    ),
    "scale_fn cycle": (
        "SGD",
        {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 2, "scale_fn": lambda x: 1 / x},
    ),
    "scale_fn iterations": (
        "SGD",
        {
            "base_lr": 0.01,
            "max_lr": 0.1,
            "step_size_up": 3,
            "scale_fn": _Halving(),
            "scale_mode": "iterations",
        },
    ),
    "Adam betas": ("Adam", {"base_lr": 0.001, "max_lr": 0.01, "step_size_up": 3, "max_momentum": 0.95}),
    "no momentum": ("Adagrad", {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 2, "cycle_momentum": False}),
}


def _cyclic(lib, name: str, steps: int = 17):
    cls, kwargs = CYCLIC[name]
    a, b = lib.zeros(2, requires_grad=True), lib.zeros(3, requires_grad=True)
    extra = {"momentum": 0.5} if cls == "SGD" else {}
    opt = getattr(lib.optim, cls)([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1, **extra)
    schedule = lib.optim.lr_scheduler.CyclicLR(opt, **kwargs)
    key = "betas" if cls == "Adam" else "momentum"
    seen = []
    for _ in range(steps):
        seen.append((schedule.get_last_lr(), [g.get(key) for g in opt.param_groups]))
        opt.step()
        schedule.step()
    return seen, schedule, opt


@pytest.mark.parametrize("name", CYCLIC)
def test_cyclic_lr_equals_pytorchs(name: str) -> None:
    """Every mode gives PyTorch's rates and momenta, float for float, and its state dict."""
    ours, schedule, opt = _cyclic(verigrad, name)
    theirs, tschedule, topt = _cyclic(torch, name)
    assert ours == theirs
    assert schedule.state_dict() == tschedule.state_dict()
    for ours_group, their_group in zip(opt.param_groups, topt.param_groups):
        assert {k: v for k, v in ours_group.items() if k != "params"} == {
            k: v for k, v in their_group.items() if k not in ("params", "decoupled_weight_decay")
        } | ({"decoupled_weight_decay": False} if "decoupled_weight_decay" in ours_group else {})


def test_cyclic_lr_resumes_from_its_state_dict() -> None:
    _first, schedule, opt = _cyclic(verigrad, "scale_fn iterations", steps=5)
    state, opt_state = schedule.state_dict(), opt.state_dict()
    assert state["_scale_fn_custom"] == {"base": 0.5}
    _, fresh, fresh_opt = _cyclic(verigrad, "scale_fn iterations", steps=0)
    fresh_opt.load_state_dict(opt_state)
    fresh.load_state_dict(state)
    rest, *_ = _cyclic(torch, "scale_fn iterations", steps=12)
    for lrs, _ in rest[5:]:
        assert fresh.get_last_lr() == lrs
        fresh_opt.step()
        fresh.step()


@pytest.mark.parametrize("lib", [torch, verigrad], ids=["torch", "verigrad"])
def test_cyclic_lr_refusals_are_pytorchs(lib) -> None:
    p = lib.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="mode is invalid and scale_fn is None"):
        lib.optim.lr_scheduler.CyclicLR(lib.optim.SGD([p], lr=0.1, momentum=0.9), 0.01, 0.1, mode="saw")
    with pytest.raises(ValueError, match="optimizer must support momentum or beta1"):
        lib.optim.lr_scheduler.CyclicLR(lib.optim.Adagrad([p]), 0.01, 0.1)


# linalg and init ----------------------------------------------------------------------------------

LSTSQ_CASES = {
    "tall": ((5, 3), (5, 2)),
    "tall rank-deficient": ((5, 3), (5, 2)),
    "wide": ((3, 5), (3, 2)),
    "batch": ((2, 6, 4), (2, 6, 3)),
}


# gels of a rank-deficient A is not a case: it assumes full rank (LAPACK's QR gives no meaningful answer)
LSTSQ_PAIRS = [
    (case, driver)
    for case in LSTSQ_CASES
    for driver in ["gels", "gelsy", "gelsd", "gelss", None]
    if not (driver == "gels" and "deficient" in case)
]


@pytest.mark.parametrize(("case", "driver"), LSTSQ_PAIRS)
def test_lstsq_drivers_return_pytorchs_results(case: str, driver: str | None) -> None:
    """Each driver's solution, residuals (tall and full rank: gels, gelsd, gelss), rank and singular
    values, in PyTorch's shapes."""
    sa, sb = LSTSQ_CASES[case]
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    if "deficient" in case:
        a[:, 2] = a[:, 0]
    ours = verigrad.linalg.lstsq(verigrad.tensor(a), verigrad.tensor(b), driver=driver)
    theirs = torch.linalg.lstsq(torch.tensor(a), torch.tensor(b), driver=driver)
    for name in ("solution", "residuals", "rank", "singular_values"):
        x, y = getattr(ours, name), getattr(theirs, name)
        assert tuple(x.shape) == tuple(y.shape), name
        assert x.dtype.name == {torch.float64: "f64", torch.int64: "i64"}[y.dtype], name
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-12, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("driver", ["gels", "gelsd", "gelss"])
def test_lstsq_solution_gradients_equal_pytorchs(driver: str) -> None:
    from gradients import check_values_and_gradients

    rng = np.random.default_rng(2)
    arrays = {"a": rng.standard_normal((6, 3)), "b": rng.standard_normal((6, 2))}
    check_values_and_gradients(
        arrays,
        lambda a, b: verigrad.linalg.lstsq(a, b, driver=driver).solution,
        lambda a, b: torch.linalg.lstsq(a, b, driver=driver).solution,
    )


def _symmetric(rng, n: int) -> np.ndarray:
    s = rng.standard_normal((n, n))
    return s + s.T


@pytest.mark.parametrize(
    "make",
    [
        lambda rng: _symmetric(rng, 4),
        lambda rng: rng.standard_normal((4, 4)),  # not symmetric: only the lower triangle is read
        lambda rng: np.stack([_symmetric(rng, 3), np.diag([2.0, 0.0, -1.0])]),  # a zero eigenvalue dropped
    ],
    ids=["symmetric", "lower triangle", "batch singular"],
)
def test_pinv_hermitian_equals_pytorchs(make) -> None:
    from gradients import check_values_and_gradients

    a = make(np.random.default_rng(4))
    np.testing.assert_allclose(
        verigrad.linalg.pinv(verigrad.tensor(a), hermitian=True).numpy(),
        torch.linalg.pinv(torch.tensor(a), hermitian=True).numpy(),
        rtol=1e-12,
        atol=1e-12,
    )
    if a.ndim == 2:  # the gradient where it is defined (PyTorch's eigh: of a symmetric input)
        check_values_and_gradients(
            {"a": a},
            lambda a: verigrad.linalg.pinv((a + a.mT) / 2, hermitian=True),
            lambda a: torch.linalg.pinv((a + a.mT) / 2, hermitian=True),
        )


@pytest.mark.parametrize(
    ("shape", "groups"), [((4, 2, 3), 1), ((6, 3, 3, 3), 3), ((4, 4, 2, 3, 5), 2), ((2, 5, 4, 4), 1)]
)
def test_dirac_equals_pytorchs(shape, groups) -> None:
    ours = verigrad.nn.init.dirac_(verigrad.empty(*shape, dtype=verigrad.float64), groups)
    theirs = torch.nn.init.dirac_(torch.empty(*shape, dtype=torch.float64), groups)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    conv = verigrad.nn.Conv2d(3, 3, 3, padding=1, bias=False)
    verigrad.nn.init.dirac_(conv.weight)
    x = verigrad.randn(1, 3, 5, 5)
    np.testing.assert_array_equal(conv(x).detach().numpy(), x.numpy())  # the identity convolution


@pytest.mark.parametrize("lib", [torch, verigrad], ids=["torch", "verigrad"])
def test_dirac_and_lstsq_refusals_are_pytorchs(lib) -> None:
    with pytest.raises(ValueError, match="Only tensors with 3, 4, or 5 dimensions"):
        lib.nn.init.dirac_(lib.empty(3, 3))
    with pytest.raises(ValueError, match="dim 0 must be divisible by groups"):
        lib.nn.init.dirac_(lib.empty(3, 3, 3), groups=2)
    with pytest.raises(RuntimeError, match="parameter `driver` should be one of"):
        lib.linalg.lstsq(lib.eye(2), lib.eye(2), driver="qr")


# packed sequences ---------------------------------------------------------------------------------


def _close(ours, theirs, tol: float = 1e-12) -> None:
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize(("lengths", "enforce_sorted"), [([5, 3, 3, 1], True), ([3, 5, 1, 3], False)])
def test_packing_round_trip_equals_pytorchs(lengths, enforce_sorted, batch_first) -> None:
    from torch.nn.utils import rnn as theirs_rnn

    from verigrad.nn.utils import rnn as ours_rnn

    x = np.random.default_rng(1).standard_normal((4, 5, 2) if batch_first else (5, 4, 2))
    ours = ours_rnn.pack_padded_sequence(verigrad.tensor(x), lengths, batch_first, enforce_sorted)
    theirs = theirs_rnn.pack_padded_sequence(
        torch.tensor(x), torch.tensor(lengths), batch_first, enforce_sorted
    )
    _close(ours.data, theirs.data)
    for name in ("batch_sizes", "sorted_indices", "unsorted_indices"):
        a, b = getattr(ours, name), getattr(theirs, name)
        assert (a is None) == (b is None) and (a is None or a.tolist() == b.tolist()), name
    (padded, lens), (tpadded, tlens) = (
        ours_rnn.pad_packed_sequence(ours, batch_first, padding_value=-1.5, total_length=7),
        theirs_rnn.pad_packed_sequence(theirs, batch_first, padding_value=-1.5, total_length=7),
    )
    _close(padded, tpadded)
    assert lens.tolist() == tlens.tolist() and lens.dtype.name == "i64"
    seqs = [x[:n, b] if not batch_first else x[b, :n] for b, n in enumerate(lengths)]
    packed = ours_rnn.pack_sequence([verigrad.tensor(s) for s in seqs], enforce_sorted=enforce_sorted)
    tpacked = theirs_rnn.pack_sequence([torch.tensor(s) for s in seqs], enforce_sorted=enforce_sorted)
    _close(packed.data, tpacked.data)
    for a, b in zip(ours_rnn.unpack_sequence(packed), theirs_rnn.unpack_sequence(tpacked)):
        _close(a, b)
    for a, b in zip(ours_rnn.unpad_sequence(padded, lens, batch_first),
                    theirs_rnn.unpad_sequence(tpadded, tlens, batch_first)):  # fmt: skip
        _close(a, b)


RECURRENT = {
    "LSTM 2 layers bidirectional": ("LSTM", {"num_layers": 2, "bidirectional": True}),
    "LSTM proj_size": ("LSTM", {"proj_size": 2}),
    "GRU bidirectional": ("GRU", {"bidirectional": True}),
    "GRU batch_first": ("GRU", {"batch_first": True}),
    "RNN relu 2 layers": ("RNN", {"nonlinearity": "relu", "num_layers": 2}),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("name", RECURRENT)
def test_recurrent_layers_take_packed_sequences_as_pytorchs(name: str, with_state: bool, dtype: str) -> None:
    """Outputs (packed as the input), final states in the batch's order, and the gradients of the input,
    the initial state and the weights."""
    cls, kwargs = RECURRENT[name]
    tol = 1e-12 if dtype == "float64" else 1e-6
    theirs_layer = getattr(torch.nn, cls)(3, 4, dtype=getattr(torch, dtype), **kwargs)
    ours_layer = getattr(verigrad.nn, cls)(3, 4, dtype=getattr(verigrad, dtype), **kwargs)
    ours_layer.load_state_dict(
        {k: verigrad.tensor(v.detach().numpy()) for k, v in theirs_layer.state_dict().items()}
    )
    rng = np.random.default_rng(6)
    x = rng.standard_normal((6, 4, 3)).astype(dtype)
    lengths = [4, 6, 1, 4]
    layers = kwargs.get("num_layers", 1) * (2 if kwargs.get("bidirectional") else 1)
    sizes = [kwargs.get("proj_size") or 4] + ([4] if cls == "LSTM" else [])
    states = [rng.standard_normal((layers, 4, n)).astype(dtype) for n in sizes]

    def run(lib, layer):
        leaves = [lib.tensor(a, requires_grad=True) for a in [x, *states]]
        packed = lib.nn.utils.rnn.pack_padded_sequence(leaves[0], lengths, enforce_sorted=False)
        hx = None if not with_state else (tuple(leaves[1:]) if cls == "LSTM" else leaves[1])
        out, final = layer(packed, hx)
        final = final if isinstance(final, tuple) else (final,)
        weights = rng_cotangent(out.data.shape)
        loss = (out.data * lib.tensor(weights)).sum() + sum((f * f).sum() for f in final)
        loss.backward()
        return out, final, leaves

    def rng_cotangent(shape):
        return np.random.default_rng(9).standard_normal(tuple(shape)).astype(dtype)

    out, final, leaves = run(verigrad, ours_layer)
    tout, tfinal, tleaves = run(torch, theirs_layer)
    _close(out.data, tout.data, tol)
    assert out.batch_sizes.tolist() == tout.batch_sizes.tolist()
    assert out.unsorted_indices.tolist() == tout.unsorted_indices.tolist()
    for a, b in zip(final, tfinal):
        _close(a, b, tol)
    for a, b in zip(leaves if with_state else leaves[:1], tleaves):
        _close(a.grad, b.grad, tol)
    for key, p in theirs_layer.named_parameters():
        _close(dict(ours_layer.named_parameters())[key].grad, p.grad, tol)


@pytest.mark.parametrize("lib", [torch, verigrad], ids=["torch", "verigrad"])
def test_packing_refusals_are_pytorchs(lib) -> None:
    rnn = lib.nn.utils.rnn
    x = lib.zeros(4, 3, 2)
    with pytest.raises(
        RuntimeError, match="must be sorted in decreasing order when `enforce_sorted` is True"
    ):
        rnn.pack_padded_sequence(x, [2, 4, 2])
    with pytest.raises(RuntimeError, match="Length of all samples has to be greater than 0"):
        rnn.pack_padded_sequence(x, [2, 0, 2], enforce_sorted=False)
    packed = rnn.pack_padded_sequence(x, [4, 2, 2])
    with pytest.raises(ValueError, match="Expected total_length to be at least"):
        rnn.pad_packed_sequence(packed, total_length=2)


# MultiheadAttention -------------------------------------------------------------------------------

ATTENTION = {
    "kdim vdim": {"kdim": 5, "vdim": 3},
    "kdim vdim batch_first": {"kdim": 5, "vdim": 3, "batch_first": True},
    "kdim no bias": {"kdim": 5, "bias": False},
    "add_bias_kv": {"add_bias_kv": True},
    "add_zero_attn": {"add_zero_attn": True},
    "everything": {"kdim": 5, "vdim": 3, "add_bias_kv": True, "add_zero_attn": True},
}


@pytest.mark.parametrize("masks", ["none", "bool", "float"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", ATTENTION)
def test_multihead_attention_options_equal_pytorchs(name: str, dtype: str, masks: str) -> None:
    kwargs = ATTENTION[name]
    tol = 1e-12 if dtype == "float64" else 1e-6
    theirs = torch.nn.MultiheadAttention(8, 2, dtype=getattr(torch, dtype), **kwargs)
    ours = verigrad.nn.MultiheadAttention(8, 2, dtype=getattr(verigrad, dtype), **kwargs)
    assert [k for k, _ in ours.named_parameters()] == [k for k, _ in theirs.named_parameters()]
    ours.load_state_dict({k: verigrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    rng = np.random.default_rng(8)
    first = kwargs.get("batch_first", False)
    shape = (lambda n, w: (2, n, w)) if first else (lambda n, w: (n, 2, w))
    arrays = [rng.standard_normal(shape(4, 8)), rng.standard_normal(shape(6, kwargs.get("kdim", 8))),
              rng.standard_normal(shape(6, kwargs.get("vdim", 8)))]  # fmt: skip
    arrays = [a.astype(dtype) for a in arrays]
    padding = np.array([[False] * 5 + [True], [False] * 6])
    attn = rng.standard_normal((4, 6)).astype(dtype)

    def run(lib, layer):
        leaves = [lib.tensor(a, requires_grad=True) for a in arrays]
        extra = {}
        if masks == "bool":
            extra = {"key_padding_mask": lib.tensor(padding), "attn_mask": lib.tensor(attn > 1.0)}
        elif masks == "float":
            extra = {"attn_mask": lib.tensor(np.repeat(attn[None], 4, 0))}  # [N * heads, L, S]
        out, weights = layer(*leaves, average_attn_weights=False, **extra)
        (
            out * lib.tensor(np.linspace(-1, 1, out.numel()).reshape(tuple(out.shape)).astype(dtype))
        ).sum().backward()
        return out, weights, leaves

    out, weights, leaves = run(verigrad, ours)
    tout, tweights, tleaves = run(torch, theirs)
    _close(out, tout, tol)
    _close(weights, tweights, tol)
    for a, b in zip(leaves, tleaves):
        _close(a.grad, b.grad, tol)
    ours_params = dict(ours.named_parameters())
    for key, p in theirs.named_parameters():
        _close(ours_params[key].grad, p.grad, tol)


def test_multihead_attention_kdim_unbatched_equals_pytorchs() -> None:
    theirs = torch.nn.MultiheadAttention(6, 3, kdim=4, vdim=2, dtype=torch.float64)
    ours = verigrad.nn.MultiheadAttention(6, 3, kdim=4, vdim=2, dtype=verigrad.float64)
    ours.load_state_dict({k: verigrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((3, 6)), rng.standard_normal((5, 4)), rng.standard_normal((5, 2))
    mask = np.array([False, True, False, False, False])
    out, w = ours(
        verigrad.tensor(q), verigrad.tensor(k), verigrad.tensor(v), key_padding_mask=verigrad.tensor(mask)
    )
    tout, tw = theirs(torch.tensor(q), torch.tensor(k), torch.tensor(v), key_padding_mask=torch.tensor(mask))
    _close(out, tout)
    _close(w, tw)


# AdaptiveLogSoftmaxWithLoss and LinearCrossEntropyLoss --------------------------------------------


def _copy_weights(ours, theirs) -> None:
    ours.load_state_dict({k: verigrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(
    ("cutoffs", "kwargs", "targets"),
    [
        ([4, 10], {}, [0, 15, 5, 3, 19, 9, 11]),
        ([2, 6, 12], {"div_value": 2.0, "head_bias": True}, [1, 1, 7, 13, 2, 0, 19]),
        ([5], {}, [0, 1, 2, 3, 4, 0, 1]),  # every target in the shortlist
    ],
)
def test_adaptive_log_softmax_equals_pytorchs(cutoffs, kwargs, targets, dtype: str) -> None:
    tol = 1e-12 if dtype == "float64" else 1e-6
    theirs = torch.nn.AdaptiveLogSoftmaxWithLoss(16, 20, cutoffs, dtype=getattr(torch, dtype), **kwargs)
    ours = verigrad.nn.AdaptiveLogSoftmaxWithLoss(16, 20, cutoffs, dtype=getattr(verigrad, dtype), **kwargs)
    assert repr(ours) == repr(theirs)
    _copy_weights(ours, theirs)
    x = np.random.default_rng(0).standard_normal((7, 16)).astype(dtype)
    vx, tx = verigrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, loss = ours(vx, verigrad.tensor(targets))
    tout, tloss = theirs(tx, torch.tensor(targets))
    _close(out, tout, tol)
    _close(loss, tloss, tol)
    loss.backward()
    tloss.backward()
    _close(vx.grad, tx.grad, tol)
    ours_params = dict(ours.named_parameters())
    for key, p in theirs.named_parameters():
        if p.grad is not None:
            _close(ours_params[key].grad, p.grad, tol)
    _close(ours.log_prob(verigrad.tensor(x)), theirs.log_prob(torch.tensor(x)), tol)
    assert ours.predict(verigrad.tensor(x)).tolist() == theirs.predict(torch.tensor(x)).tolist()
    single, tsingle = (
        ours(verigrad.tensor(x[0]), verigrad.tensor(targets[0])),
        theirs(torch.tensor(x[0]), torch.tensor(targets[0])),
    )
    _close(single.output, tsingle.output, tol)


@pytest.mark.parametrize("lib", [torch, verigrad], ids=["torch", "verigrad"])
def test_adaptive_log_softmax_refusals_are_pytorchs(lib) -> None:
    with pytest.raises(ValueError, match="cutoffs should be a sequence of unique, positive integers"):
        lib.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [5, 3])
    asm = lib.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [5])
    with pytest.raises(RuntimeError, match=r"Target values should be in \[0, 9\]"):
        asm(lib.zeros(2, 8), lib.tensor([1, 10]))
    with pytest.raises(RuntimeError, match="1D target tensor expects 2D input tensors"):
        asm(lib.zeros(2, 2, 8), lib.tensor([1, 2]))


LCE = {
    "plain": ({}, {}),
    "bias, K-dim": ({"out_features": (3,), "bias": True}, {}),
    "options of the loss": ({"reduction": "sum", "label_smoothing": 0.1, "ignore_index": 2}, {}),
    "class weights, none": ({"reduction": "none"}, {"weight": True}),
    "probabilities": ({}, {"probabilities": True}),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", LCE)
def test_linear_cross_entropy_loss_equals_pytorchs(name: str, dtype: str) -> None:
    kwargs, extra = LCE[name]
    tol = 1e-12 if dtype == "float64" else 1e-6
    rng = np.random.default_rng(1)
    if extra.get("weight"):
        kwargs = {**kwargs, "weight": rng.uniform(0.5, 2, 5).astype(dtype)}
    k = kwargs.get("out_features", ())
    x = rng.standard_normal((6, 4)).astype(dtype)
    if extra.get("probabilities"):
        target = rng.dirichlet(np.ones(5), size=6).astype(dtype)
    else:
        target = rng.integers(0, 5, (6, *k))

    def run(lib):
        made = {**kwargs, "weight": lib.tensor(kwargs["weight"])} if "weight" in kwargs else kwargs
        return lib.nn.LinearCrossEntropyLoss(4, 5, dtype=getattr(lib, dtype), **made)

    ours, theirs = run(verigrad), run(torch)
    _copy_weights(ours, theirs)
    vx, tx = verigrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    loss, tloss = ours(vx, verigrad.tensor(target)), theirs(tx, torch.tensor(target))
    _close(loss, tloss, tol)
    loss.sum().backward()
    tloss.sum().backward()
    _close(vx.grad, tx.grad, tol)
    _close(ours.linear.weight.grad, theirs.linear.weight.grad, tol)
    functional = verigrad.nn.functional.linear_cross_entropy(
        verigrad.tensor(x), ours.linear.weight.detach().reshape(5, *k, 4), verigrad.tensor(target),
        linear_bias=None if ours.linear.bias is None else ours.linear.bias.detach().reshape(5, *k),
        reduction="none",
    )  # fmt: skip
    tfunctional = torch.nn.functional.linear_cross_entropy(
        torch.tensor(x), theirs.linear.weight.detach().reshape(5, *k, 4), torch.tensor(target),
        linear_bias=None if theirs.linear.bias is None else theirs.linear.bias.detach().reshape(5, *k),
        reduction="none",
    )  # fmt: skip
    _close(functional, tfunctional, tol)


# the legacy empty cat -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shapes", "dtypes", "dim"),
    [
        ([(0,), (2, 3)], ["float64", "float32"], 0),  # skipped, but its dtype counts
        ([(2, 3), (0,), (1, 3)], ["float32", "float32", "float32"], 0),
        ([(2, 3), (0,)], ["float32", "float32"], -1),
        ([(0,), (0,)], ["float32", "float64"], 0),  # all skipped: the empty result
        ([(0,), (3,)], ["int64", "int32"], 0),  # 1-D with 1-D: joined as ever
        ([(2, 0), (2, 3)], ["float32", "float32"], 1),  # (2, 0) is not the legacy shape
    ],
)
@pytest.mark.parametrize("name", ["cat", "concatenate"])
def test_cat_skips_legacy_empty_tensors_as_pytorchs(shapes, dtypes, dim, name: str) -> None:
    arrays = [np.arange(int(np.prod(s))).reshape(s).astype(d) for s, d in zip(shapes, dtypes)]
    ours = getattr(verigrad, name)([verigrad.tensor(a) for a in arrays], dim=dim)
    theirs = getattr(torch, name)([torch.tensor(a) for a in arrays], dim=dim)
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert ours.dtype.name == {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64"}[theirs.dtype]
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_cat_with_a_legacy_empty_tensor_differentiates_as_pytorchs() -> None:
    x = np.random.default_rng(0).standard_normal((2, 3))
    ours, theirs = verigrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    (verigrad.cat([verigrad.zeros(0), ours, ours]) ** 2).sum().backward()
    (torch.cat([torch.zeros(0), theirs, theirs]) ** 2).sum().backward()
    _close(ours.grad, theirs.grad)
    with pytest.raises(verigrad.AxisError, match="axis 2 is out of range for 2 dimensions"):
        verigrad.cat([verigrad.zeros(0), verigrad.ones(2, 3)], dim=2)


def _chained(lib, steps: int = 12):
    a, b = lib.zeros(2, requires_grad=True), lib.zeros(3, requires_grad=True)
    opt = lib.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1)
    s = lib.optim.lr_scheduler
    chained = s.ChainedScheduler(
        [s.ConstantLR(opt, factor=0.25, total_iters=4), s.ExponentialLR(opt, gamma=0.9),
         s.MultiStepLR(opt, milestones=[3, 7], gamma=0.5)]
    )  # fmt: skip
    seen = []
    for _ in range(steps):
        seen.append(chained.get_last_lr())
        opt.step()
        chained.step()
    return seen, chained


def test_chained_scheduler_equals_pytorchs() -> None:
    ours, chained = _chained(verigrad)
    theirs, tchained = _chained(torch)
    assert ours == theirs
    state, tstate = chained.state_dict(), tchained.state_dict()
    assert state["_last_lr"] == tstate["_last_lr"] and len(state["_schedulers"]) == 3
    with pytest.raises(ValueError, match="expects at least one scheduler"):
        verigrad.optim.lr_scheduler.ChainedScheduler([])


# nn.utils ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.5, float("inf")])
def test_get_total_norm_and_clip_grads_with_norm_equal_pytorchs(norm_type: float) -> None:
    rng = np.random.default_rng(3)
    grads = [rng.standard_normal((3, 4)), rng.standard_normal(5)]

    def run(lib):
        params = [lib.zeros(g.shape, dtype=lib.float64, requires_grad=True) for g in grads]
        for p, g in zip(params, grads):
            p.grad = lib.tensor(g)
        total = lib.nn.utils.get_total_norm([p.grad for p in params], norm_type, foreach=False)
        lib.nn.utils.clip_grads_with_norm_(params, 0.5, total, foreach=None)
        clipped = lib.nn.utils.clip_grad_norm_(params, 0.25, norm_type, foreach=False)
        lib.nn.utils.clip_grad_value_(params, 0.05, foreach=None)
        return total, clipped, [p.grad for p in params]

    (total, clipped, ours), (ttotal, tclipped, theirs) = run(verigrad), run(torch)
    _close(total, ttotal)
    _close(clipped, tclipped)
    for a, b in zip(ours, theirs):
        _close(a, b)


def test_skip_init_makes_the_module() -> None:
    ours = verigrad.nn.utils.skip_init(verigrad.nn.Conv1d, 2, 3, 3)
    theirs = torch.nn.utils.skip_init(torch.nn.Conv1d, 2, 3, 3)
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == {
        k: tuple(v.shape) for k, v in theirs.state_dict().items()
    }


# dropout of channels ------------------------------------------------------------------------------

CHANNEL_DROPOUT = {
    "dropout1d": ("Dropout1d", (8, 16, 5)),
    "dropout3d": ("Dropout3d", (4, 16, 2, 3, 2)),
    "feature_alpha_dropout": ("FeatureAlphaDropout", (8, 16, 3, 2)),
    "alpha_dropout": ("AlphaDropout", (8, 16, 3)),
}


@pytest.mark.parametrize("name", CHANNEL_DROPOUT)
def test_channel_dropouts_take_pytorchs_values(name: str) -> None:
    """The draws are verigrad's own (its generator), but what a kept and a dropped unit become, which
    units share a draw, and the identity in eval mode are PyTorch's."""
    module, shape = CHANNEL_DROPOUT[name]
    x = np.full(shape, 0.75, np.float32)

    def run(lib):
        lib.manual_seed(0)
        layer = getattr(lib.nn, module)(0.4)
        assert np.array_equal(layer.eval()(lib.tensor(x)).numpy(), x)
        out = getattr(lib.nn.functional, name)(lib.tensor(x), 0.4, training=True).numpy()
        return out, layer

    (ours, layer), (theirs, tlayer) = run(verigrad), run(torch)
    assert repr(layer) == repr(tlayer)
    np.testing.assert_allclose(np.unique(ours), np.unique(theirs), rtol=1e-6)
    if name != "alpha_dropout":  # one draw per channel: every element of a channel alike
        for out in (ours, theirs):
            flat = out.reshape(*shape[:2], -1)
            assert (flat == flat[..., :1]).all()


@pytest.mark.parametrize("lib", [torch, verigrad], ids=["torch", "verigrad"])
def test_channel_dropout_rank_checks(lib) -> None:
    with pytest.raises(RuntimeError, match="dropout1d: Expected 2D or 3D input, but received a 4D input"):
        lib.nn.functional.dropout1d(lib.ones(2, 3, 4, 5), 0.5)
    with pytest.warns(UserWarning, match="Received a 3-D input to dropout3d, which is deprecated"):
        lib.nn.functional.dropout3d(lib.ones(2, 3, 4), 0.5)


@pytest.mark.parametrize("shape", [(6, 8, 5), (6, 8), (6, 8, 2, 3)])
@pytest.mark.parametrize("name", ["dropout1d", "dropout2d", "dropout3d"])
def test_channel_dropout_draws_per_pytorchs_channels(name: str, shape: tuple) -> None:
    """Which elements share a draw, for every rank each takes (a 3-D input to dropout2d is [N, C, L], as
    PyTorch's; an unbatched one has its channels on axis 0)."""
    if name == "dropout1d" and len(shape) == 4:
        return

    def groups(lib) -> set:
        lib.manual_seed(1)
        x = lib.tensor(np.arange(1, np.prod(shape) + 1, dtype=np.float32).reshape(shape))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kept = getattr(lib.nn.functional, name)(x, 0.5, training=True).numpy() != 0
        # the axes over which every element shares its draw: where kept is constant
        return {a for a in range(len(shape)) if (kept == kept.take([0], axis=a)).all() and shape[a] > 1}

    assert groups(verigrad) == groups(torch)


# pdist, channel_shuffle, gumbel_softmax, RNNBase -------------------------------------------------


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, 0.5, float("inf"), 0.0])
def test_pdist_equals_pytorchs(p: float) -> None:
    """Values and gradients, two equal rows included (distance 0: gradient 0, as PyTorch's)."""
    from gradients import check_values_and_gradients

    x = np.random.default_rng(0).standard_normal((5, 3))
    x[3] = x[1]
    check_values_and_gradients(
        {"x": x}, lambda x: verigrad.nn.functional.pdist(x, p), lambda x: torch.nn.functional.pdist(x, p)
    )


@pytest.mark.parametrize(("shape", "groups"), [((2, 6, 3), 3), ((1, 8, 2, 2), 2), ((2, 4, 1, 2, 3), 4)])
def test_channel_shuffle_equals_pytorchs(shape, groups) -> None:
    x = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    ours = verigrad.nn.ChannelShuffle(groups)
    theirs = torch.nn.ChannelShuffle(groups)
    assert repr(ours) == repr(theirs)
    np.testing.assert_array_equal(ours(verigrad.tensor(x)).numpy(), theirs(torch.tensor(x)).numpy())


@pytest.mark.parametrize("lib", [torch, verigrad], ids=["torch", "verigrad"])
def test_channel_shuffle_refusals_and_rnn_bases_are_pytorchs(lib) -> None:
    with pytest.raises(RuntimeError, match="Number of channels must be divisible by groups"):
        lib.nn.functional.channel_shuffle(lib.ones(2, 3, 4), 2)
    with pytest.raises(RuntimeError, match="channel_shuffle expects input with > 2 dims"):
        lib.nn.functional.channel_shuffle(lib.ones(1, 6), 3)
    assert isinstance(lib.nn.GRU(2, 3), lib.nn.RNNBase)
    assert isinstance(lib.nn.LSTMCell(2, 3), lib.nn.RNNCellBase)
    assert not isinstance(lib.nn.LSTMCell(2, 3), lib.nn.RNNBase)


@pytest.mark.parametrize("hard", [False, True])
def test_gumbel_softmax_samples_as_pytorchs(hard: bool) -> None:
    """The noise is each library's own; the distribution of the sample's largest entry (the softmax of
    the logits, whatever tau), the rows summing to 1, hard samples one-hot with the soft gradient."""
    logits = np.log(np.array([[0.2, 0.5, 0.3]]))
    counts = []
    for lib in (verigrad, torch):
        lib.manual_seed(0)
        x = lib.tensor(np.repeat(logits, 20000, 0), requires_grad=True)
        y = lib.nn.functional.gumbel_softmax(x, tau=0.7, hard=hard)
        np.testing.assert_allclose(y.detach().numpy().sum(-1), 1.0, rtol=1e-12)
        if hard:
            assert set(np.unique(y.detach().numpy())) == {0.0, 1.0}
        (y * lib.tensor(np.array([1.0, 2.0, 3.0]))).sum().backward()
        assert np.isfinite(x.grad.numpy()).all() and np.abs(x.grad.numpy()).max() > 0
        counts.append(np.bincount(y.detach().numpy().argmax(-1), minlength=3) / 20000)
    np.testing.assert_allclose(counts[0], [0.2, 0.5, 0.3], atol=0.015)
    np.testing.assert_allclose(counts[0], counts[1], atol=0.02)


# spectral_norm ------------------------------------------------------------------------------------

SPECTRAL = {
    "Linear": (lambda lib: lib.nn.Linear(5, 4, dtype=lib.float64), (3, 5), {}),
    "Conv2d, 2 iterations": (
        lambda lib: lib.nn.Conv2d(2, 3, 3, dtype=lib.float64),
        (1, 2, 5, 5),
        {"n_power_iterations": 2},
    ),
    "ConvTranspose2d (dim 1)": (
        lambda lib: lib.nn.ConvTranspose2d(2, 3, 2, dtype=lib.float64),
        (1, 2, 3, 3),
        {},
    ),
}


@pytest.mark.parametrize("name", SPECTRAL)
def test_spectral_norm_equals_pytorchs(name: str) -> None:
    """From the same u, v and weights: each training forward's power iteration (u, v written in place),
    outputs and gradients; eval forwards without iteration; remove_spectral_norm's weight."""
    make, shape, kwargs = SPECTRAL[name]
    theirs = torch.nn.utils.spectral_norm(make(torch), **kwargs)
    ours = verigrad.nn.utils.spectral_norm(make(verigrad), **kwargs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _copy_weights(ours, theirs)
    rng = np.random.default_rng(2)
    for step in range(4):
        if step == 3:
            ours.eval()
            theirs.eval()
        x = rng.standard_normal(shape)
        out, tout = ours(verigrad.tensor(x)), theirs(torch.tensor(x))
        _close(out, tout)
        (out * out).sum().backward()
        (tout * tout).sum().backward()
        _close(ours.weight_orig.grad, theirs.weight_orig.grad)
        _close(ours.weight_u, theirs.weight_u)
        _close(ours.weight_v, theirs.weight_v)
    verigrad.nn.utils.remove_spectral_norm(ours)
    torch.nn.utils.remove_spectral_norm(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _close(ours.weight, theirs.weight)


# swa_utils ---------------------------------------------------------------------------------------


def _swa_run(lib, make_average, use_buffers: bool):
    lib.manual_seed(0)
    model = lib.nn.Sequential(lib.nn.Linear(3, 4, bias=True), lib.nn.BatchNorm1d(4))
    model = model.double()
    average = lib.optim.swa_utils.AveragedModel(model, use_buffers=use_buffers, **make_average(lib))
    rng = np.random.default_rng(4)
    states = []
    for _ in range(4):
        with lib.no_grad():
            for p in model.parameters():
                p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape))))
        model(lib.tensor(rng.standard_normal((5, 3))))  # moves the batch-norm statistics
        average.update_parameters(model)
        states.append({k: v.detach().numpy().copy() for k, v in average.state_dict().items()})
    loader = [lib.tensor(rng.standard_normal((6, 3))) for _ in range(3)]
    lib.optim.swa_utils.update_bn(loader, average)
    states.append({k: v.detach().numpy().copy() for k, v in average.state_dict().items()})
    return states


AVERAGES = {
    "swa": lambda lib: {},
    "ema avg_fn": lambda lib: {"avg_fn": lib.optim.swa_utils.get_ema_avg_fn(0.9)},
    "ema multi_avg_fn": lambda lib: {"multi_avg_fn": lib.optim.swa_utils.get_ema_multi_avg_fn(0.9)},
    "swa multi_avg_fn": lambda lib: {"multi_avg_fn": lib.optim.swa_utils.get_swa_multi_avg_fn()},
}


@pytest.mark.parametrize("use_buffers", [False, True])
@pytest.mark.parametrize("name", AVERAGES)
def test_averaged_model_and_update_bn_equal_pytorchs(name: str, use_buffers: bool) -> None:
    if name == "swa multi_avg_fn" and use_buffers:  # PyTorch's addcdiv refuses the integer count buffer
        for lib in (verigrad, torch):
            with pytest.raises(RuntimeError, match="Integer division with addcdiv is no longer supported"):
                _swa_run(lib, AVERAGES[name], use_buffers)
        return
    ours = _swa_run(verigrad, AVERAGES[name], use_buffers)
    theirs = _swa_run(torch, AVERAGES[name], use_buffers)
    for a, b in zip(ours, theirs):
        assert list(a) == list(b)
        for key in a:
            np.testing.assert_allclose(a[key], b[key], rtol=1e-12, atol=1e-12, err_msg=key)


@pytest.mark.parametrize(("anneal_epochs", "strategy"), [(3, "cos"), (4, "linear"), (0, "cos")])
def test_swalr_equals_pytorchs(anneal_epochs: int, strategy: str) -> None:
    def run(lib):
        p = lib.zeros(2, requires_grad=True)
        opt = lib.optim.SGD(
            [{"params": [p]}, {"params": [lib.zeros(1, requires_grad=True)], "lr": 0.3}], lr=0.1
        )
        schedule = lib.optim.swa_utils.SWALR(opt, swa_lr=[0.05, 0.01], anneal_epochs=anneal_epochs,
                                              anneal_strategy=strategy)  # fmt: skip
        seen = []
        for _ in range(7):
            seen.append(schedule.get_last_lr())
            opt.step()
            schedule.step()
        return seen

    np.testing.assert_allclose(run(verigrad), run(torch), rtol=1e-15)


# fusion ------------------------------------------------------------------------------------------

FUSIONS = {
    "conv": (lambda lib: lib.nn.Conv2d(2, 3, 3, dtype=lib.float64), 3, (2, 2, 5, 5), False),
    "conv without bias": (
        lambda lib: lib.nn.Conv1d(2, 4, 2, bias=False, dtype=lib.float64),
        4,
        (2, 2, 6),
        False,
    ),
    "transposed conv": (
        lambda lib: lib.nn.ConvTranspose2d(2, 3, 2, dtype=lib.float64),
        3,
        (1, 2, 3, 3),
        True,
    ),
    "linear": (lambda lib: lib.nn.Linear(5, 3, dtype=lib.float64), 3, (4, 5), None),
}


@pytest.mark.parametrize("name", FUSIONS)
def test_fuse_with_batch_norm_equals_pytorchs(name: str) -> None:
    make, channels, shape, transpose = FUSIONS[name]
    rng = np.random.default_rng(7)
    stats = {
        "weight": rng.uniform(0.5, 2, channels), "bias": rng.standard_normal(channels),
        "running_mean": rng.standard_normal(channels), "running_var": rng.uniform(0.5, 2, channels),
    }  # fmt: skip

    def run(lib):
        layer = make(lib).eval()
        norm = (lib.nn.BatchNorm1d if len(shape) < 4 else lib.nn.BatchNorm2d)(
            channels, dtype=lib.float64
        ).eval()
        with lib.no_grad():
            for key, value in stats.items():
                getattr(norm, key).copy_(lib.tensor(value))
        return layer, norm

    (ours, ours_bn), (theirs, theirs_bn) = run(verigrad), run(torch)
    _copy_weights(ours, theirs)
    utils, tutils = verigrad.nn.utils, torch.nn.utils
    if transpose is None:
        fused, tfused = (
            utils.fuse_linear_bn_eval(ours, ours_bn),
            tutils.fuse_linear_bn_eval(theirs, theirs_bn),
        )
    else:
        fused = utils.fuse_conv_bn_eval(ours, ours_bn, transpose)
        tfused = tutils.fuse_conv_bn_eval(theirs, theirs_bn, transpose)
    _close(fused.weight, tfused.weight)
    _close(fused.bias, tfused.bias)
    assert fused.weight.requires_grad and fused.weight is not ours.weight
    x = rng.standard_normal(shape)
    _close(fused(verigrad.tensor(x)), ours_bn(ours(verigrad.tensor(x))))
    with pytest.raises(AssertionError, match="Fusion only for eval!"):
        utils.fuse_conv_bn_eval(ours.train(), ours_bn)


@pytest.mark.parametrize(
    ("name", "args"),
    [("constant", (0.5,)), ("dirac", ()), ("xavier_uniform", ()), ("kaiming_normal", ()), ("orthogonal", ())],
)
def test_deprecated_init_names_warn_as_pytorchs(name: str, args: tuple) -> None:
    for lib in (verigrad, torch):
        with pytest.warns(
            FutureWarning, match=f"`nn.init.{name}` is now deprecated in favor of `nn.init.{name}_`"
        ):
            out = getattr(lib.nn.init, name)(lib.zeros(4, 2, 3), *args)
        assert tuple(out.shape) == (4, 2, 3)


# lp_pool -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("norm_type", [float("inf"), -float("inf"), 2.0, 1.5])
@pytest.mark.parametrize(("nd", "shape"), [(1, (2, 3, 7)), (2, (1, 2, 5, 4)), (3, (1, 2, 4, 5, 4))])
def test_lp_pool_equals_pytorchs(nd: int, shape: tuple, norm_type: float) -> None:
    """lp_pool3d is new; a norm_type of +-inf is the largest (smallest) magnitude, as PyTorch's (it was
    x ** inf: ones). Values and gradients, with ceil_mode and a stride."""
    from gradients import check_values_and_gradients

    x = np.abs(np.random.default_rng(nd).standard_normal(shape)) + 0.1  # positive: the powers are real

    def run(lib):
        return lambda x: getattr(lib.nn.functional, f"lp_pool{nd}d")(
            x, norm_type, 2, stride=1, ceil_mode=True
        )

    check_values_and_gradients({"x": x}, run(verigrad), run(torch))
    if nd == 3:
        assert repr(verigrad.nn.LPPool3d(norm_type, 2)) == repr(torch.nn.LPPool3d(norm_type, 2))


@pytest.mark.parametrize(
    ("name", "shape", "args"),
    [
        ("max_pool1d_with_indices", (1, 2, 7), (2,)),
        ("max_pool2d_with_indices", (1, 2, 5, 4), (2, 1)),
        ("max_pool3d_with_indices", (1, 1, 4, 4, 3), (2,)),
        ("adaptive_max_pool1d_with_indices", (1, 2, 7), (3,)),
        ("adaptive_max_pool2d_with_indices", (1, 2, 5, 4), ((2, 3),)),
        ("adaptive_max_pool3d_with_indices", (1, 1, 4, 4, 3), (2,)),
    ],
)
def test_pools_with_indices_equal_pytorchs(name: str, shape: tuple, args: tuple) -> None:
    x = np.random.default_rng(0).standard_normal(shape)
    (out, idx), (tout, tidx) = (
        getattr(lib.nn.functional, name)(lib.tensor(x), *args, return_indices=False)
        for lib in (verigrad, torch)
    )
    _close(out, tout)
    np.testing.assert_array_equal(idx.numpy(), tidx.numpy())
