"""PyTorch's gcn example (Kipf and Welling's graph convolutional network) on a small random graph: two
GraphConv layers whose kernels are `nn.Parameter(torch.FloatTensor(in, out))` filled by xavier_normal_,
a symmetrically normalised adjacency D^-1/2 (A + I) D^-1/2, relu and dropout between, log_softmax,
nll_loss over the training nodes, Adam with weight decay (5e-2, not the example's 5e-4, so that it shows
in a few steps), accuracy over the validation and test nodes. The example's adjacency is a sparse COO
tensor (`torch.sparse.mm`), which verigrad has not: here it is dense (`torch.mm`). Dropout is 0: its
random masks are each framework's own."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import record

NODES, FEATURES, CLASSES = 24, 10, 3


def build(torch: Any) -> Any:
    nn = torch.nn
    F = torch.nn.functional

    class GraphConv(nn.Module):
        def __init__(self, input_dim, output_dim, use_bias=False):
            super(GraphConv, self).__init__()  # noqa: UP008 (as the example)
            self.kernel = nn.Parameter(torch.FloatTensor(input_dim, output_dim))
            nn.init.xavier_normal_(self.kernel)
            self.bias = None
            if use_bias:
                self.bias = nn.Parameter(torch.FloatTensor(output_dim))
                nn.init.zeros_(self.bias)

        def forward(self, input_tensor, adj_mat):
            support = torch.mm(input_tensor, self.kernel)
            output = torch.mm(adj_mat, support)
            if self.bias is not None:
                output = output + self.bias
            return output

    class GCN(nn.Module):
        def __init__(self, input_dim, hidden_dim, output_dim, use_bias=True, dropout_p=0.0):
            super(GCN, self).__init__()  # noqa: UP008 (as the example)
            self.gc1 = GraphConv(input_dim, hidden_dim, use_bias=use_bias)
            self.gc2 = GraphConv(hidden_dim, output_dim, use_bias=use_bias)
            self.dropout = nn.Dropout(dropout_p)

        def forward(self, input_tensor, adj_mat):
            x = self.gc1(input_tensor, adj_mat)
            x = F.relu(x)
            x = self.dropout(x)
            x = self.gc2(x, adj_mat)
            return F.log_softmax(x, dim=1)

    return GCN(FEATURES, 16, CLASSES)


def graph() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(features, edges [2, E] both ways, labels): nodes of a class share a feature pattern and link
    mostly within their class."""
    rng = np.random.default_rng(8)
    labels = rng.integers(0, CLASSES, NODES)
    centers = rng.standard_normal((CLASSES, FEATURES))
    features = (centers[labels] + rng.standard_normal((NODES, FEATURES)) > 0.5).astype(np.float32)
    pairs = rng.integers(0, NODES, (60, 2))
    pairs = pairs[(labels[pairs[:, 0]] == labels[pairs[:, 1]]) | (rng.random(60) < 0.2)]
    edges = np.concatenate([pairs, pairs[:, ::-1]]).T
    return features, edges, labels


def main(
    torch: Any, saved: dict[str, np.ndarray] | None = None, dtype: Any = None, epochs: int = 12
) -> dict[str, Any]:
    F = torch.nn.functional
    torch.manual_seed(0)
    features_np, edges_np, labels_np = graph()
    dt = dtype or torch.float32
    features = torch.from_numpy(features_np).to(dt)
    # the example's row normalisation of the features
    features = features / features.sum(1, keepdim=True).clamp(min=1)
    labels = torch.from_numpy(labels_np)
    adj = torch.zeros(NODES, NODES, dtype=dt)
    adj[torch.from_numpy(edges_np[0]), torch.from_numpy(edges_np[1])] = 1.0
    adj = adj + torch.eye(NODES, dtype=dt)
    adj = (adj > 0).to(dt)
    deg_inv_sqrt = adj.sum(1).pow(-0.5)
    deg_inv_sqrt[torch.isinf(deg_inv_sqrt)] = 0.0
    adj = deg_inv_sqrt.unsqueeze(1) * adj * deg_inv_sqrt.unsqueeze(0)
    idx = torch.arange(NODES)
    idx_train, idx_val, idx_test = idx[:12], idx[12:18], idx[18:]

    model = build(torch).to(dt)
    if saved is not None:
        record.load(torch, model, saved)
    out: dict[str, Any] = {"state": record.state(model), "losses": [], "val": [], "acc": []}
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05, weight_decay=5e-2)
    criterion = torch.nn.NLLLoss()

    def accuracy(output, labels):
        preds = output.argmax(dim=1).type_as(labels)
        correct = preds.eq(labels).double()
        return correct.sum() / len(labels)

    for epoch in range(epochs):
        model.train()
        optimizer.zero_grad()
        output = model(features, adj)
        loss = criterion(output[idx_train], labels[idx_train])
        loss.backward()
        if epoch == 0:
            out["loss0"], out["grads0"] = loss.item(), record.grads(model)
        optimizer.step()
        out["losses"].append(loss.item())
        model.eval()
        with torch.no_grad():
            output = model(features, adj)
            out["val"].append(F.nll_loss(output[idx_val], labels[idx_val]).item())
            out["acc"].append(accuracy(output[idx_test], labels[idx_test]).item())
    out["eval"] = [output.numpy().copy()]
    return out
