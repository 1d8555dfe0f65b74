"""verigrad.distributions against torch.distributions: Categorical's probabilities, log-probabilities,
entropy and their gradients, shapes, draws and errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import verigrad


def _pair(array: np.ndarray, grad: bool = True) -> tuple[verigrad.Tensor, torch.Tensor]:
    return (
        verigrad.tensor(array, requires_grad=grad),
        torch.tensor(array, requires_grad=grad),
    )


@pytest.mark.parametrize("shape", [(4,), (3, 4), (2, 3, 5)])
@pytest.mark.parametrize("given", ["probs", "logits"])
def test_categorical_matches_pytorch(shape: tuple[int, ...], given: str) -> None:
    rng = np.random.default_rng(len(shape))
    array = rng.random(shape) if given == "probs" else rng.standard_normal(shape)
    if given == "probs":
        array[..., 0] = 0.0  # a category of probability zero: entropy adds 0 for it
    ours_x, theirs_x = _pair(array)
    ours = verigrad.distributions.Categorical(**{given: ours_x})
    theirs = torch.distributions.Categorical(**{given: theirs_x})
    assert tuple(ours.batch_shape) == tuple(theirs.batch_shape) and tuple(ours.event_shape) == ()
    assert tuple(ours.param_shape) == tuple(theirs.param_shape)
    values = rng.integers(0, shape[-1], (2, *shape[:-1]))
    results = []
    for d, v, lib in ((ours, verigrad.tensor(values), verigrad), (theirs, torch.tensor(values), torch)):
        out = [d.probs, d.logits, d.entropy(), d.log_prob(v), d.mode, d.enumerate_support()]
        loss = (d.log_prob(v) * lib.arange(1.0, 1.0 + v.numel(), dtype=lib.float64).view(v.shape)).sum()
        (loss + 0.5 * d.entropy().sum()).backward()
        results.append([o.detach().numpy() for o in out])
    for got, want in zip(*results):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ours_x.grad.numpy(), theirs_x.grad.numpy(), rtol=1e-12, atol=1e-12)
    assert np.isnan(ours.mean.numpy()).all() and ours.mean.shape == theirs.mean.shape
    assert repr(ours) == repr(theirs).replace("torch.Size", "verigrad.Size")


def test_categorical_entropy_and_log_prob_in_f32_at_a_zero_probability() -> None:
    probs = np.array([[0.0, 0.25, 0.75], [1.0, 0.0, 0.0]], dtype=np.float32)
    ours = verigrad.distributions.Categorical(probs=verigrad.tensor(probs))
    theirs = torch.distributions.Categorical(probs=torch.tensor(probs))
    np.testing.assert_array_equal(ours.entropy().numpy(), theirs.entropy().numpy())
    np.testing.assert_array_equal(ours.logits.numpy(), theirs.logits.numpy())  # clamped at eps
    value = np.array([0, 0])
    np.testing.assert_array_equal(
        ours.log_prob(verigrad.tensor(value)).numpy(), theirs.log_prob(torch.tensor(value)).numpy()
    )


def test_categorical_samples_follow_the_probabilities() -> None:
    verigrad.manual_seed(0)
    probs = verigrad.tensor([[0.1, 0.0, 0.6, 0.3], [0.0, 0.0, 1.0, 0.0]])
    d = verigrad.distributions.Categorical(probs=probs)
    draws = d.sample((4000,))
    assert draws.shape == (4000, 2) and draws.dtype == verigrad.int64
    assert d.sample().shape == (2,)
    counts = np.bincount(draws.numpy()[:, 0], minlength=4) / 4000
    np.testing.assert_allclose(counts, [0.1, 0.0, 0.6, 0.3], atol=0.03)
    assert (draws.numpy()[:, 1] == 2).all()


def test_categorical_refuses_what_pytorch_refuses() -> None:
    Categorical = verigrad.distributions.Categorical
    x = verigrad.tensor([0.2, 0.8])
    with pytest.raises(ValueError, match="either `probs` or `logits`"):
        Categorical()
    with pytest.raises(ValueError, match="either `probs` or `logits`"):
        Categorical(probs=x, logits=x)
    with pytest.raises(ValueError, match=r"probs .*Simplex"):
        Categorical(probs=verigrad.tensor([0.5, -0.1, 0.6]))
    with pytest.raises(ValueError, match=r"logits .*found invalid values"):
        Categorical(logits=verigrad.tensor([0.5, float("nan")]))
    with pytest.raises(ValueError, match="at least one dimension"):
        Categorical(probs=verigrad.tensor(1.0))
    with pytest.raises(ValueError, match=r"support IntegerInterval\(lower_bound=0, upper_bound=1\)"):
        Categorical(probs=x).log_prob(verigrad.tensor([2]))
    with pytest.raises(ValueError, match="support"):
        Categorical(probs=x).log_prob(verigrad.tensor([-1]))
    assert Categorical(probs=verigrad.tensor([0.5, -0.1, 0.6]), validate_args=False).probs.shape == (3,)
    with pytest.raises(NotImplementedError, match=r"verigrad\.distributions\.Poisson is not supported"):
        verigrad.distributions.Poisson  # noqa: B018
    # PyTorch refuses the same
    with pytest.raises(ValueError):
        torch.distributions.Categorical(probs=torch.tensor([0.5, -0.1, 0.6]))
    with pytest.raises(ValueError):
        torch.distributions.Categorical(probs=torch.tensor([0.2, 0.8])).log_prob(torch.tensor([2]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_normal_and_kl_divergence_match_pytorch(dtype: type) -> None:
    rng = np.random.default_rng(3)
    loc, scale = rng.standard_normal((2, 3)).astype(dtype), rng.uniform(0.5, 2.0, (3,)).astype(dtype)
    loc2, scale2 = rng.standard_normal(3).astype(dtype), rng.uniform(0.5, 2.0, (2, 3)).astype(dtype)
    value = rng.standard_normal((4, 2, 3)).astype(dtype)
    quantile = rng.uniform(0.1, 0.9, (2, 3)).astype(dtype)
    results, grads = [], []
    for lib in (verigrad, torch):
        params = [lib.tensor(a, requires_grad=True) for a in (loc, scale, loc2, scale2)]
        p, q = lib.distributions.Normal(params[0], params[1]), lib.distributions.Normal(params[2], params[3])
        v = lib.tensor(value)
        out = [
            p.log_prob(v),
            p.entropy(),
            p.cdf(v),
            p.icdf(lib.tensor(quantile)),
            p.mean,
            p.stddev,
            p.variance,
            p.mode,
        ]
        out.append(lib.distributions.kl_divergence(p, q))
        sum(o.sum() for o in out[:3] + out[-1:]).backward()
        results.append([o.detach().numpy() for o in out])
        grads.append([a.grad.numpy() for a in params])
        assert tuple(p.batch_shape) == (2, 3) and tuple(p.event_shape) == ()
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    for got, want in zip(*results):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)
    for got, want in zip(*grads):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


def test_normal_rsample_is_differentiable_and_sample_is_not() -> None:
    verigrad.manual_seed(0)
    loc, scale = (
        verigrad.tensor([0.5, -1.0], requires_grad=True),
        verigrad.tensor([2.0, 0.5], requires_grad=True),
    )
    d = verigrad.distributions.Normal(loc, scale)
    x = d.rsample((5000,))
    assert x.shape == (5000, 2) and x.requires_grad and not d.sample((3,)).requires_grad
    x.sum().backward()
    eps = (x.detach().numpy() - loc.detach().numpy()) / scale.detach().numpy()
    np.testing.assert_allclose(loc.grad.numpy(), [5000.0, 5000.0])
    np.testing.assert_allclose(scale.grad.numpy(), eps.sum(0), rtol=1e-4)
    np.testing.assert_allclose(x.detach().numpy().mean(0), [0.5, -1.0], atol=0.1)
    np.testing.assert_allclose(x.detach().numpy().std(0), [2.0, 0.5], rtol=0.05)
    standard = verigrad.distributions.Normal(0.0, 1.0)  # numbers: the default dtype, no batch
    assert standard.batch_shape == () and standard.sample().dtype == verigrad.float32


def test_normal_and_kl_refuse_what_pytorch_refuses() -> None:
    Normal = verigrad.distributions.Normal
    with pytest.raises(ValueError, match=r"scale to satisfy the constraint GreaterThan\(lower_bound=0\.0\)"):
        Normal(verigrad.tensor([0.0]), verigrad.tensor([0.0]))
    with pytest.raises(ValueError):
        torch.distributions.Normal(torch.tensor([0.0]), torch.tensor([0.0]))
    with pytest.raises(ValueError, match="loc to satisfy Real"):
        Normal(float("nan"), 1.0)
    with pytest.raises(TypeError, match="Normal: loc must be a Tensor or a number"):
        Normal("0", 1.0)
    with pytest.raises(NotImplementedError, match=r"kl_divergence\(Normal, Categorical\) is not supported"):
        verigrad.distributions.kl_divergence(
            Normal(0.0, 1.0), verigrad.distributions.Categorical(logits=verigrad.zeros(2))
        )


def test_categorical_kl_divergence_matches_pytorch() -> None:
    p = np.array([[0.2, 0.0, 0.8], [0.5, 0.25, 0.25]])
    q = np.array([[0.3, 0.3, 0.4], [0.5, 0.0, 0.5]])
    ours = verigrad.distributions.kl_divergence(
        verigrad.distributions.Categorical(probs=verigrad.tensor(p)),
        verigrad.distributions.Categorical(probs=verigrad.tensor(q)),
    )
    theirs = torch.distributions.kl_divergence(
        torch.distributions.Categorical(probs=torch.tensor(p)),
        torch.distributions.Categorical(probs=torch.tensor(q)),
    )
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)


# ---- the distributions beyond Categorical and Normal: values and gradients against torch ----

_POS = ("pos", (2, 3))  # a positive parameter of shape (2, 3)
_REAL = ("real", (2, 3))
_UNIT = ("unit", (2, 3))

# name: (parameters (kind, shape) by keyword, value kind, the properties and methods both have)
_SPECS = {
    "Bernoulli-probs": (
        "Bernoulli",
        {"probs": _UNIT},
        "bool",
        ["mean", "mode", "variance", "stddev", "entropy"],
    ),
    "Bernoulli-logits": ("Bernoulli", {"logits": _REAL}, "bool", ["mean", "variance", "entropy", "probs"]),
    "Uniform": (
        "Uniform",
        {"low": _REAL, "high": ("above_low", (3,))},
        "between",
        ["mean", "variance", "stddev", "entropy", "cdf", "icdf"],
    ),
    "Exponential": (
        "Exponential",
        {"rate": _POS},
        "pos",
        ["mean", "mode", "variance", "stddev", "entropy", "cdf", "icdf"],
    ),
    "Laplace": (
        "Laplace",
        {"loc": _REAL, "scale": _POS},
        "real",
        ["mean", "mode", "variance", "stddev", "entropy", "cdf", "icdf"],
    ),
    "Gamma": (
        "Gamma",
        {"concentration": _POS, "rate": ("pos", (3,))},
        "pos",
        ["mean", "mode", "variance", "stddev", "entropy"],
    ),
    "Beta": (
        "Beta",
        {"concentration1": _POS, "concentration0": ("pos", (3,))},
        "unit",
        ["mean", "mode", "variance", "stddev", "entropy"],
    ),
    "Dirichlet": (
        "Dirichlet",
        {"concentration": ("pos", (2, 4))},
        "simplex",
        ["mean", "mode", "variance", "stddev", "entropy"],
    ),
    "LogNormal": (
        "LogNormal",
        {"loc": _REAL, "scale": _POS},
        "pos",
        ["mean", "mode", "variance", "stddev", "entropy"],
    ),
    "OneHotCategorical": (
        "OneHotCategorical",
        {"logits": ("real", (2, 4))},
        "onehot",
        ["mean", "mode", "variance", "entropy", "probs"],
    ),
}
_GAMMAS = ("Gamma", "Beta", "Dirichlet")


def _draw(rng: np.random.Generator, kind: str, shape: tuple[int, ...], params: dict) -> np.ndarray:
    if kind == "pos":
        return rng.uniform(0.3, 3.0, shape)
    if kind == "real":
        return rng.standard_normal(shape)
    if kind == "unit":
        return rng.uniform(0.05, 0.95, shape)
    if kind == "above_low":
        return params["low"].max(0) + rng.uniform(0.5, 2.0, shape)
    if kind == "bool":
        return rng.integers(0, 2, shape).astype(float)
    if kind == "between":
        return params["low"] + rng.uniform(0.0, 1.0, shape) * (params["high"] - params["low"])
    if kind == "simplex":
        x = rng.uniform(0.1, 1.0, shape)
        return x / x.sum(-1, keepdims=True)
    if kind == "onehot":
        return np.eye(shape[-1])[rng.integers(0, shape[-1], shape[:-1])]
    raise AssertionError(kind)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(_SPECS))
def test_distribution_matches_pytorch(name: str, dtype: type) -> None:
    cls_name, spec, value_kind, members = _SPECS[name]
    rng = np.random.default_rng(len(name))
    params: dict[str, np.ndarray] = {}
    for key, (kind, shape) in spec.items():
        params[key] = _draw(rng, kind, shape, params).astype(dtype)
    event = (4,) if value_kind in ("simplex", "onehot") else ()
    batch = np.broadcast_shapes(*(p.shape[: p.ndim - len(event)] for p in params.values()))
    value = _draw(rng, value_kind, (5, *batch, *event), params).astype(dtype)
    quantile = rng.uniform(0.1, 0.9, (5, *batch)).astype(dtype)
    results, grads = [], []
    for lib in (verigrad, torch):
        tensors = {k: lib.tensor(v, requires_grad=True) for k, v in params.items()}
        d = getattr(lib.distributions, cls_name)(**tensors)
        out = [d.log_prob(lib.tensor(value))]
        for m in members:
            arg = {"cdf": lib.tensor(value), "icdf": lib.tensor(quantile)}.get(m)
            out.append(
                getattr(d, m)(arg)
                if arg is not None
                else getattr(d, m)()
                if m == "entropy"
                else getattr(d, m)
            )
        loss = sum((o * (1.0 + lib.arange(o.numel(), dtype=o.dtype).view(o.shape) / 7)).sum() for o in out)
        loss.backward()
        results.append([o.detach().numpy() for o in out])
        grads.append([t.grad.numpy() for t in tensors.values()])
        # Gamma, Beta and Dirichlet: sample only (PyTorch's implicit rsample gradient is not reproduced)
        shapes = (tuple(d.batch_shape), tuple(d.event_shape), d.has_rsample or cls_name in _GAMMAS)
        expanded = d.expand((3, *batch))
        shapes += (tuple(expanded.batch_shape), tuple(expanded.log_prob(lib.tensor(value[:1])).shape))
        results[-1].append(shapes)
    assert results[0][-1] == results[1][-1]
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for got, want in zip(results[0][:-1], results[1][:-1]):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    if cls_name in _GAMMAS and dtype == np.float64:
        # the entropy's gradient goes through digamma's derivative, trigamma, and PyTorch's CPU trigamma
        # is off by up to ~1.5e-9 in f64 (against scipy.special.polygamma; verigrad's is within 3e-15)
        tol = 1e-8
    for got, want in zip(*grads):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("given", ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_multivariate_normal_matches_pytorch(given: str, dtype: type) -> None:
    rng = np.random.default_rng(7)
    a = rng.standard_normal((2, 3, 3))
    spd = a @ a.transpose(0, 2, 1) + 3 * np.eye(3)
    matrix = {"scale_tril": np.linalg.cholesky(spd), "covariance_matrix": spd}.get(given, np.linalg.inv(spd))
    loc = rng.standard_normal(3).astype(dtype)
    matrix = matrix.astype(dtype)
    loc_q, spd_q = rng.standard_normal((2, 3)).astype(dtype), (spd + np.eye(3)).astype(dtype)
    value = rng.standard_normal((4, 2, 3)).astype(dtype)
    results, grads = [], []
    for lib in (verigrad, torch):
        m, mu = lib.tensor(matrix, requires_grad=True), lib.tensor(loc, requires_grad=True)
        p = lib.distributions.MultivariateNormal(mu, **{given: m})
        q = lib.distributions.MultivariateNormal(lib.tensor(loc_q), covariance_matrix=lib.tensor(spd_q))
        kl = lib.distributions.kl_divergence(p, q)
        out = [p.log_prob(lib.tensor(value)), p.entropy(), kl, p.mean, p.mode, p.variance, p.stddev]
        out += [
            p.scale_tril,
            p.covariance_matrix,
            p.precision_matrix,
            p.expand((5, 2)).log_prob(lib.tensor(value[0])),
        ]
        sum(
            (o * (1.0 + lib.arange(o.numel(), dtype=o.dtype).view(o.shape) / 7)).sum() for o in out
        ).backward()
        results.append([o.detach().numpy() for o in out])
        grads.append([mu.grad.numpy(), m.grad.numpy()])
        assert tuple(p.batch_shape) == (2,) and tuple(p.event_shape) == (3,)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for got, want in zip(*results):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    for got, want in zip(*grads):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
