"""nn.utils.parametrize and nn.utils.parametrizations against PyTorch: state dict keys, forward values,
the originals' gradients over SGD steps (training, then eval), removal, and PyTorch's state dicts."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch

import verigrad as vg

TOL = {"f32": 1e-6, "f64": 1e-12}
TORCH_DTYPE = {"f32": torch.float32, "f64": torch.float64}


def _state(module: torch.nn.Module) -> dict:
    return {k: vg.tensor(v.detach().numpy()) for k, v in module.state_dict().items()}


def _close(ours, theirs, tol: float) -> None:
    ours = ours.detach().numpy() if hasattr(ours, "detach") else np.asarray(ours)
    theirs = theirs.detach().numpy()
    np.testing.assert_allclose(ours, theirs, rtol=tol, atol=tol * max(1.0, float(np.abs(theirs).max())))


LAYERS = {
    "linear": (lambda nn: nn.Linear(4, 6), (5, 4)),
    "linear_square": (lambda nn: nn.Linear(5, 5), (3, 5)),
    "conv2d": (lambda nn: nn.Conv2d(2, 3, 3), (2, 2, 6, 6)),
    "conv2d_wide": (lambda nn: nn.Conv2d(2, 3, (2, 3)), (2, 2, 5, 5)),
}

PARAMETRIZATIONS = {
    "weight_norm": lambda P, m: P.weight_norm(m),
    "weight_norm_dim1": lambda P, m: P.weight_norm(m, dim=1),
    "weight_norm_none": lambda P, m: P.weight_norm(m, dim=None),
    "spectral_norm": lambda P, m: P.spectral_norm(m),
    "spectral_norm_3": lambda P, m: P.spectral_norm(m, n_power_iterations=3, eps=1e-10),
    "orthogonal": lambda P, m: P.orthogonal(m),
    "orthogonal_cayley": lambda P, m: P.orthogonal(m, orthogonal_map="cayley"),
    "orthogonal_householder": lambda P, m: P.orthogonal(m, orthogonal_map="householder"),
    "orthogonal_householder_plain": lambda P, m: P.orthogonal(
        m, orthogonal_map="householder", use_trivialization=False
    ),
    "orthogonal_cayley_plain": lambda P, m: P.orthogonal(
        m, orthogonal_map="cayley", use_trivialization=False
    ),
}


def _exact_matrix_exp(a: torch.Tensor) -> torch.Tensor:
    """exp(a) exact to rounding (Taylor of degree 18 after scaling to 1-norm <= 1), differentiable.
    PyTorch's CPU matrix_exp is off by up to ~2e-12 in f64 for small norms (its degree-4 and 8 paths,
    measured against mpmath in test_matrix_exp_is_exact), which SGD steps on orthogonal's original reach."""
    norm = float(a.detach().abs().sum(-2).max())
    s = max(0, math.ceil(math.log2(norm))) if norm > 0 else 0
    a = a / 2**s
    eye = torch.eye(a.shape[-1], dtype=a.dtype)
    result = eye + a / 18.0
    for j in range(17, 0, -1):
        result = eye + (a / j) @ result
    for _ in range(s):
        result = result @ result
    return result


@pytest.fixture
def exact_torch_matrix_exp(monkeypatch):
    monkeypatch.setattr(torch, "matrix_exp", _exact_matrix_exp)


