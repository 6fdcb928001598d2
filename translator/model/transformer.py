"""Transformer encoder–decoder ("Attention Is All You Need", Vaswani et al. 2017).

Shapes: B batch, S source length, T target length, D d_model, H heads, Dh = D / H.

    src ids (B,S) → Embedding → N × EncoderLayer → memory (B,S,D)
    tgt ids (B,T) → Embedding → N × DecoderLayer(memory) → Linear → logits (B,T,V)

Each sublayer sits in a residual block with layer norm before it (pre-norm, the default:
stable without a long warm-up) or after the sum (post-norm, as in the paper).
Attention is `F.scaled_dot_product_attention`. For decoding one token at a time, the
decoder keeps per layer a cache of its self-attention keys/values (grown each step) and the
cross-attention keys/values of the memory (computed once).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from translator.config import ModelConfig
from translator.data.tokenizer import PAD
from translator.model.dropout import Dropout

KV = tuple[torch.Tensor, torch.Tensor]  # keys, values: each (B, H, L, Dh)


def sinusoids(length: int, d_model: int) -> torch.Tensor:
    """(length, D) positional encodings: sin on even dimensions, cos on odd ones."""
    position = torch.arange(length, dtype=torch.float32)[:, None]
    frequency = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model)
    )
    table = torch.zeros(length, d_model)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)
    return table


class Embedding(nn.Module):
    """Token embedding scaled by √D, plus sinusoidal position, then dropout. With
    `zero_start`, the first position's token embedding is zero whatever its id (the
    decoder's <s>, as Marian starts decoding)."""

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        max_positions: int,
        dropout: float,
        zero_start: bool = False,
    ):
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, d_model, padding_idx=PAD)
        self.zero_start = zero_start
        self.scale = math.sqrt(d_model)
        self.register_buffer("positions", sinusoids(max_positions, d_model), persistent=False)
        self.dropout = Dropout(dropout)

    def forward(self, ids: torch.Tensor, start: int = 0) -> torch.Tensor:
        length = ids.size(1)
        if start + length > self.positions.size(0):
            raise ValueError(
                f"sequence of {start + length} tokens exceeds max_positions "
                f"({self.positions.size(0)})"
            )
        tokens = self.tokens(ids)
        if self.zero_start and start == 0:
            tokens = torch.cat([torch.zeros_like(tokens[:, :1]), tokens[:, 1:]], dim=1)
        return self.dropout(tokens * self.scale + self.positions[start : start + length])


def split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """(B, L, D) → (B, H, L, Dh)"""
    return x.unflatten(-1, (heads, -1)).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, H, L, Dh) → (B, L, D)"""
    return x.transpose(1, 2).flatten(2)


class SelfAttention(nn.Module):
    """Multi-head self-attention with one fused query/key/value projection."""

    def __init__(self, d_model: int, heads: int, dropout: float):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.dropout = dropout

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        causal: bool = False,
        cache: KV | None = None,
    ) -> tuple[torch.Tensor, KV]:
        """x (B,L,D); mask (B,1,1,L) or None. With `cache`, x holds the new positions only and
        attends to the cached ones too. Returns the output and the keys/values seen."""
        q, k, v = (split_heads(t, self.heads) for t in self.qkv(x).chunk(3, dim=-1))
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, dropout_p=p)
        return self.out(merge_heads(y)), (k, v)


class CrossAttention(nn.Module):
    """Multi-head attention from decoder positions to the encoder memory."""

    def __init__(self, d_model: int, heads: int, dropout: float):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(d_model, d_model)
        self.kv = nn.Linear(d_model, 2 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.dropout = dropout

    def memory_kv(self, memory: torch.Tensor) -> KV:
        k, v = self.kv(memory).chunk(2, dim=-1)
        return split_heads(k, self.heads), split_heads(v, self.heads)

    def forward(
        self, x: torch.Tensor, memory_kv: KV, mask: torch.Tensor, group: int = 1
    ) -> torch.Tensor:
        """x (B·group, T, D) attends to memory rows (B, …): with group > 1 (beam search, T
        = 1) each memory row serves `group` consecutive rows of x, taken as its queries,
        so the beams of a sentence share its keys/values instead of copies of them."""
        q = self.q(x)
        if group > 1:
            q = q.reshape(-1, group, q.size(-1))  # (B, group, D): the rows as positions
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(
            split_heads(q, self.heads), *memory_kv, attn_mask=mask, dropout_p=p
        )
        y = merge_heads(y)
        if group > 1:
            y = y.reshape(-1, 1, y.size(-1))  # (B·group, 1, D)
        return self.out(y)


ACTIVATION = {"relu": nn.ReLU, "gelu": nn.GELU, "swish": nn.SiLU}  # model.activation


class FeedForward(nn.Sequential):
    def __init__(self, d_model: int, ff_dim: int, dropout: float, activation: str = "relu"):
        super().__init__(
            nn.Linear(d_model, ff_dim),
            ACTIVATION[activation](),
            Dropout(dropout),
            nn.Linear(ff_dim, d_model),
        )


class Residual(nn.Module):
    """The residual wrapper around one sublayer f:  pre-norm  x + dropout(f(norm(x)))
    post-norm norm(x + dropout(f(x)))"""

    def __init__(self, d_model: int, dropout: float, pre_norm: bool):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = Dropout(dropout)
        self.pre_norm = pre_norm

    def input(self, x: torch.Tensor) -> torch.Tensor:
        """What the sublayer reads."""
        return self.norm(x) if self.pre_norm else x

    def add(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Combine the residual stream x with the sublayer's output y."""
        x = x + self.dropout(y)
        return x if self.pre_norm else self.norm(x)


