"""A word-level language model in the layout of PyTorch's word_language_model example: an embedding, a
2-layer LSTM, a decoder tied to the embedding, truncated backpropagation through time with the hidden
state repackaged between batches, gradient clipping and SGD with the learning rate lowered by hand."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import record


def build(torch: Any, ntoken: int, ninp: int, nhid: int, nlayers: int) -> Any:
    nn = torch.nn

    class RNNModel(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.drop = nn.Dropout(0.0)
            self.encoder = nn.Embedding(ntoken, ninp)
            self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=0.0)
            self.decoder = nn.Linear(nhid, ntoken)
            self.decoder.weight = self.encoder.weight  # tied: ninp == nhid
            self.nlayers, self.nhid, self.ntoken = nlayers, nhid, ntoken
            initrange = 0.1
            nn.init.uniform_(self.encoder.weight, -initrange, initrange)
            nn.init.zeros_(self.decoder.bias)

        def forward(self, input, hidden):
            emb = self.drop(self.encoder(input))
            output, hidden = self.rnn(emb, hidden)
            output = self.drop(output)
            decoded = self.decoder(output).view(-1, self.ntoken)
            return torch.nn.functional.log_softmax(decoded, dim=1), hidden

        def init_hidden(self, bsz):
            weight = next(self.parameters())
            return (
                weight.new_zeros(self.nlayers, bsz, self.nhid),
                weight.new_zeros(self.nlayers, bsz, self.nhid),
            )

    return RNNModel()


def repackage_hidden(h):
    """Wraps hidden states in new tensors, to detach them from their history."""
    if isinstance(h, tuple):
        return tuple(repackage_hidden(v) for v in h)
    return h.detach()


def batchify(torch: Any, data: Any, bsz: int) -> Any:
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous()


def get_batch(source: Any, i: int, bptt: int) -> tuple[Any, Any]:
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i : i + seq_len]
    target = source[i + 1 : i + 1 + seq_len].view(-1)
    return data, target


def corpus(n: int, ntoken: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    stream = np.resize(rng.integers(0, ntoken, size=11), n)
    noise = rng.random(n) < 0.15
    stream[noise] = rng.integers(0, ntoken, size=int(noise.sum()))
    return stream.astype(np.int64)


def main(torch: Any, saved: dict[str, np.ndarray] | None = None, epochs: int = 2) -> dict[str, Any]:
    """Train for `epochs` passes over a small corpus (7 batches each) from the PyTorch run's initial
    state; returns it, the first step's loss and gradients, every loss and the evaluation loss."""
    nn = torch.nn
    ntoken, emsize, nlayers, bptt, bsz = 30, 16, 2, 6, 4
    torch.manual_seed(0)
    model = build(torch, ntoken, emsize, emsize, nlayers)
    if saved is not None:
        record.load(torch, model, saved)
        # after a load the example compacts the weights into cuDNN's buffer (nothing to do on the CPU)
        model.rnn.flatten_parameters()
    out: dict[str, Any] = {"state": record.state(model), "losses": []}

    ids = torch.from_numpy(corpus(180, ntoken))
    train_data = batchify(torch, ids[:170], bsz)
    val_data = batchify(torch, ids[100:], 2)
    criterion = nn.NLLLoss()
    lr, clip = 5.0, 0.25

    def evaluate(data_source):
        model.eval()
        total_loss = 0.0
        hidden = model.init_hidden(2)
        with torch.no_grad():
            for i in range(0, data_source.size(0) - 1, bptt):
                data, targets = get_batch(data_source, i, bptt)
                output, hidden = model(data, hidden)
                hidden = repackage_hidden(hidden)
                total_loss += len(data) * criterion(output, targets).item()
        out.setdefault("eval", []).append(output.numpy().copy())
        return total_loss / (len(data_source) - 1)

    for _epoch in range(epochs):
        model.train()
        hidden = model.init_hidden(bsz)
        for i in range(0, train_data.size(0) - 1, bptt):
            data, targets = get_batch(train_data, i, bptt)
            hidden = repackage_hidden(hidden)
            model.zero_grad()
            output, hidden = model(data, hidden)
            loss = criterion(output, targets)
            loss.backward()
            if "loss0" not in out:
                out["loss0"], out["grads0"] = loss.item(), record.grads(model)
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            out["losses"].append(loss.item())
        val_loss = evaluate(val_data)
        out.setdefault("val", []).append(val_loss)
        out.setdefault("log", []).append(
            f"| end of epoch {_epoch + 1:3d} | valid loss {val_loss:5.2f} | ppl {math.exp(val_loss):8.2f}"
            f" | last loss {loss:5.3f}"  # a 0-d tensor formats as its value
        )
        lr /= 4.0
    return out
