"""PyTorch's "Language Translation with nn.Transformer" tutorial (pytorch/examples' language_translation)
on random token sequences: token embeddings scaled by sqrt(emb_size), a sinusoidal positional encoding
buffer, nn.Transformer given every mask the tutorial makes (a bool all-False source mask, a float causal
target mask built with masked_fill, bool padding masks for the source, the target and the memory),
cross-entropy ignoring the padding, Adam, an evaluation loss in eval mode, and greedy decoding through
model.encode / model.decode with the causal mask cast to bool. Dropout is 0: its random masks are each
framework's own."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import record

PAD_IDX, BOS_IDX, EOS_IDX, VOCAB, EMB, NHEAD, FFN = 1, 2, 3, 17, 16, 2, 32


def build(torch: Any) -> Any:
    nn = torch.nn

    class PositionalEncoding(nn.Module):
        def __init__(self, emb_size: int, dropout: float, maxlen: int = 64):
            super(PositionalEncoding, self).__init__()  # noqa: UP008 (as the tutorial)
            den = torch.exp(-torch.arange(0, emb_size, 2) * math.log(10000) / emb_size)
            pos = torch.arange(0, maxlen).reshape(maxlen, 1)
            pos_embedding = torch.zeros((maxlen, emb_size))
            pos_embedding[:, 0::2] = torch.sin(pos * den)
            pos_embedding[:, 1::2] = torch.cos(pos * den)
            pos_embedding = pos_embedding.unsqueeze(-2)

            self.dropout = nn.Dropout(dropout)
            self.register_buffer("pos_embedding", pos_embedding)

        def forward(self, token_embedding):
            return self.dropout(token_embedding + self.pos_embedding[: token_embedding.size(0), :])

    class TokenEmbedding(nn.Module):
        def __init__(self, vocab_size: int, emb_size):
            super(TokenEmbedding, self).__init__()  # noqa: UP008 (as the tutorial)
            self.embedding = nn.Embedding(vocab_size, emb_size)
            self.emb_size = emb_size

        def forward(self, tokens):
            return self.embedding(tokens.long()) * math.sqrt(self.emb_size)

    class Seq2SeqTransformer(nn.Module):
        def __init__(self, num_encoder_layers, num_decoder_layers, emb_size, nhead, src_vocab_size,
                     tgt_vocab_size, dim_feedforward=512, dropout=0.1):  # fmt: skip
            super(Seq2SeqTransformer, self).__init__()  # noqa: UP008 (as the tutorial)
            self.transformer = nn.Transformer(
                d_model=emb_size,
                nhead=nhead,
                num_encoder_layers=num_encoder_layers,
                num_decoder_layers=num_decoder_layers,
                dim_feedforward=dim_feedforward,
                dropout=dropout,
            )
            self.generator = nn.Linear(emb_size, tgt_vocab_size)
            self.src_tok_emb = TokenEmbedding(src_vocab_size, emb_size)
            self.tgt_tok_emb = TokenEmbedding(tgt_vocab_size, emb_size)
            self.positional_encoding = PositionalEncoding(emb_size, dropout=dropout)

        def forward(self, src, trg, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask,
                    memory_key_padding_mask):  # fmt: skip
            src_emb = self.positional_encoding(self.src_tok_emb(src))
            tgt_emb = self.positional_encoding(self.tgt_tok_emb(trg))
            outs = self.transformer(src_emb, tgt_emb, src_mask, tgt_mask, None,
                                    src_padding_mask, tgt_padding_mask, memory_key_padding_mask)  # fmt: skip
            return self.generator(outs)

        def encode(self, src, src_mask):
            return self.transformer.encoder(self.positional_encoding(self.src_tok_emb(src)), src_mask)

        def decode(self, tgt, memory, tgt_mask):
            return self.transformer.decoder(self.positional_encoding(self.tgt_tok_emb(tgt)), memory, tgt_mask)

    model = Seq2SeqTransformer(2, 2, EMB, NHEAD, VOCAB, VOCAB, FFN, dropout=0.0)
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    return model


def sentences(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(source, target) [T, n] of BOS, tokens, EOS and padding: the target is the source reversed."""
    rng = np.random.default_rng(seed)
    src = np.full((9, n), PAD_IDX)
    tgt = np.full((9, n), PAD_IDX)
    for j in range(n):
        words = rng.integers(4, VOCAB, rng.integers(2, 7))
        src[: len(words) + 2, j] = [BOS_IDX, *words, EOS_IDX]
        tgt[: len(words) + 2, j] = [BOS_IDX, *words[::-1], EOS_IDX]
    return src, tgt


