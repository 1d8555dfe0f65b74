"""A character-level language model as the char-RNN tutorials write one: lines of different lengths
sorted by nothing, padded by a collate_fn and packed (`pack_padded_sequence(enforce_sorted=False)`) into
a two-layer GRU with dropout between layers and an initial state, unpacked with `pad_packed_sequence`
to a fixed length; an Embedding with a padding index and its weight tied to nothing, cross-entropy with
`ignore_index` on the padding, clip_grad_norm_ with the infinity norm, RMSprop (centered, momentum),
CosineAnnealingWarmRestarts stepped with fractional epochs, and greedy generation from a prompt with a
temperature under no_grad."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import record

TEXT = (
    "the quick brown fox jumps over the lazy dog\n"
    "pack my box with five dozen liquor jugs\n"
    "how vexingly quick daft zebras jump\n"
    "sphinx of black quartz judge my vow\n"
    "the five boxing wizards jump quickly\n"
    "a quick movement of the enemy will jeopardize six gunboats\n"
)
PAD = 0
CHARS = sorted(set(TEXT) - {"\n"})
INDEX = {c: i + 1 for i, c in enumerate(CHARS)}  # 0 is the padding
VOCAB, HIDDEN = len(CHARS) + 1, 24


def lines(length: int = 14) -> list[np.ndarray]:
    """Pieces of the text's lines, 5 to `length` characters each, as indices."""
    out = []
    for k, line in enumerate(TEXT.split("\n")[:-1]):
        for start in range(0, len(line) - 5, 9):
            piece = line[start : start + 5 + (start + k) % (length - 4)]
            out.append(np.array([INDEX[c] for c in piece], dtype=np.int64))
    return out


def build(torch: Any) -> Any:
    nn = torch.nn

    class CharRNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(VOCAB, 16, padding_idx=PAD)
            self.rnn = nn.GRU(16, HIDDEN, num_layers=2, batch_first=True, dropout=0.2)
            self.h0 = nn.Parameter(torch.zeros(2, 1, HIDDEN))
            self.out = nn.Linear(HIDDEN, VOCAB)

        def forward(self, ids, lengths, hidden=None, total_length=None):
            packed = nn.utils.rnn.pack_padded_sequence(
                self.embed(ids), lengths, batch_first=True, enforce_sorted=False
            )
            if hidden is None:
                hidden = self.h0.expand(-1, ids.size(0), -1).contiguous()
            output, hidden = self.rnn(packed, hidden)
            output, _ = nn.utils.rnn.pad_packed_sequence(output, batch_first=True, total_length=total_length)
            return self.out(output), hidden

    return CharRNN()


def generate(torch: Any, model: Any, prompt: str, steps: int, temperature: float) -> str:
    ids = torch.tensor([[INDEX[c] for c in prompt]])
    logits, hidden = model(ids, torch.tensor([len(prompt)]))
    text = prompt
    for _ in range(steps):
        nxt = int((logits[0, -1] / temperature).softmax(-1).argmax())
        text += CHARS[nxt - 1] if nxt else "_"
        logits, hidden = model(torch.tensor([[max(nxt, 1)]]), torch.tensor([1]), hidden)
    return text


def main(
    torch: Any, saved: dict[str, np.ndarray] | None = None, epochs: int = 4, dtype: Any = None
) -> dict[str, Any]:
    """Train for `epochs` passes (in f32, or `dtype`); returns the initial state, the first step's loss and
    gradients, every loss, the rates, held-out logits and a generated line."""
    nn, F, data = torch.nn, torch.nn.functional, torch.utils.data
    torch.manual_seed(0)
    model = build(torch).to(dtype or torch.float32)
    if saved is not None:
        record.load(torch, model, saved)
    out: dict[str, Any] = {"state": record.state(model), "losses": [], "lrs": [], "eval": [], "val": []}

    pieces = [torch.from_numpy(p) for p in lines()]

    def collate(batch):
        inputs = nn.utils.rnn.pad_sequence([b[:-1] for b in batch], batch_first=True, padding_value=PAD)
        targets = nn.utils.rnn.pad_sequence([b[1:] for b in batch], batch_first=True, padding_value=PAD)
        return inputs, targets, torch.tensor([len(b) - 1 for b in batch])

    train = data.DataLoader(pieces[:-6], batch_size=6, collate_fn=collate, drop_last=True)
    held = collate(pieces[-6:])
    opt = torch.optim.RMSprop(model.parameters(), lr=4e-3, alpha=0.9, momentum=0.5, centered=True)
    schedule = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2, eta_min=1e-4)
    batches = len(train)
    for epoch in range(epochs):
        model.train(False)  # the GRU's dropout between layers draws from each library's own generator
        for i, (inputs, targets, lengths) in enumerate(train):
            opt.zero_grad()
            logits, _ = model(inputs, lengths, total_length=inputs.size(1))
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1), ignore_index=PAD)
            loss.backward()
            if "loss0" not in out:
                out["loss0"], out["grads0"] = loss.item(), record.grads(model)
            nn.utils.clip_grad_norm_(model.parameters(), 1.0, norm_type="inf")
            opt.step()
            schedule.step(epoch + i / batches)
            out["losses"].append(loss.item())
            out["lrs"].append(opt.param_groups[0]["lr"])
        model.eval()
        with torch.no_grad():
            inputs, targets, lengths = held
            logits, _ = model(inputs, lengths, total_length=16)
            out["eval"].append(logits.numpy().copy())
            out["val"].append(F.cross_entropy(logits[:, : targets.size(1)].transpose(1, 2), targets).item())
    with torch.no_grad():
        out["decoded"] = [generate(torch, model, "the ", 12, 0.8), generate(torch, model, "qu", 8, 1.5)]
    return out
