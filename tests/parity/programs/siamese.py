"""A siamese network as PyTorch's siamese_network example and metric-learning tutorials write one: one
CNN embeds both images of a pair; a contrastive loss on F.pairwise_distance, a cosine-similarity head
scored with BCEWithLogitsLoss, and nn.TripletMarginLoss on (anchor, positive, negative) triplets;
SGD with momentum under StepLR; evaluation by distances and similarities."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import record
from .resnet import dataset


def build(torch: Any) -> Any:
    nn = torch.nn
    F = torch.nn.functional

    class SiameseNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            self.cnn = nn.Sequential(
                nn.Conv2d(3, 8, kernel_size=3, padding=1),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(2, stride=2),
                nn.Conv2d(8, 16, kernel_size=3, padding=1),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(2, stride=2),
            )
            # no bias at the end: it cancels in every distance
            self.fc = nn.Sequential(nn.Linear(64, 16), nn.ReLU(inplace=True), nn.Linear(16, 8, bias=False))
            self.scale = nn.Parameter(torch.tensor(5.0))

        def forward_once(self, x):
            output = self.cnn(x)
            output = output.view(output.size()[0], -1)
            return self.fc(output)

        def forward(self, input1, input2):
            output1 = self.forward_once(input1)
            output2 = self.forward_once(input2)
            return output1, output2

        def similarity(self, output1, output2):
            return self.scale * F.cosine_similarity(output1, output2, dim=1)

    return SiameseNetwork()


def contrastive_loss(torch: Any, output1, output2, label, margin: float = 2.0):
    """label 1 for a pair of the same class: pulls it together, pushes others beyond the margin."""
    F = torch.nn.functional
    euclidean_distance = F.pairwise_distance(output1, output2, keepdim=True)
    return torch.mean(
        label * torch.pow(euclidean_distance, 2)
        + (1 - label) * torch.pow(torch.clamp(margin - euclidean_distance, min=0.0), 2)
    )


def main(
    torch: Any, saved: dict[str, np.ndarray] | None = None, steps: int = 12, dtype: Any = None
) -> dict[str, Any]:
    """Train for `steps` steps on pairs and triplets of striped images (in f32, or `dtype`); returns the
    initial state, the first step's loss and gradients, every loss and the held-out pairs' distances."""
    nn = torch.nn
    torch.manual_seed(0)
    model = build(torch)
    dtype = dtype or torch.float32
    model.to(dtype)
    if saved is not None:
        record.load(torch, model, saved)
    out: dict[str, Any] = {"state": record.state(model), "losses": [], "lrs": []}
    x, y = dataset(96, seed=12)
    images = torch.from_numpy(x).to(dtype)
    rng = np.random.default_rng(13)
    by_class = [np.flatnonzero(y == c) for c in range(4)]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=4, gamma=0.5)
    bce = nn.BCEWithLogitsLoss()
    triplet = nn.TripletMarginLoss(margin=1.0, p=2)
    for step in range(steps):
        anchor = rng.integers(0, 80, 8)
        positive = np.array([rng.choice(by_class[y[a]][by_class[y[a]] < 80]) for a in anchor])
        negative = np.array([rng.choice(np.flatnonzero((y != y[a])[:80])) for a in anchor])
        other = np.where(rng.random(8) < 0.5, positive, negative)
        label = torch.from_numpy(y[anchor] == y[other]).to(dtype).view(-1, 1)

        model.train()
        optimizer.zero_grad()
        output1, output2 = model(images[anchor], images[other])
        loss = contrastive_loss(torch, output1, output2, label)
        loss = loss + bce(model.similarity(output1, output2), label.view(-1))
        a, p, n = (model.forward_once(images[i]) for i in (anchor, positive, negative))
        loss = loss + triplet(a, p, n)
        loss.backward()
        if step == 0:
            out["loss0"], out["grads0"] = loss.item(), record.grads(model)
        optimizer.step()
        scheduler.step()
        out["losses"].append(loss.item())
        out["lrs"].append(scheduler.get_last_lr()[0])

    model.eval()
    with torch.no_grad():
        test = images[80:]
        e1, e2 = model(test[:8], test[8:])
        distances = torch.nn.functional.pairwise_distance(e1, e2)
        similar = torch.nn.functional.cosine_similarity(e1.unsqueeze(1), e2.unsqueeze(0), dim=-1)
        out["eval"] = [distances.numpy().copy(), similar.numpy().copy(), torch.cdist(e1, e2).numpy().copy()]
    return out
