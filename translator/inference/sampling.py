"""One token at a time: greedy search and sampling, batched over sentences.

Both run the same loop: at every step each unfinished row takes one token — the most
probable (greedy), or one drawn from the model's distribution after temperature, top-k
and top-p (sampling) — until EOS or its limit. A finished row leaves the batch (the
decoder state is reordered to the rows still decoding), so it costs nothing more. With
`no_repeat_ngram` = n, a token that would repeat an n-gram of the row's output is never
chosen. Scores (the sum of the model's log-probabilities of the tokens written and EOS,
at temperature 1, divided by the GNMT length penalty) are computed only when asked for:
the plain greedy path does no more work than it needs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from translator.data.tokenizer import BOS, EOS, PAD, UNK
from translator.inference.repeats import block_repeats
from translator.model.transformer import Transformer

NEVER_OUTPUT = [PAD, UNK, BOS]  # ids the decoder may not produce (UNK would print " ⁇ ")
NEG_INF = float("-inf")


@dataclass(frozen=True)
class Sampling:
    """How to draw a token: temperature 0 is greedy; `topk` 0 and `topp` 1 keep all."""

    temperature: float = 1.0
    topk: int = 0
    topp: float = 1.0
    generator: torch.Generator | None = None


def restrict(logits: torch.Tensor, how: Sampling) -> torch.Tensor:
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


def choose(logits: torch.Tensor, how: Sampling | None) -> torch.Tensor:
    """One token per row: the argmax (greedy: `how` None or temperature 0), else a draw."""
    if how is None or how.temperature == 0:
        return logits.argmax(dim=-1)
    probs = restrict(logits, how).softmax(dim=-1)
    return torch.multinomial(probs, 1, generator=how.generator).squeeze(1)


@torch.inference_mode()
def one_at_a_time(
    model: Transformer,
    src: torch.Tensor,
    src_mask: torch.Tensor,
    max_lens: torch.Tensor,
    *,
    how: Sampling | None = None,
    no_repeat_ngram: int = 0,
    alpha: float | None = None,
) -> list[tuple[list[int], float]]:
    """Each sentence's output ids (no BOS/EOS) and, with `alpha` given, its score
    (log P / ((5+len)/6)^alpha, len counting EOS; NaN without `alpha`)."""
    batch, device = src.size(0), src.device
    state = model.start_decoding(model.encode(src, src_mask), src_mask)
    limits = max_lens.tolist()
    outputs: list[list[int]] = [[] for _ in range(batch)]
    logp_sums = [0.0] * batch
    alive = list(range(batch))  # which sentence each row of the state belongs to
    history = torch.empty(batch, 0, dtype=torch.long, device=device)  # for the n-gram guard
    tokens = torch.full((batch, 1), BOS, dtype=torch.long, device=device)
    for step in range(max(limits, default=0)):
        logits, state = model.decode(tokens, state)
        logits = logits[:, -1].float()
        logits[:, NEVER_OUTPUT] = NEG_INF
        if no_repeat_ngram:
            block_repeats(logits, history, no_repeat_ngram)
        best = choose(logits, how)
        picked = best.tolist()
        gained = [0.0] * len(alive)
        if alpha is not None:
            gained = logits.log_softmax(dim=-1).gather(1, best[:, None]).squeeze(1).tolist()
        keep = []
        for row, (sentence, token) in enumerate(zip(alive, picked, strict=True)):
            logp_sums[sentence] += gained[row]
            if token != EOS:
                outputs[sentence].append(token)
            if token != EOS and step + 1 < limits[sentence]:
                keep.append(row)
        if not keep:
            break
        if no_repeat_ngram:
            history = torch.cat([history, best[:, None]], dim=1)
        if len(keep) < len(alive):
            index = torch.tensor(keep, device=device)
            state, best, history = state.reorder(index, index), best[index], history[index]
            alive = [alive[row] for row in keep]
        tokens = best[:, None]
    if alpha is None:
        return [(ids, float("nan")) for ids in outputs]
    return [
        (ids, total / length_penalty(len(ids) + 1, alpha))
        for ids, total in zip(outputs, logp_sums, strict=True)
    ]


def length_penalty(length: int | torch.Tensor, alpha: float):
    """GNMT's lp(Y) = ((5 + |Y|) / 6) ** alpha; a hypothesis scores log P(Y) / lp(Y)."""
    return ((5 + length) / 6) ** alpha