def _pair(layer: str, dtype: str):
    make, shape = LAYERS[layer]
    torch.manual_seed(0)
    theirs = make(torch.nn).to(TORCH_DTYPE[dtype])
    ours = make(vg.nn).to(dtype)
    ours.load_state_dict(_state(theirs))
    x = np.random.default_rng(1).standard_normal(shape)
    return ours, theirs, x


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("layer", list(LAYERS))
@pytest.mark.parametrize("kind", list(PARAMETRIZATIONS))
def test_parametrization_trains_as_pytorch(kind, layer, dtype, exact_torch_matrix_exp):
    ours, theirs, x = _pair(layer, dtype)
    tol = TOL[dtype]
    PARAMETRIZATIONS[kind](torch.nn.utils.parametrizations, theirs)
    PARAMETRIZATIONS[kind](vg.nn.utils.parametrizations, ours)
    assert type(ours).__name__ == type(theirs).__name__
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert repr(ours) == repr(theirs)
    # the random state (spectral_norm's _u and _v, orthogonal's completed base) taken from PyTorch's
    assert ours.load_state_dict(_state(theirs)) is not None
    _close(ours.weight, theirs.weight, tol)

    opt_t = torch.optim.SGD(theirs.parameters(), lr=0.05)
    opt_v = vg.optim.SGD(ours.parameters(), lr=0.05)
    xt, xv = torch.tensor(x, dtype=TORCH_DTYPE[dtype]), vg.tensor(x).to(dtype)
    for step in range(4):
        if step == 3:  # eval: spectral_norm uses _u and _v as they are
            theirs.eval()
            ours.eval()
        opt_t.zero_grad()
        opt_v.zero_grad()
        yt, yv = theirs(xt), ours(xv)
        _close(yv, yt, tol)
        (yt * yt).mean().backward()
        (yv * yv).mean().backward()
        for (name, p), (name_v, q) in zip(theirs.named_parameters(), ours.named_parameters(), strict=True):
            assert name == name_v
            _close(q.grad, p.grad, tol)
        opt_t.step()
        opt_v.step()
    for (name, t), (name_v, v) in zip(theirs.state_dict().items(), ours.state_dict().items(), strict=True):
        assert name == name_v
        _close(v, t, tol)

    torch.nn.utils.parametrize.remove_parametrizations(theirs, "weight")
    vg.nn.utils.parametrize.remove_parametrizations(ours, "weight")
    assert type(ours) is (vg.nn.Linear if layer.startswith("linear") else vg.nn.Conv2d)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert not vg.nn.utils.parametrize.is_parametrized(ours)
    _close(ours.weight, theirs.weight, tol)
    _close(ours(xv), theirs(xt), tol)


@pytest.mark.parametrize("scale", [0.003, 0.03, 0.3, 1.0, 3.0])
def test_matrix_exp_is_exact(scale):
    """orthogonal's matrix_exp map: exp of a skew-symmetric matrix as close to the exact value (mpmath, 40
    digits) as PyTorch's, or within 4 ulp; PyTorch's is off by far more at the small norms."""
    from verigrad.nn.utils.parametrizations import _matrix_exp

    x = np.random.default_rng(0).standard_normal((2, 5, 5)) * scale
    a = np.tril(x) - np.swapaxes(np.tril(x), -1, -2)
    with mpmath.workdps(40):
        exact = np.array([np.array(mpmath.expm(mpmath.matrix(m.tolist())).tolist(), dtype=float) for m in a])
    ours = _matrix_exp(vg.tensor(a)).numpy()
    theirs = torch.linalg.matrix_exp(torch.tensor(a)).numpy()
    assert np.abs(ours - exact).max() <= max(np.abs(theirs - exact).max(), 4 * np.finfo(np.float64).eps)


def test_matrix_exp_gradient_as_pytorch():
    """Where PyTorch's matrix_exp is exact (norms past its degree-8 path), its gradient and ours agree."""
    from verigrad.nn.utils.parametrizations import _matrix_exp

    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 4, 4))
    a = np.tril(x) - np.swapaxes(np.tril(x), -1, -2)
    w = rng.standard_normal((3, 4, 4))
    at = torch.tensor(a, requires_grad=True)
    (torch.linalg.matrix_exp(at) * torch.tensor(w)).sum().backward()
    av = vg.tensor(a).requires_grad_(True)
    (_matrix_exp(av) * vg.tensor(w)).sum().backward()
    _close(av.grad, at.grad, 1e-12)


def test_spectral_norm_of_a_transposed_convolution_uses_dim_1():
    torch.manual_seed(0)
    theirs = torch.nn.ConvTranspose2d(3, 4, 3).double()
    ours = vg.nn.ConvTranspose2d(3, 4, 3).double()
    torch.nn.utils.parametrizations.spectral_norm(theirs)
    vg.nn.utils.parametrizations.spectral_norm(ours)
    assert tuple(ours.parametrizations.weight[0]._u.shape) == (4,)
    assert ours.parametrizations.weight[0].dim == 1
    ours.load_state_dict(_state(theirs))
    x = np.random.default_rng(0).standard_normal((1, 3, 4, 4))
    _close(ours(vg.tensor(x)), theirs(torch.tensor(x)), 1e-12)
    _close(ours.parametrizations.weight[0]._u, theirs.parametrizations.weight[0]._u, 1e-12)


class _Symmetric:
    """X -> the symmetric matrix of X's upper triangle; right_inverse: the upper triangle."""

    def __init__(self, nn):
        class Symmetric(nn.Module):
            calls = 0

            def forward(self, X):
                type(self).calls += 1
                return X.triu() + X.triu(1).transpose(-1, -2)

            def right_inverse(self, A):
                return A.triu()

        self.cls = Symmetric


class _Double:
    def __init__(self, nn):
        class Double(nn.Module):
            def forward(self, X):
                return X * 2

            def right_inverse(self, A):
                return A / 2

        self.cls = Double