def main(
    torch: Any, saved: dict[str, np.ndarray] | None = None, dtype: Any = None, steps: int = 10
) -> dict[str, Any]:
    torch.manual_seed(0)

    def generate_square_subsequent_mask(sz):
        mask = (torch.triu(torch.ones((sz, sz))) == 1).transpose(0, 1)
        mask = mask.float().masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, float(0.0))  # noqa: UP018 (as the tutorial)
        return mask.to(dtype or torch.float32)

    def create_mask(src, tgt):
        src_seq_len = src.shape[0]
        tgt_seq_len = tgt.shape[0]

        tgt_mask = generate_square_subsequent_mask(tgt_seq_len)
        src_mask = torch.zeros((src_seq_len, src_seq_len)).type(torch.bool)

        src_padding_mask = (src == PAD_IDX).transpose(0, 1)
        tgt_padding_mask = (tgt == PAD_IDX).transpose(0, 1)
        return src_mask, tgt_mask, src_padding_mask, tgt_padding_mask

    model = build(torch).to(dtype or torch.float32)
    if saved is not None:
        record.load(torch, model, saved)
    out: dict[str, Any] = {"state": record.state(model), "losses": [], "val": [], "decoded": []}
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=PAD_IDX)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.003, betas=(0.9, 0.98), eps=1e-9)
    val_src, val_tgt = (torch.from_numpy(a) for a in sentences(4, seed=99))

    for step in range(steps):
        model.train()
        src, tgt = (torch.from_numpy(a) for a in sentences(6, seed=step))
        tgt_input = tgt[:-1, :]
        src_mask, tgt_mask, src_padding_mask, tgt_padding_mask = create_mask(src, tgt_input)
        logits = model(
            src, tgt_input, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask, src_padding_mask
        )
        optimizer.zero_grad()
        tgt_out = tgt[1:, :]
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
        loss.backward()
        if step == 0:
            out["loss0"], out["grads0"] = loss.item(), record.grads(model)
        optimizer.step()
        out["losses"].append(loss.item())

        model.eval()
        tgt_input = val_tgt[:-1, :]
        src_mask, tgt_mask, src_padding_mask, tgt_padding_mask = create_mask(val_src, tgt_input)
        logits = model(
            val_src, tgt_input, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask, src_padding_mask
        )
        out["val"].append(loss_fn(logits.reshape(-1, logits.shape[-1]), val_tgt[1:, :].reshape(-1)).item())

    def greedy_decode(model, src, src_mask, max_len, start_symbol):
        memory = model.encode(src, src_mask)
        ys = torch.ones(1, 1).fill_(start_symbol).type(torch.long)
        for _i in range(max_len - 1):
            tgt_mask = generate_square_subsequent_mask(ys.size(0)).type(torch.bool)
            out_ = model.decode(ys, memory, tgt_mask)
            out_ = out_.transpose(0, 1)
            prob = model.generator(out_[:, -1])
            _, next_word = torch.max(prob, dim=1)
            next_word = next_word.item()

            ys = torch.cat([ys, torch.ones(1, 1).type_as(src.data).fill_(next_word)], dim=0)
            if next_word == EOS_IDX:
                break
        return ys

    model.eval()
    with torch.no_grad():
        for j in range(2):
            src = val_src[:, j : j + 1]
            src = src[: int((src != PAD_IDX).sum())]
            num_tokens = src.shape[0]
            src_mask = (torch.zeros(num_tokens, num_tokens)).type(torch.bool)
            out["decoded"].append(
                greedy_decode(model, src, src_mask, num_tokens + 3, BOS_IDX).flatten().tolist()
            )
        memory = model.encode(val_src, torch.zeros(9, 9).type(torch.bool))
        out["eval"] = [memory.numpy().copy(), logits.detach().numpy().copy()]
    return out
