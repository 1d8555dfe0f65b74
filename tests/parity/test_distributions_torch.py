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
    with pytest.raises(AttributeError, match=r"verigrad\.distributions\.Poisson is not supported"):
        verigrad.distributions.Poisson  # noqa: B018
    assert not hasattr(verigrad.distributions, "torch")  # module scanners (TorchDynamo) ask with hasattr
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
    "Gumbel": (
        "Gumbel",
        {"loc": _REAL, "scale": _POS},
        "near_loc",
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
    if kind == "near_loc":  # where PyTorch's Gumbel cdf does not underflow to 0 (its check then refuses)
        return params["loc"] + params["scale"] * rng.uniform(-1.0, 2.0, shape)
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


def _sac(lib, mu, std):
    # SAC's tanh-squashed Gaussian, scaled to actions in [-2, 4]
    D = lib.distributions
    transforms = [D.TanhTransform(cache_size=1), D.AffineTransform(1.0, 3.0, cache_size=1)]
    return D.Independent(D.TransformedDistribution(D.Normal(mu, std), transforms), 1)


# name: (builder of (lib, param a, param b), the noise verigrad draws)
_RSAMPLES = {
    "Normal": (lambda lib, a, b: lib.distributions.Normal(a, b), "randn"),
    "LogNormal": (lambda lib, a, b: lib.distributions.LogNormal(a, b), "randn"),
    "Independent-Normal": (
        lambda lib, a, b: lib.distributions.Independent(lib.distributions.Normal(a, b), 1),
        "randn",
    ),
    "SAC-tanh-affine": (_sac, "randn"),
    "Uniform": (lambda lib, a, b: lib.distributions.Uniform(a, a + b), "rand"),
    "Exponential": (lambda lib, a, b: lib.distributions.Exponential(b), "rand"),
    "Laplace": (lambda lib, a, b: lib.distributions.Laplace(a, b), "rand"),
    "Gumbel": (lambda lib, a, b: lib.distributions.Gumbel(a, b), "rand"),
    "RelaxedOneHotCategorical": (
        lambda lib, a, b: lib.distributions.RelaxedOneHotCategorical(b[0, 0], logits=a),
        "rand",
    ),
    "ExpRelaxedCategorical": (
        lambda lib, a, b: lib.distributions.relaxed_categorical.ExpRelaxedCategorical(b[1, 2], probs=b),
        "rand",
    ),
    "MultivariateNormal": (
        lambda lib, a, b: lib.distributions.MultivariateNormal(
            a, scale_tril=b.unsqueeze(-1) * lib.eye(3) + 0.1 * lib.ones(3, 3).tril(-1)
        ),
        "randn",
    ),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(_RSAMPLES))
def test_rsample_through_the_same_noise_matches_pytorch(
    name: str, dtype: type, monkeypatch: pytest.MonkeyPatch
) -> None:
    build, noise_kind = _RSAMPLES[name]
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((2, 3)).astype(dtype), rng.uniform(0.5, 2.0, (2, 3)).astype(dtype)
    results, grads = [], []
    ours_a, ours_b = verigrad.tensor(a, requires_grad=True), verigrad.tensor(b, requires_grad=True)
    d = build(verigrad, ours_a, ours_b)
    verigrad.manual_seed(5)
    x = d.rsample((4,))
    verigrad.manual_seed(5)  # the same draw again, handed to torch in place of its own
    noise = getattr(verigrad, noise_kind)(*x.shape, dtype=x.dtype)
    noise = torch.tensor(noise.numpy())
    monkeypatch.setattr(torch.distributions.normal, "_standard_normal", lambda *_, **__: noise.clone())
    monkeypatch.setattr(
        torch.distributions.multivariate_normal, "_standard_normal", lambda *_, **__: noise.clone()
    )
    monkeypatch.setattr(torch, "rand", lambda *_, **__: noise.clone())
    monkeypatch.setattr(torch.Tensor, "exponential_", lambda self: self.copy_(-torch.log1p(-noise)))
    monkeypatch.setattr(torch.Tensor, "uniform_", lambda self, lo, hi: self.copy_(noise * (hi - lo) + lo))
    theirs_a, theirs_b = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    t = build(torch, theirs_a, theirs_b)
    y = t.rsample((4,))
    for dist, sample, lib, params in (
        (d, x, verigrad, (ours_a, ours_b)),
        (t, y, torch, (theirs_a, theirs_b)),
    ):
        log_prob = dist.log_prob(sample)
        weights = 1.0 + lib.arange(sample.numel(), dtype=sample.dtype).view(sample.shape) / 5
        ((sample * weights).sum() + log_prob.sum()).backward()
        results.append([sample.detach().numpy(), log_prob.detach().numpy()])
        grads.append([p.grad.numpy() if p.grad is not None else np.zeros(p.shape, dtype) for p in params])
    assert d.has_rsample and t.has_rsample
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for got, want in zip(*results):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    for got, want in zip(*grads):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


# name: (class, parameters of p, parameters of q)
_KL_PAIRS = {
    "Gumbel": ("Gumbel", {"loc": [0.0, 1.0], "scale": [1.0, 0.5]}, {"loc": [0.5, -1.0], "scale": [2.0, 0.3]}),
    "LogNormal": (
        "LogNormal",
        {"loc": [0.0, 1.0], "scale": [1.0, 0.5]},
        {"loc": [0.5, -1.0], "scale": [2.0, 0.3]},
    ),
    "Bernoulli": ("Bernoulli", {"probs": [0.0, 0.3, 1.0, 0.6]}, {"probs": [0.2, 0.0, 0.5, 1.0]}),
    "Bernoulli-logits": ("Bernoulli", {"logits": [-25.0, 0.3, 30.0]}, {"logits": [0.2, -1.0, 24.0]}),
    "Uniform": (
        "Uniform",
        {"low": [0.0, -1.0, 0.5], "high": [1.0, 2.0, 0.75]},
        {"low": [-1.0, -0.5, 0.0], "high": [2.0, 3.0, 1.0]},
    ),
    "Exponential": ("Exponential", {"rate": [0.5, 2.0]}, {"rate": [1.5, 0.25]}),
    "Laplace": (
        "Laplace",
        {"loc": [0.0, 1.0], "scale": [1.0, 0.5]},
        {"loc": [0.5, -1.0], "scale": [2.0, 0.3]},
    ),
    "Gamma": (
        "Gamma",
        {"concentration": [0.5, 3.0], "rate": [1.0, 2.0]},
        {"concentration": [2.0, 1.5], "rate": [0.3, 1.0]},
    ),
    "Beta": (
        "Beta",
        {"concentration1": [0.5, 3.0], "concentration0": [1.0, 2.0]},
        {"concentration1": [2.0, 1.5], "concentration0": [0.3, 1.0]},
    ),
    "Dirichlet": (
        "Dirichlet",
        {"concentration": [[0.5, 3.0, 1.0], [1.0, 2.0, 4.0]]},
        {"concentration": [[2.0, 1.5, 0.2], [0.3, 1.0, 1.0]]},
    ),
    "OneHotCategorical": ("OneHotCategorical", {"probs": [[0.2, 0.0, 0.8]]}, {"probs": [[0.3, 0.3, 0.4]]}),
}


@pytest.mark.parametrize("name", sorted(_KL_PAIRS))
def test_kl_divergence_matches_pytorch(name: str) -> None:
    cls_name, p_args, q_args = _KL_PAIRS[name]
    results, grads = [], []
    for lib in (verigrad, torch):
        p_t = {k: lib.tensor(v, dtype=lib.float64, requires_grad=True) for k, v in p_args.items()}
        q_t = {k: lib.tensor(v, dtype=lib.float64, requires_grad=True) for k, v in q_args.items()}
        cls = getattr(lib.distributions, cls_name)
        kl = lib.distributions.kl_divergence(cls(**p_t), cls(**q_t))
        kl.where(kl.isfinite(), 0.0).sum().backward()
        results.append(kl.detach().numpy())
        grads.append([t.grad.numpy() for t in (*p_t.values(), *q_t.values())])
    np.testing.assert_allclose(results[0], results[1], rtol=1e-12, atol=1e-12)
    # gradients through digamma meet PyTorch's CPU trigamma, off by up to ~1.5e-9 in f64 (see above)
    tol = 1e-8 if cls_name in _GAMMAS else 1e-12
    for got, want in zip(*grads):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_kl_divergence_of_independent_sums_the_reinterpreted_axes() -> None:
    loc, scale = np.array([[0.0, 1.0, -1.0], [0.5, 0.2, 0.1]]), np.array([[1.0, 0.5, 2.0], [1.5, 1.0, 0.3]])
    results = []
    for lib in (verigrad, torch):
        D = lib.distributions
        p = D.Independent(D.Normal(lib.tensor(loc), lib.tensor(scale)), 1)
        q = D.Independent(D.Normal(lib.tensor(scale), lib.tensor(scale[::-1].copy())), 1)
        results.append(D.kl_divergence(p, q).numpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-12)
    assert results[0].shape == (2,)
    D = verigrad.distributions
    p = D.Independent(D.Normal(verigrad.tensor(loc), verigrad.tensor(scale)), 1)
    with pytest.raises(NotImplementedError, match="different reinterpreted_batch_ndims"):
        D.kl_divergence(p, D.Independent(D.Normal(verigrad.tensor(loc), verigrad.tensor(scale)), 0))
    tanh = D.TransformedDistribution(D.Normal(0.0, 1.0), D.TanhTransform())
    assert (
        float(D.kl_divergence(tanh, D.TransformedDistribution(D.Normal(1.0, 1.0), D.TanhTransform()))) == 0.5
    )
    with pytest.raises(NotImplementedError, match="same transforms"):
        D.kl_divergence(tanh, D.TransformedDistribution(D.Normal(0.0, 1.0), D.AffineTransform(0.0, 2.0)))
    with pytest.raises(NotImplementedError, match=r"kl_divergence\(Gamma, Beta\) is not supported"):
        D.kl_divergence(D.Gamma(1.0, 1.0), D.Beta(1.0, 1.0))


def test_draws_follow_their_distributions() -> None:
    verigrad.manual_seed(0)
    D, n = verigrad.distributions, 20000
    checks = [
        (D.Bernoulli(probs=verigrad.tensor([0.2, 0.9])), [0.2, 0.9], [0.16, 0.09]),
        (D.Bernoulli(logits=verigrad.tensor([0.0])), [0.5], [0.25]),
        (D.Uniform(verigrad.tensor([-1.0]), verigrad.tensor([3.0])), [1.0], [16 / 12]),
        (D.Exponential(verigrad.tensor([2.0])), [0.5], [0.25]),
        (D.Laplace(verigrad.tensor([1.0]), verigrad.tensor([0.5])), [1.0], [0.5]),
        (D.Gamma(verigrad.tensor([0.4, 3.0]), verigrad.tensor([1.0, 2.0])), [0.4, 1.5], [0.4, 0.75]),
        (D.Beta(verigrad.tensor([0.5, 2.0]), verigrad.tensor([0.5, 5.0])), None, None),
        (D.Dirichlet(verigrad.tensor([0.3, 1.0, 4.0])), None, None),
        (D.LogNormal(verigrad.tensor([0.0]), verigrad.tensor([0.5])), None, None),
    ]
    for d, mean, var in checks:
        x = d.sample((n,))
        assert tuple(x.shape) == (n, *d.batch_shape, *d.event_shape) and not x.requires_grad
        assert tuple(d.sample().shape) == tuple(d.batch_shape) + tuple(d.event_shape)
        mean = d.mean.numpy() if mean is None else mean
        var = d.variance.numpy() if var is None else var
        got = x.numpy().astype(np.float64)
        np.testing.assert_allclose(got.mean(0), mean, atol=4 * np.sqrt(np.max(var) / n) + 1e-3)
        np.testing.assert_allclose(got.var(0), var, rtol=0.1, atol=1e-3)
    onehot = D.OneHotCategorical(probs=verigrad.tensor([0.1, 0.6, 0.3])).sample((n,)).numpy()
    assert set(onehot.sum(-1).tolist()) == {1.0}
    np.testing.assert_allclose(onehot.mean(0), [0.1, 0.6, 0.3], atol=0.02)


def test_distributions_refuse_what_pytorch_refuses() -> None:
    D, t = verigrad.distributions, verigrad.tensor
    cases = [
        (lambda: D.Bernoulli(), ValueError, "either `probs` or `logits`"),
        (
            lambda: D.Bernoulli(probs=t([1.5])),
            ValueError,
            r"probs .*Interval\(lower_bound=0\.0, upper_bound=1\.0\)",
        ),
        (lambda: D.Bernoulli(probs=t([0.5])).log_prob(t([0.5])), ValueError, r"support \(Boolean\(\)\)"),
        (lambda: D.Uniform(t([1.0]), t([1.0])), ValueError, "low .*LessThan"),
        (lambda: D.Uniform(0.0, 1.0).log_prob(t(2.0)), ValueError, "support"),
        (lambda: D.Exponential(t([0.0])), ValueError, r"rate .*GreaterThan\(lower_bound=0\.0\)"),
        (lambda: D.Exponential(1.0).log_prob(t(-1.0)), ValueError, "support"),
        (lambda: D.Laplace(0.0, -1.0), ValueError, "scale .*GreaterThan"),
        (lambda: D.Gumbel(0.0, 0.0), ValueError, "Gumbel: expected parameter scale .*GreaterThan"),
        (lambda: D.Gamma(t([-1.0]), 1.0), ValueError, "concentration .*GreaterThan"),
        (lambda: D.Beta(1.0, 0.0), ValueError, "concentration"),
        (lambda: D.Dirichlet(t(1.0)), ValueError, "at least one-dimensional"),
        (lambda: D.Dirichlet(t([1.0, 2.0])).log_prob(t([0.5, 0.6])), ValueError, r"support \(Simplex\(\)\)"),
        (lambda: D.Gamma(1.0, 1.0).rsample(), NotImplementedError, "Gamma.rsample is not supported"),
        (lambda: D.Beta(1.0, 1.0).rsample(), NotImplementedError, "Beta.rsample is not supported"),
        (lambda: D.Gamma(1.0, 1.0).cdf(t(1.0)), NotImplementedError, "Gamma.cdf is not supported"),
        (lambda: D.Independent(D.Normal(0.0, 1.0), 1), ValueError, "reinterpreted_batch_ndims"),
        (lambda: D.MultivariateNormal(t([0.0, 0.0])), ValueError, "exactly one of covariance_matrix"),
        (lambda: D.MultivariateNormal(t([0.0]), scale_tril=t([[-1.0]])), ValueError, r"LowerCholesky\(\)"),
        (
            lambda: D.MultivariateNormal(t([0.0, 0.0]), covariance_matrix=t([[1.0, 2.0], [2.0, 1.0]])),
            ValueError,
            "PositiveDefinite",
        ),
        (lambda: D.TransformedDistribution(D.Normal(0.0, 1.0), ["tanh"]), ValueError, "Transform"),
        (lambda: D.TanhTransform(cache_size=2), ValueError, "cache_size must be 0 or 1"),
        (lambda: D.Binomial, AttributeError, "Binomial is not supported"),
        (lambda: D.Laplace(0.0, 1.0).log_prob(t(float("nan"))), ValueError, r"Laplace.log_prob: .*Real\(\)"),
        (lambda: D.Gumbel(0.0, 1.0).log_prob(t(float("nan"))), ValueError, r"Gumbel.log_prob: .*Real\(\)"),
        (
            lambda: D.MultivariateNormal(t([0.0]), scale_tril=t([[1.0]])).log_prob(t([float("nan")])),
            ValueError,
            "MultivariateNormal.log_prob: .*support",
        ),
        (lambda: D.RelaxedOneHotCategorical(0.0, logits=t([0.0, 1.0])), ValueError, "temperature .*Positive"),
    ]
    for make, error, pattern in cases:
        with pytest.raises(error, match=pattern):
            make()
    # PyTorch refuses the same
    for make in (
        lambda: torch.distributions.Bernoulli(probs=torch.tensor([1.5])),
        lambda: torch.distributions.Uniform(torch.tensor([1.0]), torch.tensor([1.0])),
        lambda: torch.distributions.Exponential(1.0).log_prob(torch.tensor(-1.0)),
        lambda: torch.distributions.Laplace(0.0, 1.0).log_prob(torch.tensor(float("nan"))),
        lambda: torch.distributions.Dirichlet(torch.tensor([1.0, 2.0])).log_prob(torch.tensor([0.5, 0.6])),
        lambda: torch.distributions.MultivariateNormal(
            torch.tensor([0.0]), scale_tril=torch.tensor([[-1.0]])
        ),
    ):
        with pytest.raises(ValueError):
            make()


def test_expand_and_shapes_match_pytorch() -> None:
    loc, scale = np.array([0.5, -1.0, 0.0]), np.array([1.0, 2.0, 0.5])
    value = np.array([[0.1, 0.2, 0.3], [1.0, -1.0, 2.0]])
    results = []
    for lib in (verigrad, torch):
        D = lib.distributions
        normal = D.Normal(lib.tensor(loc), lib.tensor(scale))
        made = [
            normal.expand((2, 3)),
            D.Independent(normal, 1).expand((2,)),
            D.TransformedDistribution(normal, [D.TanhTransform()]).expand((2, 3)),
            D.Categorical(logits=lib.tensor(value)).expand((4, 2)),
            D.OneHotCategorical(logits=lib.tensor(value)).expand((4, 2)),
            D.Beta(lib.tensor(scale), lib.tensor(scale[::-1].copy())).expand((2, 3)),
            D.Bernoulli(logits=lib.tensor(loc)).expand((2, 3)),
        ]
        values = [
            value,
            value,
            np.tanh(value),
            np.array([[0, 2]]),
            np.eye(3)[[0, 2]],
            1 / (1 + np.exp(-value)),
        ]
        values.append((value > 0).astype(float))
        out = []
        for d, v in zip(made, values):
            out.append(
                (tuple(d.batch_shape), tuple(d.event_shape), d.log_prob(lib.tensor(v)).detach().numpy())
            )
        results.append(out)
    for (b1, e1, lp1), (b2, e2, lp2) in zip(*results):
        assert (b1, e1) == (b2, e2) and lp1.shape == lp2.shape
        np.testing.assert_allclose(lp1, lp2, rtol=1e-12, atol=1e-12)


def test_an_expanded_one_hot_categorical_keeps_its_class_as_pytorchs() -> None:
    """A subclass of OneHotCategorical expands into its own class, as PyTorch's (and so does one of
    ExpRelaxedCategorical, whose expand is the same code)."""
    for lib in (verigrad, torch):

        class Mine(lib.distributions.OneHotCategorical):
            pass

        expanded = Mine(probs=lib.tensor([0.2, 0.8])).expand((3,))
        assert type(expanded) is Mine
        assert tuple(expanded.batch_shape) == (3,) and tuple(expanded.probs.shape) == (3, 2)

    class MineExp(verigrad.distributions.relaxed_categorical.ExpRelaxedCategorical):
        pass

    expanded = MineExp(verigrad.tensor(0.5), probs=verigrad.tensor([0.2, 0.8])).expand((3,))
    assert type(expanded) is MineExp and tuple(expanded.logits.shape) == (3, 2)


def test_bernoulli_support_and_mode_match_pytorch() -> None:
    probs = np.array([[0.0, 0.5, 0.7], [1.0, 0.2, 0.5]])
    results = []
    for lib in (verigrad, torch):
        d = lib.distributions.Bernoulli(probs=lib.tensor(probs))
        results.append(
            [d.enumerate_support().numpy(), d.enumerate_support(expand=False).numpy(), d.mode.numpy()]
        )
        results[-1].append(
            d.log_prob(lib.tensor([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]], dtype=lib.float64)).numpy()
        )
    for got, want in zip(*results):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)  # NaN modes where probs is 0.5


def test_gamma_draws_repeat_with_the_seed() -> None:
    d = verigrad.distributions.Dirichlet(verigrad.tensor([[0.2, 1.0], [3.0, 0.5]]))
    verigrad.manual_seed(3)
    first = d.sample((50,)).numpy()
    verigrad.manual_seed(3)
    np.testing.assert_array_equal(first, d.sample((50,)).numpy())
    assert (first > 0).all() and np.allclose(first.sum(-1), 1.0, atol=1e-6)
