"""The CNN of PyTorch's "Training a classifier" tutorial (CIFAR-10) on random 32x32 images: conv, pool,
conv, three linear layers, torch.flatten, CrossEntropyLoss, SGD with momentum, the running-loss log,
then the accuracy pass with torch.max(outputs.data, 1) under torch.no_grad()."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import record


def build(torch: Any) -> Any:
    nn = torch.nn
    F = torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 6, 5)
            self.pool = nn.MaxPool2d(2, 2)
            self.conv2 = nn.Conv2d(6, 16, 5)
            self.fc1 = nn.Linear(16 * 5 * 5, 120)
            self.fc2 = nn.Linear(120, 84)
            self.fc3 = nn.Linear(84, 10)

        def forward(self, x):
            x = self.pool(F.relu(self.conv1(x)))
            x = self.pool(F.relu(self.conv2(x)))
            x = torch.flatten(x, 1)  # flatten all dimensions except batch
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            x = self.fc3(x)
            return x

    return Net()


def main(torch: Any, saved: dict[str, np.ndarray] | None = None, dtype: Any = None) -> dict[str, Any]:
    rng = np.random.default_rng(4)
    images = rng.standard_normal((10, 4, 3, 32, 32)).astype(np.float32)
    labels = rng.integers(0, 10, (10, 4))
    torch.manual_seed(0)
    net = build(torch)
    if dtype is not None:
        net = net.to(dtype)
    if saved is not None:
        record.load(torch, net, saved)
    out: dict[str, Any] = {"state": record.state(net), "losses": [], "log": []}
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.001, momentum=0.9)
    trainloader = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in zip(images, labels)]

    for _epoch in range(2):  # loop over the dataset multiple times
        running_loss = 0.0
        for i, data in enumerate(trainloader, 0):
            inputs, labels_ = data
            if dtype is not None:
                inputs = inputs.to(dtype)
            optimizer.zero_grad()
            outputs = net(inputs)
            loss = criterion(outputs, labels_)
            loss.backward()
            if "loss0" not in out:
                out["loss0"], out["grads0"] = loss.item(), record.grads(net)
            optimizer.step()
            running_loss += loss.item()
            out["losses"].append(loss.item())
            if i % 5 == 4:
                out.setdefault("running", []).append(running_loss / 5)
                running_loss = 0.0

    correct = 0
    total = 0
    out["eval"] = []
    with torch.no_grad():
        for data in trainloader:
            images_, labels_ = data
            if dtype is not None:
                images_ = images_.to(dtype)
            outputs = net(images_)
            _, predicted = torch.max(outputs.data, 1)
            total += labels_.size(0)
            correct += (predicted == labels_).sum().item()
            out["eval"].append(outputs.numpy().copy())
    out["acc"] = [100 * correct // total]
    return out
