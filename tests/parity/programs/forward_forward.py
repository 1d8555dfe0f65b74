"""PyTorch's mnist_forward_forward example (Hinton's forward-forward algorithm) on random digit-like
data: each Layer is an nn.Linear subclass with its own Adam, trained on its own by the goodness of
positive (the true label written into the first 10 pixels) and negative (a wrong label) data; the Net
keeps its layers in a plain Python list, and both override Module.train with their own training loop;
prediction picks the label of greatest goodness. The example indexes with `x_[range(n), y]`, which
verigrad's indexing refuses (a range is not one of its index kinds): a list here. The negative labels
are a permutation drawn in NumPy, alike for both frameworks."""

from __future__ import annotations

from typing import Any

import numpy as np

PIXELS, SAMPLES, EPOCHS, THRESHOLD, LR = 40, 32, 12, 2.0, 0.03


def build(torch: Any, losses: list[float]) -> Any:
    Adam = torch.optim.Adam

    class Layer(torch.nn.Linear):
        def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
            super().__init__(in_features, out_features, bias, device, dtype)
            self.relu = torch.nn.ReLU()
            self.opt = Adam(self.parameters(), lr=LR)
            self.threshold = THRESHOLD
            self.num_epochs = EPOCHS

        def forward(self, x):
            x_direction = x / (x.norm(2, 1, keepdim=True) + 1e-4)
            return self.relu(torch.mm(x_direction, self.weight.T) + self.bias.unsqueeze(0))

        def train(self, x_pos, x_neg):
            for i in range(self.num_epochs):  # noqa: B007 (as the example)
                g_pos = self.forward(x_pos).pow(2).mean(1)
                g_neg = self.forward(x_neg).pow(2).mean(1)
                # The following loss pushes pos (neg) samples to values larger (smaller) than the
                # self.threshold.
                loss = torch.log(
                    1 + torch.exp(torch.cat([-g_pos + self.threshold, g_neg - self.threshold]))
                ).mean()
                self.opt.zero_grad()
                # this backward just compute the derivative and hence is not considered backpropagation.
                loss.backward()
                self.opt.step()
                losses.append(loss.item())
            return self.forward(x_pos).detach(), self.forward(x_neg).detach()

    class Net(torch.nn.Module):
        def __init__(self, dims):
            super().__init__()
            self.layers = []
            for d in range(len(dims) - 1):
                self.layers = self.layers + [Layer(dims[d], dims[d + 1])]  # noqa: RUF005 (as the example)

        def predict(self, x):
            goodness_per_label = []
            for label in range(10):
                h = overlay_y_on_x(torch, x, label)
                goodness = []
                for layer in self.layers:
                    h = layer(h)
                    goodness = goodness + [h.pow(2).mean(1)]  # noqa: RUF005 (as the example)
                goodness_per_label += [sum(goodness).unsqueeze(1)]
            goodness_per_label = torch.cat(goodness_per_label, 1)
            return goodness_per_label.argmax(1)

        def train(self, x_pos, x_neg):
            h_pos, h_neg = x_pos, x_neg
            for i, layer in enumerate(self.layers):  # noqa: B007 (as the example)
                h_pos, h_neg = layer.train(h_pos, h_neg)

    return Net([PIXELS, 24, 24])


def overlay_y_on_x(torch: Any, x: Any, y: Any) -> Any:
    """Replace the first 10 pixels of data [x] with one-hot-encoded label [y]"""
    x_ = x.clone()
    x_[:, :10] *= 0.0
    x_[list(range(x.shape[0])), y] = x.max()  # the example's range(...): see the docstring
    return x_


def state(net: Any) -> dict[str, np.ndarray]:
    return {
        f"layers.{i}.{k}": v.detach().numpy().copy()
        for i, layer in enumerate(net.layers)
        for k, v in layer.state_dict().items()
    }


def main(torch: Any, saved: dict[str, np.ndarray] | None = None, dtype: Any = None) -> dict[str, Any]:
    torch.manual_seed(1234)
    rng = np.random.default_rng(3)
    y_np = rng.integers(0, 10, SAMPLES)
    prototypes = rng.random((10, PIXELS)).astype(np.float32)
    x_np = np.clip(prototypes[y_np] + 0.3 * rng.standard_normal((SAMPLES, PIXELS)).astype(np.float32), 0, 1)
    x, y = torch.from_numpy(x_np).to(dtype or torch.float32), torch.from_numpy(y_np)
    losses: list[float] = []
    net = build(torch, losses)
    for layer in net.layers:
        layer.to(dtype or torch.float32)
    if saved is not None:
        for i, layer in enumerate(net.layers):
            layer.load_state_dict(
                {k: torch.from_numpy(saved[f"layers.{i}.{k}"].copy()) for k in ("weight", "bias")}
            )
    out: dict[str, Any] = {"state": state(net)}
    x_pos = overlay_y_on_x(torch, x, y)
    rnd = torch.from_numpy(rng.permutation(SAMPLES))
    x_neg = overlay_y_on_x(torch, x, y[rnd])
    net.train(x_pos, x_neg)
    out["losses"] = losses
    out["acc"] = [net.predict(x).eq(y).float().mean().item()]
    out["predicted"] = net.predict(x).tolist()
    out["eval"] = [x_pos.numpy().copy(), x_neg.numpy().copy(), net.layers[0](x_pos).detach().numpy().copy()]
    out["trained"] = state(net)
    return out
