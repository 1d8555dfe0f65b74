"""A spectrally normalized GAN (SN-GAN, hinge loss) in the style of the public parametrization
tutorials: the discriminator's layers under nn.utils.parametrizations.spectral_norm (one under the older
nn.utils.spectral_norm hook, its weight_orig, weight_u and weight_v in the state dict), the generator with
a weight-normalized layer (parametrizations.weight_norm), an orthogonal square layer
(parametrizations.orthogonal, the Cayley map: PyTorch's matrix_exp of a small matrix is a few ulps from
the exact one, which verigrad's is nearer, and the training amplifies that) and a custom
parametrization (a symmetric matrix whose right_inverse keeps the upper triangle) registered with
nn.utils.parametrize; the discriminator trained twice a generator step, Adam with betas (0.5, 0.999),
the generated samples evaluated under parametrize.cached(). The noise comes from NumPy, the same in both
runs."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import record

NZ, DIM, HIDDEN = 4, 6, 12


def build(torch: Any) -> tuple[Any, Any]:
    nn, P = torch.nn, torch.nn.utils.parametrizations

    class Symmetric(nn.Module):
        def forward(self, x):
            return x.triu() + x.triu(1).transpose(-1, -2)

        def right_inverse(self, a):
            return a.triu()

    torch.manual_seed(0)
    square = nn.Linear(HIDDEN, HIDDEN)
    torch.nn.utils.parametrize.register_parametrization(square, "weight", Symmetric())
    generator = nn.Sequential(
        P.weight_norm(nn.Linear(NZ, HIDDEN)), nn.ReLU(), square, nn.Tanh(),
        P.orthogonal(nn.Linear(HIDDEN, HIDDEN), orthogonal_map="cayley"), nn.ReLU(), nn.Linear(HIDDEN, DIM),
    )  # fmt: skip
    discriminator = nn.Sequential(
        P.spectral_norm(nn.Linear(DIM, HIDDEN)), nn.LeakyReLU(0.1),
        nn.utils.spectral_norm(nn.Linear(HIDDEN, HIDDEN)), nn.LeakyReLU(0.1),
        P.spectral_norm(nn.Linear(HIDDEN, 1), n_power_iterations=2),
    )  # fmt: skip
    return generator, discriminator


def real_batch(rng: np.random.Generator, n: int) -> np.ndarray:
    angle = rng.uniform(0, 2 * np.pi, (n, 1))
    return np.concatenate([np.cos(angle * k) for k in range(1, DIM + 1)], axis=1) * 0.8


def main(torch: Any, saved: dict[str, np.ndarray] | None = None, dtype: Any = None) -> dict[str, Any]:
    """Train the GAN (in f32, or `dtype`); returns what the parity suite compares."""
    F = torch.nn.functional
    dtype = dtype or torch.float32
    generator, discriminator = build(torch)
    generator, discriminator = generator.to(dtype), discriminator.to(dtype)
    if saved is not None:
        record.load(torch, generator, {k[2:]: v for k, v in saved.items() if k.startswith("g.")})
        record.load(torch, discriminator, {k[2:]: v for k, v in saved.items() if k.startswith("d.")})
    state = {f"g.{k}": v for k, v in record.state(generator).items()}
    out: dict[str, Any] = {"state": state | {f"d.{k}": v for k, v in record.state(discriminator).items()}}
    out |= {"losses": [], "lrs": [], "eval": []}
    g_opt = torch.optim.Adam(generator.parameters(), lr=1e-3, betas=(0.5, 0.999))
    d_opt = torch.optim.Adam(discriminator.parameters(), lr=1e-3, betas=(0.5, 0.999))
    rng = np.random.default_rng(5)

    def tensor(a: np.ndarray) -> Any:
        return torch.from_numpy(a).to(dtype)

    for step in range(7):
        for _ in range(2):
            real = tensor(real_batch(rng, 16))
            fake = generator(tensor(rng.standard_normal((16, NZ)))).detach()
            d_loss = F.relu(1.0 - discriminator(real)).mean() + F.relu(1.0 + discriminator(fake)).mean()
            d_opt.zero_grad()
            d_loss.backward()
            if "loss0" not in out:
                grads = record.grads(discriminator)
                out["loss0"], out["grads0"] = d_loss.item(), {f"d.{k}": v for k, v in grads.items()}
            d_opt.step()
            out["losses"].append(d_loss.item())
        g_loss = -discriminator(generator(tensor(rng.standard_normal((16, NZ))))).mean()
        g_opt.zero_grad()
        g_loss.backward()
        if step == 0:
            out["grads0"] |= {f"g.{k}": v for k, v in record.grads(generator).items()}
        g_opt.step()
        out["losses"].append(g_loss.item())
        out["lrs"].append(g_opt.param_groups[0]["lr"])
    generator.eval()
    discriminator.eval()
    noise = tensor(np.random.default_rng(11).standard_normal((10, NZ)))
    with torch.no_grad(), torch.nn.utils.parametrize.cached():
        samples = generator(noise)
        out["eval"] += [samples.numpy(), discriminator(samples).numpy()]
        out["eval"].append(generator[4].weight.numpy())  # the orthogonal weight
    return out