@pytest.mark.parametrize("lib", [torch, vg])
def test_stacked_parametrizations_assignment_and_removal(lib):
    P = lib.nn.utils.parametrize
    torch.manual_seed(0)
    layer = lib.nn.Linear(3, 3).double()
    weight = np.random.default_rng(2).standard_normal((3, 3))
    with lib.no_grad():
        layer.weight.copy_(lib.tensor(weight))
    original = layer.weight
    P.register_parametrization(layer, "weight", _Symmetric(lib.nn).cls())
    P.register_parametrization(layer, "weight", _Double(lib.nn).cls())
    assert P.is_parametrized(layer) and P.is_parametrized(layer, "weight")
    assert not P.is_parametrized(layer, "bias")
    assert layer.parametrizations.weight.original is original  # the same tensor, set to right_inverse's
    np.testing.assert_allclose(layer.parametrizations.weight.original.detach().numpy(), np.triu(weight))
    sym = np.triu(weight) + np.triu(weight, 1).T
    np.testing.assert_allclose(layer.weight.detach().numpy(), 2 * sym)
    # assignment goes through the right inverses, last first
    target = np.arange(9.0).reshape(3, 3)
    target = target + target.T
    layer.weight = lib.tensor(target)
    np.testing.assert_allclose(layer.parametrizations.weight.original.detach().numpy(), np.triu(target / 2))
    np.testing.assert_allclose(layer.weight.detach().numpy(), target)
    assert list(layer.state_dict()) == ["bias", "parametrizations.weight.original"]
    assert P.type_before_parametrizations(layer) is lib.nn.Linear
    P.remove_parametrizations(layer, "weight", leave_parametrized=False)
    assert type(layer) is lib.nn.Linear
    assert layer.weight is original
    np.testing.assert_allclose(layer.weight.detach().numpy(), np.triu(target / 2))
    assert list(layer.state_dict()) == ["bias", "weight"]


@pytest.mark.parametrize("lib", [torch, vg])
def test_cached_computes_each_parametrized_tensor_once(lib):
    P = lib.nn.utils.parametrize
    layer = lib.nn.Linear(3, 3)
    sym = _Symmetric(lib.nn).cls
    P.register_parametrization(layer, "weight", sym())
    sym.calls = 0
    with P.cached():
        first = layer.weight
        assert layer.weight is first
        assert layer.weight is first
    assert sym.calls == 1
    assert layer.weight is not first
    assert sym.calls == 2


@pytest.mark.parametrize("lib", [torch, vg])
def test_errors_as_pytorch(lib):
    P = lib.nn.utils.parametrize
    layer = lib.nn.Linear(3, 4)
    with pytest.raises(ValueError, match="does not have a parameter, a buffer, or a parametrized element"):
        P.register_parametrization(layer, "nothing", _Double(lib.nn).cls())
    with pytest.raises(ValueError, match="does not have a parametrization on weight"):
        P.remove_parametrizations(layer, "weight")

    class Shrink(lib.nn.Module):
        def forward(self, X):
            return X[:1]

    with pytest.raises(ValueError, match="may not change the shape of the tensor, unless `unsafe`"):
        P.register_parametrization(layer, "weight", Shrink())
    assert type(layer) is lib.nn.Linear and "weight" in layer._parameters
    P.register_parametrization(layer, "weight", Shrink(), unsafe=True)
    assert tuple(layer.weight.shape) == (1, 3)
    P.remove_parametrizations(layer, "weight")

    lib.nn.utils.parametrizations.weight_norm(layer)
    with pytest.raises(ValueError, match="Cannot leave unparametrized"):
        P.remove_parametrizations(layer, "weight", leave_parametrized=False)
    with pytest.raises(ValueError, match="orthogonal_map has to be one of"):
        lib.nn.utils.parametrizations.orthogonal(lib.nn.Linear(2, 2), orthogonal_map="qr")
    with pytest.raises(ValueError, match="Expected a matrix"):
        lib.nn.utils.parametrizations.orthogonal(lib.nn.Linear(2, 2), name="bias")
    with pytest.raises(ValueError, match="n_power_iterations"):
        lib.nn.utils.parametrizations.spectral_norm(lib.nn.Linear(2, 2), n_power_iterations=0)


