"""An LSTM text classifier in the style of the popular sentiment-analysis tutorials: an Embedding with a
padding index, a 2-layer bidirectional LSTM over packed padded sequences (pack_padded_sequence with
enforce_sorted=False), the last layer's two final hidden states concatenated, BCEWithLogitsLoss, Adam,
and binary accuracy from torch.round(torch.sigmoid(...))."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import record


def build(torch: Any, vocab_size: int, embedding_dim: int, hidden_dim: int, pad_idx: int) -> Any:
    nn = torch.nn

    class RNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=pad_idx)
            self.rnn = nn.LSTM(
                embedding_dim, hidden_dim, num_layers=2, bidirectional=True, dropout=0.0, batch_first=True
            )
            self.fc = nn.Linear(hidden_dim * 2, 1)
            self.dropout = nn.Dropout(0.0)

        def forward(self, text, text_lengths):
            embedded = self.dropout(self.embedding(text))
            packed_embedded = nn.utils.rnn.pack_padded_sequence(
                embedded, text_lengths, batch_first=True, enforce_sorted=False
            )
            packed_output, (hidden, _cell) = self.rnn(packed_embedded)
            output, _output_lengths = nn.utils.rnn.pad_packed_sequence(packed_output, batch_first=True)
            hidden = self.dropout(torch.cat((hidden[-2, :, :], hidden[-1, :, :]), dim=1))
            return self.fc(hidden), output

    return RNN()


def binary_accuracy(torch: Any, preds: Any, y: Any) -> Any:
    rounded_preds = torch.round(torch.sigmoid(preds))
    correct = (rounded_preds == y).float()
    acc = correct.sum() / len(correct)
    return acc


def main(torch: Any, saved: dict[str, np.ndarray] | None = None, dtype: Any = None) -> dict[str, Any]:
    rng = np.random.default_rng(9)
    vocab, pad_idx, batch, max_len = 40, 1, 5, 9
    batches = []
    for _ in range(6):
        lengths = rng.integers(2, max_len + 1, batch)
        text = np.full((batch, max_len), pad_idx)
        for row, n in enumerate(lengths):
            text[row, :n] = rng.integers(2, vocab, n)
        label = (text[:, 0] % 2).astype(np.float32)  # learnable from the first token
        batches.append((text, lengths, label))
    torch.manual_seed(0)
    model = build(torch, vocab, 12, 10, pad_idx)
    if dtype is not None:
        model = model.to(dtype)
    if saved is not None:
        record.load(torch, model, saved)
    out: dict[str, Any] = {"state": record.state(model), "losses": [], "acc": []}
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    criterion = torch.nn.BCEWithLogitsLoss()
    for _epoch in range(2):
        model.train()
        for text, lengths, label in batches:
            optimizer.zero_grad()
            predictions, _ = model(torch.from_numpy(text), torch.from_numpy(lengths))
            predictions = predictions.squeeze(1)
            target = torch.from_numpy(label) if dtype is None else torch.from_numpy(label).to(dtype)
            loss = criterion(predictions, target)
            acc = binary_accuracy(torch, predictions, target)
            loss.backward()
            if "loss0" not in out:
                out["loss0"], out["grads0"] = loss.item(), record.grads(model)
            optimizer.step()
            out["losses"].append(loss.item())
            out["acc"].append(acc.item())
    model.eval()
    out["eval"] = []
    with torch.no_grad():
        for text, lengths, _ in batches[:2]:
            predictions, output = model(torch.from_numpy(text), torch.from_numpy(lengths))
            out["eval"] += [predictions.numpy().copy(), output.numpy().copy()]
    return out
