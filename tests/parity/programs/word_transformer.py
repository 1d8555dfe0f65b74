"""The word_language_model example's Transformer variant: a sinusoidal positional encoding kept as a
buffer, a subclass of nn.Transformer whose decoder is replaced by a Linear, its encoder run over a square
subsequent mask, and plain SGD with clipping as the LSTM's."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import record
from .word_lstm import batchify, corpus, get_batch


def build(torch: Any, ntoken: int, ninp: int, nhead: int, nhid: int, nlayers: int) -> Any:
    nn = torch.nn
    F = torch.nn.functional

    class PositionalEncoding(nn.Module):
        def __init__(self, d_model, dropout=0.1, max_len=64):
            super().__init__()
            self.dropout = nn.Dropout(p=dropout)
            pe = torch.zeros(max_len, d_model)
            position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
            div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
            pe[:, 0::2] = torch.sin(position * div_term)
            pe[:, 1::2] = torch.cos(position * div_term)
            pe = pe.unsqueeze(0).transpose(0, 1)
            self.register_buffer("pe", pe)

        def forward(self, x):
            x = x + self.pe[: x.size(0), :]
            return self.dropout(x)

    class TransformerModel(nn.Transformer):
        def __init__(self) -> None:
            super().__init__(
                d_model=ninp, nhead=nhead, dim_feedforward=nhid, num_encoder_layers=nlayers, dropout=0.0
            )
            self.model_type = "Transformer"
            self.src_mask = None
            self.pos_encoder = PositionalEncoding(ninp, 0.0)
            self.input_emb = nn.Embedding(ntoken, ninp)
            self.ninp = ninp
            self.decoder = nn.Linear(ninp, ntoken)
            initrange = 0.1
            nn.init.uniform_(self.input_emb.weight, -initrange, initrange)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -initrange, initrange)

        def forward(self, src, has_mask=True):
            if has_mask:
                if self.src_mask is None or self.src_mask.size(0) != len(src):
                    self.src_mask = nn.Transformer.generate_square_subsequent_mask(len(src))
            else:
                self.src_mask = None
            src = self.input_emb(src) * math.sqrt(self.ninp)
            src = self.pos_encoder(src)
            output = self.encoder(src, mask=self.src_mask)
            output = self.decoder(output)
            return F.log_softmax(output, dim=-1)

    return TransformerModel()


def main(torch: Any, saved: dict[str, np.ndarray] | None = None, epochs: int = 2) -> dict[str, Any]:
    nn = torch.nn
    ntoken, emsize, nhead, nhid, nlayers, bptt, bsz = 30, 16, 2, 32, 2, 8, 4
    torch.manual_seed(0)
    model = build(torch, ntoken, emsize, nhead, nhid, nlayers)
    if saved is not None:
        record.load(torch, model, saved)
    out: dict[str, Any] = {"state": record.state(model), "losses": []}

    ids = torch.from_numpy(corpus(180, ntoken, seed=3))
    train_data = batchify(torch, ids[:170], bsz)
    val_data = batchify(torch, ids[100:], 2)
    criterion = nn.NLLLoss()
    lr, clip = 1.0, 0.5

    for _epoch in range(epochs):
        model.train()
        for i in range(0, train_data.size(0) - 1, bptt):
            data, targets = get_batch(train_data, i, bptt)
            model.zero_grad()
            output = model(data).view(-1, ntoken)
            loss = criterion(output, targets)
            loss.backward()
            if "loss0" not in out:
                out["loss0"], out["grads0"] = loss.item(), record.grads(model)
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            out["losses"].append(loss.item())
        model.eval()
        with torch.no_grad():
            data, _ = get_batch(val_data, 0, bptt)
            out.setdefault("eval", []).append(model(data).numpy().copy())
        lr /= 4.0
    return out