class EncoderLayer(nn.Module):
    def __init__(self, model_cfg: ModelConfig):
        super().__init__()
        d, p, pre = model_cfg.d_model, model_cfg.dropout, model_cfg.norm == "pre"
        self.attn = SelfAttention(d, model_cfg.heads, model_cfg.attention_p)
        self.ff = FeedForward(d, model_cfg.ff_dim, p, model_cfg.activation)
        self.attn_block = Residual(d, p, pre)
        self.ff_block = Residual(d, p, pre)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        y, _ = self.attn(self.attn_block.input(x), mask=mask)
        x = self.attn_block.add(x, y)
        return self.ff_block.add(x, self.ff(self.ff_block.input(x)))


@dataclass
class LayerCache:
    self_kv: KV | None  # keys/values of the positions decoded so far
    memory_kv: KV  # cross-attention keys/values of the encoder memory

    def reorder(self, rows: torch.Tensor, sentences: torch.Tensor | None) -> LayerCache:
        pick = lambda kv, i: (kv[0].index_select(0, i), kv[1].index_select(0, i))  # noqa: E731
        self_kv = pick(self.self_kv, rows) if self.self_kv else None
        memory_kv = self.memory_kv if sentences is None else pick(self.memory_kv, sentences)
        return LayerCache(self_kv, memory_kv)


class DecoderLayer(nn.Module):
    def __init__(self, model_cfg: ModelConfig):
        super().__init__()
        d, p, pre = model_cfg.d_model, model_cfg.dropout, model_cfg.norm == "pre"
        self.self_attn = SelfAttention(d, model_cfg.heads, model_cfg.attention_p)
        self.cross_attn = CrossAttention(d, model_cfg.heads, model_cfg.attention_p)
        self.ff = FeedForward(d, model_cfg.ff_dim, p, model_cfg.activation)
        self.self_block = Residual(d, p, pre)
        self.cross_block = Residual(d, p, pre)
        self.ff_block = Residual(d, p, pre)

    def forward(
        self, x: torch.Tensor, src_mask: torch.Tensor, cache: LayerCache, group: int = 1
    ) -> tuple[torch.Tensor, LayerCache]:
        """Without cached keys/values (training) x is the whole target and attention is
        causal; right padding needs no further mask, as a real position never sees a later
        pad. With them (decoding) x is the one newest position and sees all earlier ones."""
        y, self_kv = self.self_attn(
            self.self_block.input(x), causal=cache.self_kv is None, cache=cache.self_kv
        )
        x = self.self_block.add(x, y)
        y = self.cross_attn(self.cross_block.input(x), cache.memory_kv, src_mask, group)
        x = self.cross_block.add(x, y)
        x = self.ff_block.add(x, self.ff(self.ff_block.input(x)))
        return x, LayerCache(self_kv, cache.memory_kv)


