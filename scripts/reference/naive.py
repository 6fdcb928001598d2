"""The naive baseline for scripts/bench.py: a Transformer trainer and greedy decoder written
the way the seed notebook and the Annotated Transformer write them. It is not used by the
package; it exists so that our speed is measured against it in the same run.

- fixed batches of 32 sentences, sorted by length, batch order shuffled each epoch
- attention as matmul → masked_fill → softmax → dropout → matmul, separate Q/K/V/out
  projections, masks built for every batch (padding, and padding & subsequent)
- plain Adam, `loss.item()` after every step
- greedy decoding that re-runs the whole decoder over the prefix for every new token
  (and re-projects the encoder memory for cross-attention each time)

Same sizes as our model (layers, d_model, heads, ff, vocabularies), pre-norm, label-smoothed
cross-entropy, gradient clipping: the same arithmetic, written naively.
"""

from __future__ import annotations

import copy
import math
import random
import time

import numpy as np
import torch
import torch.nn as nn

PAD, UNK, BOS, EOS = 0, 1, 2, 3
NEVER_OUTPUT = [PAD, UNK, BOS]


def subsequent_mask(size: int, device=None) -> torch.Tensor:
    return torch.triu(torch.ones(1, size, size, device=device), diagonal=1) == 0


def attention(query, key, value, mask, dropout):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = dropout(scores.softmax(dim=-1))
    return torch.matmul(p_attn, value)


class MultiHeadedAttention(nn.Module):
    def __init__(self, h, d_model, dropout):
        super().__init__()
        self.d_k, self.h = d_model // h, h
        self.linears = nn.ModuleList([nn.Linear(d_model, d_model) for _ in range(4)])
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask):
        mask = mask.unsqueeze(1)
        nbatches = query.size(0)
        query, key, value = [
            lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
            for lin, x in zip(self.linears, (query, key, value), strict=False)
        ]
        x = attention(query, key, value, mask, self.dropout)
        x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        return self.linears[-1](x)


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout):
        super().__init__()
        self.w_1, self.w_2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.w_2(self.dropout(self.w_1(x).relu()))


class SublayerConnection(nn.Module):
    def __init__(self, size, dropout):
        super().__init__()
        self.norm, self.dropout = nn.LayerNorm(size), nn.Dropout(dropout)

    def forward(self, x, sublayer):
        return x + self.dropout(sublayer(self.norm(x)))


class EncoderLayer(nn.Module):
    def __init__(self, size, self_attn, feed_forward, dropout):
        super().__init__()
        self.self_attn, self.feed_forward = self_attn, feed_forward
        self.sublayer = nn.ModuleList([SublayerConnection(size, dropout) for _ in range(2)])

    def forward(self, x, mask):
        x = self.sublayer[0](x, lambda x: self.self_attn(x, x, x, mask))
        return self.sublayer[1](x, self.feed_forward)


class DecoderLayer(nn.Module):
    def __init__(self, size, self_attn, src_attn, feed_forward, dropout):
        super().__init__()
        self.self_attn, self.src_attn, self.feed_forward = self_attn, src_attn, feed_forward
        self.sublayer = nn.ModuleList([SublayerConnection(size, dropout) for _ in range(3)])

    def forward(self, x, memory, src_mask, tgt_mask):
        x = self.sublayer[0](x, lambda x: self.self_attn(x, x, x, tgt_mask))
        x = self.sublayer[1](x, lambda x: self.src_attn(x, memory, memory, src_mask))
        return self.sublayer[2](x, self.feed_forward)


class Stack(nn.Module):
    def __init__(self, layer, n):
        super().__init__()
        self.layers = nn.ModuleList([copy.deepcopy(layer) for _ in range(n)])
        self.norm = nn.LayerNorm(layer.sublayer[0].norm.normalized_shape)

    def forward(self, x, *args):
        for layer in self.layers:
            x = layer(x, *args)
        return self.norm(x)


class Embeddings(nn.Module):
    def __init__(self, d_model, vocab, dropout, max_len=512):
        super().__init__()
        self.lut, self.d_model = nn.Embedding(vocab, d_model), d_model
        self.dropout = nn.Dropout(dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0))

    def forward(self, x):
        x = self.lut(x) * math.sqrt(self.d_model)
        return self.dropout(x + self.pe[:, : x.size(1)])


