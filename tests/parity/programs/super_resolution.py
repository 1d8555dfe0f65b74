"""PyTorch's super_resolution example: a sub-pixel CNN (nn.PixelShuffle) initialised with
init.orthogonal_ and init.calculate_gain, trained with Adam on MSE to upscale 8x8 images to 24x24, and
scored by PSNR."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import record


def build(torch: Any, upscale_factor: int) -> Any:
    nn = torch.nn
    init = torch.nn.init

    class Net(nn.Module):
        def __init__(self, upscale_factor):
            super().__init__()
            self.relu = nn.ReLU()
            self.conv1 = nn.Conv2d(1, 16, (5, 5), (1, 1), (2, 2))
            self.conv2 = nn.Conv2d(16, 16, (3, 3), (1, 1), (1, 1))
            self.conv3 = nn.Conv2d(16, 8, (3, 3), (1, 1), (1, 1))
            self.conv4 = nn.Conv2d(8, upscale_factor**2, (3, 3), (1, 1), (1, 1))
            self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
            self._initialize_weights()

        def forward(self, x):
            x = self.relu(self.conv1(x))
            x = self.relu(self.conv2(x))
            x = self.relu(self.conv3(x))
            x = self.pixel_shuffle(self.conv4(x))
            return x

        def _initialize_weights(self):
            init.orthogonal_(self.conv1.weight, init.calculate_gain("relu"))
            init.orthogonal_(self.conv2.weight, init.calculate_gain("relu"))
            init.orthogonal_(self.conv3.weight, init.calculate_gain("relu"))
            init.orthogonal_(self.conv4.weight)

    return Net(upscale_factor)


def images(n: int, size: int, seed: int = 4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size] / size
    f = rng.uniform(1, 4, (n, 2, 1, 1))
    return (0.5 + 0.5 * np.sin(2 * np.pi * (f[:, :1] * xx + f[:, 1:] * yy))).astype(np.float32)


def main(torch: Any, saved: dict[str, np.ndarray] | None = None, epochs: int = 3) -> dict[str, Any]:
    nn = torch.nn
    F = torch.nn.functional
    upscale = 3
    torch.manual_seed(0)
    model = build(torch, upscale)
    if saved is not None:
        record.load(torch, model, saved)
    out: dict[str, Any] = {"state": record.state(model), "losses": [], "psnr": []}
    target = torch.from_numpy(images(20, 24))
    low = F.avg_pool2d(target, upscale)  # 8x8 inputs
    data = torch.utils.data
    training_data_loader = data.DataLoader(data.TensorDataset(low[:16], target[:16]), batch_size=4)
    testing_data_loader = data.DataLoader(data.TensorDataset(low[16:], target[16:]), batch_size=2)
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    for _epoch in range(epochs):
        for input, tgt in training_data_loader:
            optimizer.zero_grad()
            loss = criterion(model(input), tgt)
            loss.backward()
            if "loss0" not in out:
                out["loss0"], out["grads0"] = loss.item(), record.grads(model)
            optimizer.step()
            out["losses"].append(loss.item())
        avg_psnr = 0
        with torch.no_grad():
            for input, tgt in testing_data_loader:
                prediction = model(input)
                mse = criterion(prediction, tgt)
                psnr = 10 * math.log10(1 / mse.item())
                avg_psnr += psnr
        out["psnr"].append(avg_psnr / len(testing_data_loader))
    out["eval"] = [prediction.numpy().copy()]
    out["gain"] = [torch.nn.init.calculate_gain(n) for n in ("relu", "tanh", "sigmoid", "linear")]
    out["gain"].append(torch.nn.init.calculate_gain("leaky_relu", 0.2))
    return out
