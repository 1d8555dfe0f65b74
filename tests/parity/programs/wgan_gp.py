"""A WGAN-GP in the layout of the public implementations: a critic and a generator of small MLPs, the
gradient penalty through autograd.grad(create_graph=True, grad_outputs=ones_like), the critic trained
n_critic times a generator step with requires_grad toggled on its parameters, Adam with betas (0.5, 0.9).
The interpolation weights and the noise come from NumPy, the same in both runs."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import record


def build(torch: Any, nz: int, dim: int, hidden: int) -> tuple[Any, Any]:
    nn = torch.nn
    generator = nn.Sequential(
        nn.Linear(nz, hidden), nn.ReLU(True), nn.Linear(hidden, hidden), nn.ReLU(True), nn.Linear(hidden, dim)
    )
    critic = nn.Sequential(
        nn.Linear(dim, hidden), nn.LeakyReLU(0.2, inplace=True), nn.Linear(hidden, hidden),
        nn.LeakyReLU(0.2, inplace=True), nn.Linear(hidden, 1),
    )  # fmt: skip
    return generator, critic


def calc_gradient_penalty(
    torch: Any, netD: Any, real_data: Any, fake_data: Any, alpha: Any, lam: float
) -> Any:
    alpha = alpha.expand(real_data.size())
    interpolates = alpha * real_data + ((1 - alpha) * fake_data)
    interpolates = interpolates.requires_grad_(True)
    disc_interpolates = netD(interpolates)
    gradients = torch.autograd.grad(
        outputs=disc_interpolates,
        inputs=interpolates,
        grad_outputs=torch.ones(disc_interpolates.size(), dtype=real_data.dtype),
        create_graph=True,
        retain_graph=True,
        only_inputs=True,
    )[0]
    gradients = gradients.view(gradients.size(0), -1)
    return ((gradients.norm(2, dim=1) - 1) ** 2).mean() * lam


def main(torch: Any, saved: dict[str, np.ndarray] | None = None, dtype: Any = None) -> dict[str, Any]:
    nz, dim, hidden, batch, n_critic, iters = 4, 3, 16, 8, 3, 4
    rng = np.random.default_rng(21)
    centers = np.array([[2.0, 0.0, -1.0], [-1.0, 1.5, 0.5]])
    torch.manual_seed(0)
    netG, netD = build(torch, nz, dim, hidden)
    model = torch.nn.ModuleDict({"G": netG, "D": netD})
    if dtype is not None:
        model = model.to(dtype)
    if saved is not None:
        record.load(torch, model, saved)
    out: dict[str, Any] = {"state": record.state(model), "losses": [], "wasserstein": []}
    as_t = (
        (lambda a: torch.from_numpy(a))
        if dtype is not None
        else (lambda a: torch.from_numpy(a.astype(np.float32)))
    )
    optimizerD = torch.optim.Adam(netD.parameters(), lr=1e-3, betas=(0.5, 0.9))
    optimizerG = torch.optim.Adam(netG.parameters(), lr=1e-3, betas=(0.5, 0.9))
    one = torch.tensor(1.0, dtype=netD[0].weight.dtype)
    mone = one * -1
    for _iteration in range(iters):
        for p in netD.parameters():
            p.requires_grad = True
        for _ in range(n_critic):
            real = as_t(centers[rng.integers(0, 2, batch)] + 0.1 * rng.standard_normal((batch, dim)))
            netD.zero_grad()
            D_real = netD(real).mean()
            D_real.backward(mone)
            noise = as_t(rng.standard_normal((batch, nz)))
            with torch.no_grad():
                fake = netG(noise)
            D_fake = netD(fake).mean()
            D_fake.backward(one)
            gradient_penalty = calc_gradient_penalty(
                torch, netD, real, fake, as_t(rng.random((batch, 1))), lam=0.1
            )
            gradient_penalty.backward()
            D_cost = D_fake - D_real + gradient_penalty
            if "loss0" not in out:
                out["loss0"], out["grads0"] = D_cost.item(), record.grads(model)
            optimizerD.step()
            out["losses"].append(D_cost.item())
            out["wasserstein"].append((D_real - D_fake).item())
        for p in netD.parameters():
            p.requires_grad = False
        netG.zero_grad()
        fake = netG(as_t(rng.standard_normal((batch, nz))))
        G = netD(fake).mean()
        G.backward(mone)
        optimizerG.step()
        out["losses"].append((-G).item())
    with torch.no_grad():
        out["eval"] = [netG(as_t(rng.standard_normal((5, nz)))).numpy().copy()]
    return out
