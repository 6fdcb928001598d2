"""Sampling: how one token is drawn from the model's distribution, after temperature,
top-k and top-p, for `decode.sample` (search.py runs the loop that asks for each token).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

NEG_INF = float("-inf")


@dataclass(frozen=True)
class TokenSampling:
    """How to draw a token: temperature 0 is greedy; `topk` 0 and `topp` 1 keep all."""

    temperature: float = 1.0
    topk: int = 0
    topp: float = 1.0
    generator: torch.Generator | None = None


def restrict(logits: torch.Tensor, how: TokenSampling) -> torch.Tensor:
    """Logits (R,V) → the logits to sample from: divided by the temperature; outside the
    `topk` most probable, or outside the smallest set holding `topp` of the probability
    (the token that crosses it kept), -inf."""
    logits = logits / how.temperature
    if 0 < how.topk < logits.size(-1):
        kth = logits.topk(how.topk, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, NEG_INF)
    if how.topp < 1.0:
        ordered, order = logits.sort(dim=-1, descending=True)
        probs = ordered.softmax(dim=-1)
        beyond = probs.cumsum(dim=-1) - probs >= how.topp  # the set was full before it
        drop = torch.zeros_like(beyond).scatter(1, order, beyond)
        logits = logits.masked_fill(drop, NEG_INF)
    return logits


def draw(logits: torch.Tensor, how: TokenSampling) -> torch.Tensor:
    """One token per row: a draw as `how` says (the argmax at temperature 0)."""
    if how.temperature == 0:
        return logits.argmax(dim=-1)
    probs = restrict(logits, how).softmax(dim=-1)
    return torch.multinomial(probs, 1, generator=how.generator).squeeze(1)
