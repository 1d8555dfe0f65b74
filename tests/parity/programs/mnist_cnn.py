"""PyTorch's MNIST example as its users write it (a CNN, its own train and test loops, Adadelta with a
StepLR schedule), on 8x8 digits. `torch` is whichever framework module the caller binds."""

from __future__ import annotations

from typing import Any

import numpy as np


def initial_state(seed: int = 0) -> dict[str, np.ndarray]:
    """The Net's state dict in NumPy (f64), the same for both frameworks."""
    rng = np.random.default_rng(seed)

    def uniform(fan_in: int, *shape: int) -> np.ndarray:
        bound = 1.0 / np.sqrt(fan_in)
        return rng.uniform(-bound, bound, size=shape)

    return {
        "conv1.weight": uniform(9, 8, 1, 3, 3),
        "conv1.bias": uniform(9, 8),
        "conv2.weight": uniform(72, 16, 8, 3, 3),
        "conv2.bias": uniform(72, 16),
        "fc1.weight": uniform(64, 32, 64),
        "fc1.bias": uniform(64, 32),
        "fc2.weight": uniform(32, 10, 32),
        "fc2.bias": uniform(32, 10),
    }


def build(torch: Any, dropout: float = 0.0) -> Any:
    nn = torch.nn
    F = torch.nn.functional

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(1, 8, 3, 1)
            self.conv2 = nn.Conv2d(8, 16, 3, 1)
            self.dropout1 = nn.Dropout(dropout)
            self.dropout2 = nn.Dropout(dropout)
            self.fc1 = nn.Linear(64, 32)
            self.fc2 = nn.Linear(32, 10)

        def forward(self, x):
            x = self.conv1(x)
            x = F.relu(x)
            x = self.conv2(x)
            x = F.relu(x)
            x = F.max_pool2d(x, 2)
            x = self.dropout1(x)
            x = torch.flatten(x, 1)
            x = self.fc1(x)
            x = F.relu(x)
            x = self.dropout2(x)
            x = self.fc2(x)
            output = F.log_softmax(x, dim=1)
            return output

    return Net()


def train(torch: Any, model: Any, device: Any, train_loader: Any, optimizer: Any, record: dict) -> None:
    F = torch.nn.functional
    model.train()
    for data, target in train_loader:
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        if "loss0" not in record:
            record["loss0"] = loss.item()
            record["grads0"] = {n: p.grad.detach().numpy().copy() for n, p in model.named_parameters()}
        optimizer.step()
        record["losses"].append(loss.item())


def test(torch: Any, model: Any, device: Any, test_loader: Any, record: dict) -> None:
    F = torch.nn.functional
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()  # sum up batch loss
            pred = output.argmax(dim=1, keepdim=True)  # index of the max log-probability
            correct += pred.eq(target.view_as(pred)).sum().item()
    test_loss /= len(test_loader.dataset)
    record["test_losses"].append(test_loss)
    record["correct"].append(correct)


def main(
    torch: Any,
    images: np.ndarray,
    labels: np.ndarray,
    dtype: Any = None,
    epochs: int = 2,
    batch_size: int = 32,
    n_train: int = 320,
    dropout: float = 0.0,
) -> dict[str, Any]:
    """Train for `epochs` epochs on the first `n_train` images ((N, 8, 8) in [0, 1]) and test on the rest
    after each; returns the first step's loss and gradients, every step's loss, each epoch's test loss,
    correct count and learning rate."""
    data = torch.utils.data
    device = torch.device("cpu")
    param_dtype = torch.float32 if dtype is None else dtype

    x = torch.from_numpy(images.reshape(-1, 1, 8, 8).copy()).to(param_dtype)
    x = (x - 0.5) / 0.5
    y = torch.from_numpy(labels.astype(np.int64))
    train_loader = data.DataLoader(data.TensorDataset(x[:n_train], y[:n_train]), batch_size=batch_size)
    test_loader = data.DataLoader(data.TensorDataset(x[n_train:], y[n_train:]), batch_size=100)

    model = build(torch, dropout).to(device)
    if dtype is not None:
        model = model.to(dtype)
    model.load_state_dict({k: torch.from_numpy(v).to(param_dtype) for k, v in initial_state().items()})
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)

    record: dict[str, Any] = {"losses": [], "test_losses": [], "correct": [], "lrs": []}
    for _epoch in range(1, epochs + 1):
        train(torch, model, device, train_loader, optimizer, record)
        test(torch, model, device, test_loader, record)
        scheduler.step()
        record["lrs"].append(optimizer.param_groups[0]["lr"])
    return record