def test_weight_norm_removal_keeps_a_trained_parameter_and_its_value():
    torch.manual_seed(0)
    theirs = torch.nn.Linear(3, 2)
    ours = vg.nn.Linear(3, 2)
    ours.load_state_dict(_state(theirs))
    torch.nn.utils.parametrizations.weight_norm(theirs)
    vg.nn.utils.parametrizations.weight_norm(ours)
    with torch.no_grad():
        theirs.parametrizations.weight.original0.mul_(3)
    ours.load_state_dict(_state(theirs))
    torch.nn.utils.parametrize.remove_parametrizations(theirs, "weight")
    vg.nn.utils.parametrize.remove_parametrizations(ours, "weight")
    assert ours.weight.requires_grad and isinstance(ours.weight, vg.nn.Parameter)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    _close(ours.weight, theirs.weight, 1e-6)


def test_a_module_without_parametrizations_keeps_its_class():
    layer = vg.nn.Linear(2, 2)
    assert type(layer) is vg.nn.Linear and "parametrizations" not in layer.__dict__
    vg.nn.utils.parametrizations.spectral_norm(layer)
    other = vg.nn.Linear(2, 2)
    assert type(other) is vg.nn.Linear and not hasattr(vg.nn.Linear, "weight")


@pytest.mark.parametrize(
    "make",
    [
        lambda nn: (nn.Linear(3, 2), (4, 3)),
        lambda nn: (nn.Conv1d(2, 3, 2), (1, 2, 5)),
        lambda nn: (nn.Conv2d(2, 3, 2), (1, 2, 4, 4)),
        lambda nn: (nn.Conv3d(2, 3, 2), (1, 2, 3, 3, 3)),
        lambda nn: (nn.ConvTranspose2d(2, 3, 2), (1, 2, 3, 3)),
        lambda nn: (nn.PReLU(2), (3, 2)),
        lambda nn: (nn.RNNCell(3, 2), (1, 3)),
        lambda nn: (nn.LSTMCell(3, 2), (3,)),
        lambda nn: (nn.GRUCell(3, 2), (2, 3)),
    ],
)
@pytest.mark.parametrize("lib", [torch, vg])
def test_a_forward_computes_the_parametrized_weight_once(make, lib):
    """A layer's forward reads its weight once, as PyTorch's: a parametrization with state (spectral_norm's
    power iteration) steps once per call."""
    layer, shape = make(lib.nn)

    class Count(lib.nn.Module):
        calls = 0

        def forward(self, X):
            type(self).calls += 1
            return X

    name = "weight" if "weight" in layer._parameters else "weight_ih"
    lib.nn.utils.parametrize.register_parametrization(layer, name, Count())
    Count.calls = 0
    layer(lib.tensor(np.zeros(shape, dtype=np.float32)))
    assert Count.calls == 1


@pytest.mark.parametrize("lib", [torch, vg])
def test_deepcopy_works_and_pickling_refuses(lib):
    import copy
    import pickle

    layer = lib.nn.Linear(3, 2)
    lib.nn.utils.parametrizations.weight_norm(layer)
    replica = copy.deepcopy(layer)
    assert type(replica).__name__ == "ParametrizedLinear"
    assert replica.parametrizations.weight.original0 is not layer.parametrizations.weight.original0
    np.testing.assert_array_equal(replica.weight.detach().numpy(), layer.weight.detach().numpy())
    with pytest.raises(RuntimeError, match="only supported through state_dict"):
        pickle.dumps(layer)


def test_compiled_parametrized_layers():
    """weight_norm and orthogonal's cayley map trace into a compiled call; the matrix_exp map (whose
    scaling depends on the values) raises a clear error there."""
    x = vg.tensor(np.random.default_rng(0).standard_normal((2, 3)))
    for parametrize in (
        vg.nn.utils.parametrizations.weight_norm,
        lambda m: vg.nn.utils.parametrizations.orthogonal(m, orthogonal_map="cayley"),
    ):
        layer = parametrize(vg.nn.Linear(3, 3).double())
        compiled = vg.compile(lambda x, layer=layer: layer(x))
        np.testing.assert_allclose(compiled(x).detach().numpy(), layer(x).detach().numpy(), rtol=1e-12)
    # spectral_norm's power iteration writes its buffers inside the compiled call, as eagerly
    eager = vg.nn.utils.parametrizations.spectral_norm(vg.nn.Linear(3, 3).double())
    layer = vg.nn.utils.parametrizations.spectral_norm(vg.nn.Linear(3, 3).double())
    layer.load_state_dict(eager.state_dict())
    compiled = vg.compile(lambda x: layer(x))
    for _ in range(3):
        np.testing.assert_array_equal(compiled(x).detach().numpy(), eager(x).detach().numpy())
        for key, value in eager.state_dict().items():
            np.testing.assert_array_equal(layer.state_dict()[key].numpy(), value.numpy())
    layer = vg.nn.utils.parametrizations.orthogonal(vg.nn.Linear(3, 3).double())
    with pytest.raises(NotImplementedError, match="use orthogonal_map='cayley' or 'householder'"):
        vg.compile(lambda x: layer(x))(x)