class EncoderDecoder(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, n_enc, n_dec, d_model, d_ff, h, dropout):
        super().__init__()
        attn = MultiHeadedAttention(h, d_model, dropout)
        ff = PositionwiseFeedForward(d_model, d_ff, dropout)
        c = copy.deepcopy
        self.encoder = Stack(EncoderLayer(d_model, c(attn), c(ff), dropout), n_enc)
        self.decoder = Stack(DecoderLayer(d_model, c(attn), c(attn), c(ff), dropout), n_dec)
        self.src_embed = Embeddings(d_model, src_vocab, dropout)
        self.tgt_embed = Embeddings(d_model, tgt_vocab, dropout)
        self.generator = nn.Linear(d_model, tgt_vocab)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def forward(self, src, tgt, src_mask, tgt_mask):
        memory = self.encoder(self.src_embed(src), src_mask)
        return self.generator(self.decoder(self.tgt_embed(tgt), memory, src_mask, tgt_mask))


def pad(seqs, prefix=None):
    prefix = [] if prefix is None else [prefix]
    width = max(len(s) for s in seqs) + len(prefix)
    return torch.tensor([prefix + list(s) + [PAD] * (width - len(s) - len(prefix)) for s in seqs])


def encode_pairs(src_lines, tgt_lines, src_tok, tgt_tok, max_len):
    """Each pair's ids, EOS-terminated, one pair at a time; pairs with a side longer than
    `max_len` (BOS counted on the target side) left out, as our trainer leaves them out."""
    src, tgt = [], []
    for en, zh in zip(src_lines, tgt_lines, strict=True):
        s, t = src_tok.encode(en) + [EOS], tgt_tok.encode(zh) + [EOS]
        if len(s) <= max_len and len(t) < max_len:
            src.append(s)
            tgt.append(t)
    return src, tgt


def make_batches(src, tgt, batch_size=32):
    """Sort pairs by source length and cut into batches of `batch_size` sentences."""
    order = sorted(range(len(src)), key=lambda i: len(src[i]))
    batches = []
    for start in range(0, len(order), batch_size):
        rows = order[start : start + batch_size]
        batches.append((pad([src[i] for i in rows]), pad([tgt[i] for i in rows], prefix=BOS)))
    return batches


def train_for(model, batches, seconds, lr=5e-4, smoothing=0.1, seed=1, device="cpu"):
    """Train until `seconds` have passed; returns (target tokens, seconds, steps)."""
    model.to(device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    criterion = nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=smoothing)
    rng = random.Random(seed)
    tokens = steps = 0
    losses = []
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        order = list(range(len(batches)))
        rng.shuffle(order)
        for i in order:
            src, tgt = (t.to(device) for t in batches[i])
            tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
            src_mask = (src != PAD).unsqueeze(-2)
            tgt_mask = (tgt_in != PAD).unsqueeze(-2) & subsequent_mask(tgt_in.size(-1), device)
            out = model(src, tgt_in, src_mask, tgt_mask)
            loss = criterion(out.reshape(-1, out.size(-1)), tgt_out.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(loss.item())
            tokens += int((tgt_out != PAD).sum().item())
            steps += 1
            if time.perf_counter() - start >= seconds:
                break
    return tokens, time.perf_counter() - start, steps


@torch.inference_mode()
def greedy_redecode(model, sources: list[np.ndarray], limits: list[int], batch_size=32):
    """Greedy decoding of *our* model (translator.model.Transformer) the naive way: for every
    new token, run the decoder again over the whole prefix with no cache. Batches of
    `batch_size` sentences in input order."""
    from translator.data.batching import padding_mask

    outputs = []
    device = next(model.parameters()).device
    for start in range(0, len(sources), batch_size):
        src = pad(sources[start : start + batch_size]).to(device)
        limit = torch.tensor(limits[start : start + batch_size], device=device)
        mask = padding_mask(src)
        memory = model.encode(src, mask)
        ys = torch.full((src.size(0), 1), BOS, device=device)
        done = torch.zeros(src.size(0), dtype=torch.bool, device=device)
        for step in range(int(limit.max())):
            logits, _ = model.decode(ys, model.start_decoding(memory, mask))
            scores = logits[:, -1].float().log_softmax(-1)
            scores[:, NEVER_OUTPUT] = float("-inf")
            next_word = scores.argmax(dim=-1).masked_fill(done, PAD)
            ys = torch.cat([ys, next_word[:, None]], dim=1)
            done |= (next_word == EOS) | (step + 1 >= limit)
            if done.all():
                break
        for row in ys[:, 1:].tolist():
            row = [t for t in row if t != PAD]
            outputs.append(row[: row.index(EOS)] if EOS in row else row)
    return outputs
