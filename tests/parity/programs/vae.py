"""PyTorch's VAE example on 8x8 images: a fully connected encoder to a mean and a log-variance, the
reparameterization trick, a sigmoid decoder, binary cross-entropy summed plus the KL term, Adam. The
noise of the trick is drawn by the caller and passed in (as randn_like(std) would draw it) so that both
frameworks see the same."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import record


def build(torch: Any) -> Any:
    nn = torch.nn
    F = torch.nn.functional

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(64, 32)
            self.fc21 = nn.Linear(32, 4)
            self.fc22 = nn.Linear(32, 4)
            self.fc3 = nn.Linear(4, 32)
            self.fc4 = nn.Linear(32, 64)

        def encode(self, x):
            h1 = F.relu(self.fc1(x))
            return self.fc21(h1), self.fc22(h1)

        def reparameterize(self, mu, logvar, noise):
            std = torch.exp(0.5 * logvar)
            eps = torch.zeros_like(std).copy_(noise)  # torch.randn_like(std), drawn by the caller
            return mu + eps * std

        def decode(self, z):
            h3 = F.relu(self.fc3(z))
            return torch.sigmoid(self.fc4(h3))

        def forward(self, x, noise):
            mu, logvar = self.encode(x.view(-1, 64))
            z = self.reparameterize(mu, logvar, noise)
            return self.decode(z), mu, logvar

    return VAE()


def loss_function(torch: Any, recon_x, x, mu, logvar):
    BCE = torch.nn.functional.binary_cross_entropy(recon_x, x.view(-1, 64), reduction="sum")
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return BCE + KLD


def main(torch: Any, saved: dict[str, np.ndarray] | None = None, epochs: int = 2) -> dict[str, Any]:
    torch.manual_seed(0)
    model = build(torch)
    if saved is not None:
        record.load(torch, model, saved)
    out: dict[str, Any] = {"state": record.state(model), "losses": []}
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

    rng = np.random.default_rng(5)
    images = (rng.random((96, 1, 8, 8)) < np.linspace(0.1, 0.9, 64).reshape(1, 1, 8, 8)).astype(np.float32)
    data = torch.utils.data
    loader = data.DataLoader(data.TensorDataset(torch.from_numpy(images)), batch_size=16)
    for _epoch in range(epochs):
        model.train()
        for (batch,) in loader:
            noise = torch.from_numpy(rng.standard_normal((batch.size(0), 4)).astype(np.float32))
            optimizer.zero_grad()
            recon_batch, mu, logvar = model(batch, noise)
            loss = loss_function(torch, recon_batch, batch, mu, logvar)
            loss.backward()
            if "loss0" not in out:
                out["loss0"], out["grads0"] = loss.item(), record.grads(model)
            optimizer.step()
            out["losses"].append(loss.item() / len(batch))
    model.eval()
    with torch.no_grad():
        sample = torch.from_numpy(rng.standard_normal((8, 4)).astype(np.float32))
        out["eval"] = [model.decode(sample).numpy().copy()]
    return out