@pytest.mark.parametrize("kind", ["weight_norm", "spectral_norm", "orthogonal"])
def test_assigning_the_weight_writes_the_originals_as_pytorch(kind):
    """module.weight = Q goes through right_inverse: weight_norm's g and v, spectral_norm's original,
    orthogonal's base (and -I as the original)."""
    torch.manual_seed(0)
    theirs = torch.nn.Linear(4, 4).double()
    ours = vg.nn.Linear(4, 4).double()
    getattr(torch.nn.utils.parametrizations, kind)(theirs)
    getattr(vg.nn.utils.parametrizations, kind)(ours)
    ours.load_state_dict(_state(theirs))
    q = np.linalg.qr(np.random.default_rng(0).standard_normal((4, 4)))[0]
    theirs.weight = torch.tensor(q)
    ours.weight = vg.tensor(q)
    for (name, t), (name_v, v) in zip(theirs.state_dict().items(), ours.state_dict().items(), strict=True):
        assert name == name_v
        _close(v, t, 1e-12)
    _close(ours.weight, theirs.weight, 1e-12)


def test_a_vector_and_a_buffer_parametrized_as_pytorch():
    """spectral_norm of a 1-D tensor normalises it (no _u, _v); a parametrized buffer's originals are
    buffers."""
    torch.manual_seed(0)
    theirs = torch.nn.Linear(4, 3).double()
    ours = vg.nn.Linear(4, 3).double()
    ours.load_state_dict(_state(theirs))
    torch.nn.utils.parametrizations.spectral_norm(theirs, "bias")
    vg.nn.utils.parametrizations.spectral_norm(ours, "bias")
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _close(ours.bias, theirs.bias, 1e-12)

    def holder(lib):
        module = lib.nn.Module()
        module.register_buffer("w", lib.tensor(np.arange(1.0, 7.0).reshape(2, 3)))
        return lib.nn.utils.parametrizations.weight_norm(module, "w")

    theirs, ours = holder(torch), holder(vg)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert list(ours.named_parameters()) == [] == list(theirs.named_parameters())
    _close(ours.w, theirs.w, 1e-12)


def test_weight_norm_loads_a_state_dict_of_the_hook_based_weight_norm():
    """PyTorch's parametrizations.weight_norm renames weight_g and weight_v (the old API's keys) on load."""
    torch.manual_seed(0)
    with pytest.warns(FutureWarning, match="deprecated"):
        old = torch.nn.utils.weight_norm(torch.nn.Linear(3, 2))
    state = old.state_dict()
    assert {"weight_g", "weight_v"} <= set(state)
    theirs = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(3, 2))
    ours = vg.nn.utils.parametrizations.weight_norm(vg.nn.Linear(3, 2))
    theirs.load_state_dict(state)
    result = ours.load_state_dict({k: vg.tensor(v.numpy()) for k, v in state.items()})
    assert repr(result) == "<All keys matched successfully>"
    _close(ours.weight, theirs.weight, 1e-6)
    seq = vg.nn.Sequential(vg.nn.utils.parametrizations.weight_norm(vg.nn.Linear(3, 2)))
    seq.load_state_dict({f"0.{k}": vg.tensor(v.numpy()) for k, v in state.items()})
    _close(seq[0].weight, theirs.weight, 1e-6)


def test_load_state_dict_pre_hooks_as_pytorch():
    """register_load_state_dict_pre_hook: the hook sees its module's prefix and may rewrite the state
    (a copy: the caller's dict is unchanged); what it adds to error_msgs is an error."""
    for lib in (torch, vg):
        seen = []
        model = lib.nn.Sequential(lib.nn.Linear(2, 2))

        def rename(module, state, prefix, meta, strict, missing, unexpected, errors, seen=seen):
            seen.append(prefix)
            if prefix + "w" in state:
                state[prefix + "weight"] = state.pop(prefix + "w")

        model[0].register_load_state_dict_pre_hook(rename)
        given = {"0.w": lib.ones(2, 2), "0.bias": lib.zeros(2)}
        model.load_state_dict(given)
        assert seen == ["0."] and list(given) == ["0.w", "0.bias"]
        np.testing.assert_array_equal(model[0].weight.detach().numpy(), np.ones((2, 2)))

        def refuse(module, state, prefix, meta, strict, missing, unexpected, errors):
            errors.append("refused by the hook")

        model.register_load_state_dict_pre_hook(refuse)
        with pytest.raises(RuntimeError, match="refused by the hook"):
            model.load_state_dict(given)
