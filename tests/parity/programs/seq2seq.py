"""The seq2seq translation tutorial's layout on a toy task (reverse a sequence of tokens): a GRU encoder,
a GRU decoder with additive (Bahdanau) attention over the encoder outputs through torch.bmm, padding
masked out with masked_fill, teacher forcing chosen per batch by a fixed list, NLLLoss and two Adam
optimizers; greedy decoding in evaluation."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import record

SOS, PAD, VOCAB, MAX_LEN, HIDDEN = 0, 1, 12, 6, 16


def build(torch: Any) -> tuple[Any, Any]:
    nn = torch.nn
    F = torch.nn.functional

    class EncoderRNN(nn.Module):
        def __init__(self, input_size, hidden_size):
            super().__init__()
            self.embedding = nn.Embedding(input_size, hidden_size)
            self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)
            self.dropout = nn.Dropout(0.0)

        def forward(self, input):
            embedded = self.dropout(self.embedding(input))
            output, hidden = self.gru(embedded)
            return output, hidden

    class BahdanauAttention(nn.Module):
        def __init__(self, hidden_size):
            super().__init__()
            self.Wa = nn.Linear(hidden_size, hidden_size)
            self.Ua = nn.Linear(hidden_size, hidden_size)
            self.Va = nn.Linear(hidden_size, 1)

        def forward(self, query, keys, mask):
            scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys)))
            scores = scores.squeeze(2).unsqueeze(1)
            scores = scores.masked_fill(mask.unsqueeze(1), float("-inf"))
            weights = F.softmax(scores, dim=-1)
            context = torch.bmm(weights, keys)
            return context, weights

    class AttnDecoderRNN(nn.Module):
        def __init__(self, hidden_size, output_size):
            super().__init__()
            self.embedding = nn.Embedding(output_size, hidden_size)
            self.attention = BahdanauAttention(hidden_size)
            self.gru = nn.GRU(2 * hidden_size, hidden_size, batch_first=True)
            self.out = nn.Linear(hidden_size, output_size)

        def forward(self, encoder_outputs, encoder_hidden, mask, target_tensor=None):
            batch_size = encoder_outputs.size(0)
            decoder_input = torch.empty(batch_size, 1, dtype=torch.long).fill_(SOS)
            decoder_hidden = encoder_hidden
            decoder_outputs, attentions = [], []
            for i in range(MAX_LEN):
                decoder_output, decoder_hidden, attn_weights = self.forward_step(
                    decoder_input, decoder_hidden, encoder_outputs, mask
                )
                decoder_outputs.append(decoder_output)
                attentions.append(attn_weights)
                if target_tensor is not None:
                    decoder_input = target_tensor[:, i].unsqueeze(1)  # teacher forcing
                else:
                    _, topi = decoder_output.topk(1)
                    decoder_input = topi.squeeze(-1).detach()
            decoder_outputs = torch.cat(decoder_outputs, dim=1)
            decoder_outputs = F.log_softmax(decoder_outputs, dim=-1)
            return decoder_outputs, decoder_hidden, torch.cat(attentions, dim=1)

        def forward_step(self, input, hidden, encoder_outputs, mask):
            embedded = self.embedding(input)
            query = hidden.permute(1, 0, 2)
            context, attn_weights = self.attention(query, encoder_outputs, mask)
            input_gru = torch.cat((embedded, context), dim=2)
            output, hidden = self.gru(input_gru, hidden)
            return self.out(output), hidden, attn_weights

    return EncoderRNN(VOCAB, HIDDEN), AttnDecoderRNN(HIDDEN, VOCAB)


def pairs(n: int, seed: int = 9) -> tuple[np.ndarray, np.ndarray]:
    """Sources of 3 to MAX_LEN tokens padded with PAD, and their reversals as targets."""
    rng = np.random.default_rng(seed)
    src = np.full((n, MAX_LEN), PAD, dtype=np.int64)
    tgt = np.full((n, MAX_LEN), PAD, dtype=np.int64)
    for i in range(n):
        k = rng.integers(3, MAX_LEN + 1)
        words = rng.integers(2, VOCAB, k)
        src[i, :k] = words
        tgt[i, :k] = words[::-1]
    return src, tgt


def main(
    torch: Any, saved: dict[str, np.ndarray] | None = None, epochs: int = 3, dtype: Any = None
) -> dict[str, Any]:
    """Train for `epochs` passes of 4 batches (in f32, or `dtype`); returns the initial state, the first
    step's loss and gradients, every loss, and the greedy decoding of 8 held-out sources."""
    nn = torch.nn
    torch.manual_seed(0)
    encoder, decoder = build(torch)
    if dtype is not None:
        encoder, decoder = encoder.to(dtype), decoder.to(dtype)
    if saved is not None:
        record.load(torch, encoder, {k[4:]: v for k, v in saved.items() if k.startswith("enc.")})
        record.load(torch, decoder, {k[4:]: v for k, v in saved.items() if k.startswith("dec.")})
    state = {"enc." + k: v for k, v in record.state(encoder).items()}
    state.update({"dec." + k: v for k, v in record.state(decoder).items()})
    out: dict[str, Any] = {"state": state, "losses": []}

    src, tgt = pairs(40)
    data = torch.utils.data
    loader = data.DataLoader(data.TensorDataset(torch.from_numpy(src[:32]), torch.from_numpy(tgt[:32])), 8)
    encoder_optimizer = torch.optim.Adam(encoder.parameters(), lr=0.01)
    decoder_optimizer = torch.optim.Adam(decoder.parameters(), lr=0.01)
    criterion = nn.NLLLoss(ignore_index=PAD)
    teacher_forcing = [True, False, True, True]  # the tutorial draws random.random() < ratio
    step = 0
    for _epoch in range(epochs):
        for input_tensor, target_tensor in loader:
            encoder_optimizer.zero_grad()
            decoder_optimizer.zero_grad()
            mask = input_tensor == PAD
            encoder_outputs, encoder_hidden = encoder(input_tensor)
            forced = target_tensor if teacher_forcing[step % len(teacher_forcing)] else None
            decoder_outputs, _, _ = decoder(encoder_outputs, encoder_hidden, mask, forced)
            loss = criterion(decoder_outputs.view(-1, decoder_outputs.size(-1)), target_tensor.view(-1))
            loss.backward()
            if "loss0" not in out:
                out["loss0"] = loss.item()
                out["grads0"] = {"enc." + k: v for k, v in record.grads(encoder).items()}
                out["grads0"].update({"dec." + k: v for k, v in record.grads(decoder).items()})
            encoder_optimizer.step()
            decoder_optimizer.step()
            out["losses"].append(loss.item())
            step += 1
    encoder.eval()
    decoder.eval()
    with torch.no_grad():
        input_tensor = torch.from_numpy(src[32:])
        encoder_outputs, encoder_hidden = encoder(input_tensor)
        decoder_outputs, _, attentions = decoder(encoder_outputs, encoder_hidden, input_tensor == PAD)
        _, topi = decoder_outputs.topk(1)
        out["decoded"] = topi.squeeze(-1).tolist()
    out["eval"] = [decoder_outputs.numpy().copy(), attentions.numpy().copy()]
    return out
