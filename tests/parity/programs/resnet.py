"""A small ResNet as the torchvision/CIFAR tutorials write one: BasicBlocks (conv, batch norm, a
shortcut with a 1x1 convolution where the shape changes) in nn.Sequential stages, AdaptiveAvgPool2d,
SGD with momentum, Nesterov and weight decay under CosineAnnealingLR, train()/eval() and an accuracy
measured under no_grad with argmax."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import record


def build(torch: Any, num_classes: int = 4) -> Any:
    nn = torch.nn
    F = torch.nn.functional

    class BasicBlock(nn.Module):
        expansion = 1

        def __init__(self, in_planes, planes, stride=1):
            super().__init__()
            self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.shortcut = nn.Sequential()
            if stride != 1 or in_planes != self.expansion * planes:
                self.shortcut = nn.Sequential(
                    nn.Conv2d(in_planes, self.expansion * planes, kernel_size=1, stride=stride, bias=False),
                    nn.BatchNorm2d(self.expansion * planes),
                )

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            out += self.shortcut(x)
            out = F.relu(out)
            return out

    class ResNet(nn.Module):
        def __init__(self, block, num_blocks, num_classes):
            super().__init__()
            self.in_planes = 8
            self.conv1 = nn.Conv2d(3, 8, kernel_size=3, stride=1, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(8)
            self.layer1 = self._make_layer(block, 8, num_blocks[0], stride=1)
            self.layer2 = self._make_layer(block, 16, num_blocks[1], stride=2)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(16 * block.expansion, num_classes)
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)

        def _make_layer(self, block, planes, num_blocks, stride):
            strides = [stride] + [1] * (num_blocks - 1)
            layers = []
            for stride in strides:
                layers.append(block(self.in_planes, planes, stride))
                self.in_planes = planes * block.expansion
            return nn.Sequential(*layers)

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.layer1(out)
            out = self.layer2(out)
            out = self.avgpool(out)
            out = torch.flatten(out, 1)
            return self.fc(out)

    return ResNet(BasicBlock, [1, 2], num_classes)


def dataset(n: int, seed: int = 6) -> tuple[np.ndarray, np.ndarray]:
    """Images whose class is the direction of their stripes, with noise."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, n)
    yy, xx = np.mgrid[0:8, 0:8]
    angle = labels * np.pi / 4
    u = np.cos(angle)[:, None, None] * xx + np.sin(angle)[:, None, None] * yy
    x = np.sin(1.5 * u)[:, None] + 0.3 * rng.standard_normal((n, 3, 8, 8))
    return x.astype(np.float32), labels.astype(np.int64)


def main(torch: Any, saved: dict[str, np.ndarray] | None = None, epochs: int = 3) -> dict[str, Any]:
    nn = torch.nn
    torch.manual_seed(0)
    net = build(torch)
    if saved is not None:
        record.load(torch, net, saved)
    out: dict[str, Any] = {"state": record.state(net), "losses": [], "acc": [], "lrs": []}
    x, y = dataset(80)
    data = torch.utils.data
    trainloader = data.DataLoader(data.TensorDataset(torch.from_numpy(x[:48]), torch.from_numpy(y[:48])), 16)
    testloader = data.DataLoader(data.TensorDataset(torch.from_numpy(x[48:]), torch.from_numpy(y[48:])), 16)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4, nesterov=True)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
    test_outputs = []
    for _epoch in range(epochs):
        net.train()
        for inputs, targets in trainloader:
            optimizer.zero_grad()
            outputs = net(inputs)
            loss = criterion(outputs, targets)
            loss.backward()
            if "loss0" not in out:
                out["loss0"], out["grads0"] = loss.item(), record.grads(net)
            optimizer.step()
            out["losses"].append(loss.item())
        net.eval()
        test_loss, correct, total = 0.0, 0, 0
        with torch.no_grad():
            for inputs, targets in testloader:
                outputs = net(inputs)
                test_loss += criterion(outputs, targets).item()
                predicted = outputs.argmax(1)
                total += targets.size(0)
                correct += predicted.eq(targets).sum().item()
                test_outputs.append(outputs.numpy().copy())
        out["losses"].append(test_loss / len(testloader))
        out["acc"].append(100.0 * correct / total)
        scheduler.step()
        out["lrs"].append(scheduler.get_last_lr()[0])
    out["eval"] = test_outputs
    out["running"] = {k: v.numpy().copy() for k, v in net.state_dict().items() if "running" in k}
    return out