@dataclass
class DecoderState:
    """What incremental decoding carries from one step to the next."""

    layers: list[LayerCache]
    src_mask: torch.Tensor  # (B, 1, 1, S): one row per sentence
    step: int = 0  # positions decoded so far
    beams: int = 1  # decoder rows per sentence; they share the sentence's memory

    def reorder(self, rows: torch.Tensor, sentences=None, beams: int = 0) -> DecoderState:
        """Keep/duplicate decoder `rows` (to follow beams or drop finished sentences), keep
        only the memory of `sentences` (indices, None: all), then `beams` rows a sentence."""
        mask = self.src_mask if sentences is None else self.src_mask.index_select(0, sentences)
        layers = [c.reorder(rows, sentences) for c in self.layers]
        return DecoderState(layers, mask, self.step, beams or self.beams)


class Transformer(nn.Module):
    def __init__(self, model_cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int):
        super().__init__()
        self.model_cfg = model_cfg
        d, positions, p = model_cfg.d_model, model_cfg.max_positions, model_cfg.dropout
        self.src_embed = Embedding(src_vocab_size, d, positions, p)
        self.tgt_embed = Embedding(tgt_vocab_size, d, positions, p, zero_start=model_cfg.zero_start)
        self.encoder = nn.ModuleList(
            EncoderLayer(model_cfg) for _ in range(model_cfg.encoder_layers)
        )
        self.decoder = nn.ModuleList(
            DecoderLayer(model_cfg) for _ in range(model_cfg.decoder_layers)
        )
        # pre-norm leaves the residual stream unnormalised: one final norm per stack
        pre = model_cfg.norm == "pre"
        self.encoder_norm = nn.LayerNorm(d) if pre else nn.Identity()
        self.decoder_norm = nn.LayerNorm(d) if pre else nn.Identity()
        self.project = nn.Linear(d, tgt_vocab_size, bias=model_cfg.output_bias)
        self._init_weights()
        if model_cfg.tie_embeddings:
            self.project.weight = self.tgt_embed.tokens.weight

    def _init_weights(self) -> None:
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, std=self.model_cfg.d_model**-0.5)
                nn.init.zeros_(module.weight[PAD])

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """src (B,S) ids, src_mask (B,1,1,S) → memory (B,S,D)"""
        x = self.src_embed(src)
        for layer in self.encoder:
            x = layer(x, src_mask)
        return self.encoder_norm(x)

    def start_decoding(
        self, memory: torch.Tensor, src_mask: torch.Tensor, beams: int = 1
    ) -> DecoderState:
        """The state before the first target position; with `beams`, B × beams decoder
        rows (sentence by sentence) over the B sentences' memory."""
        caches = [LayerCache(None, layer.cross_attn.memory_kv(memory)) for layer in self.decoder]
        return DecoderState(caches, src_mask, beams=beams)

    def decode(self, tgt: torch.Tensor, state: DecoderState) -> tuple[torch.Tensor, DecoderState]:
        """tgt (B,T) ids at positions state.step … state.step+T-1 → logits (B,T,V) and the
        state advanced by T positions. Once a state holds positions, T must be 1."""
        if state.step and tgt.size(1) != 1:
            raise ValueError("incremental decoding takes one position at a time")
        x = self.tgt_embed(tgt, start=state.step)
        caches = []
        for layer, cache in zip(self.decoder, state.layers, strict=True):
            x, cache = layer(x, state.src_mask, cache, state.beams)
            caches.append(cache)
        logits = self.project(self.decoder_norm(x))
        return logits, DecoderState(caches, state.src_mask, state.step + tgt.size(1), state.beams)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, src_mask: torch.Tensor):
        """Teacher-forced training pass: logits (B,T,V) for every target position."""
        memory = self.encode(src, src_mask)
        logits, _ = self.decode(tgt_in, self.start_decoding(memory, src_mask))
        return logits
