"""Search over the model's incremental decoder, batched over sentences: one loop
(`beam_search`) and the selections that choose each step's candidates in it.

    search(model, src, max_lens, decode_cfg, ...)   the search decode_cfg asks for:
        Greedy()          the most probable token (decode.beam 1)
        Sampling(how)     a token drawn as decode.sample/topk/topp/temperature say
        TopK(k)           beam search's 2K best candidates (decode.beam > 1, or n-best)
        Prefixed(s, ...)  any of them, each hypothesis starting with its sentence's given
                          tokens (a term placed: terms.py)

A selection is `scored / start / candidates / follow` (the `Selection` protocol): it says
what the candidates are chosen by (the logits, or their log-probabilities), is told how
many hypotheses there are, offers each step's candidates in the order the loop takes them,
and follows the hypotheses that go on. Greedy search and sampling (`ends_at_limit`) are one
hypothesis a sentence, one candidate a step, that ends at EOS or when its limit is written;
beam search ends a hypothesis with EOS, so at the limit only EOS may follow.

Each takes a batch of sources (B,S) with its mask and each sentence's output limit, and
gives each sentence's hypotheses as (ids without BOS/EOS, score), best first. A sentence
that is finished leaves the batch: the decoder state is reordered to the rows still being
decoded, so finished sentences cost nothing more. With `no_repeat_ngram` = n, a token that
would repeat an n-gram of the row's output is never chosen; nor is a token of `never`
(NEVER_OUTPUT, and the digits decode.digit_guard keeps out). Scores (the sum of the
model's log-probabilities of the tokens written and EOS, at temperature 1, divided by the
GNMT length penalty) are computed only where they are asked for: plain greedy search
reports NaN and does no more work than it needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from translator.config import DecodeConfig
from translator.data.batching import padding_mask
from translator.data.tokenizer import BOS, EOS
from translator.inference.engine import NEVER_OUTPUT, Found, length_penalty
from translator.model.transformer import Transformer

# ---- how a token is drawn (decode.sample): temperature, top-k, top-p ----


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
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if how.topp < 1.0:
        ordered, order = logits.sort(dim=-1, descending=True)
        probs = ordered.softmax(dim=-1)
        beyond = probs.cumsum(dim=-1) - probs >= how.topp  # the set was full before it
        drop = torch.zeros_like(beyond).scatter(1, order, beyond)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def draw(logits: torch.Tensor, how: TokenSampling) -> torch.Tensor:
    """One token per row: a draw as `how` says (the argmax at temperature 0)."""
    if how.temperature == 0:
        return logits.argmax(dim=-1)
    probs = restrict(logits, how).softmax(dim=-1)
    return torch.multinomial(probs, 1, generator=how.generator).squeeze(1)


# ---- the repetition guard (decode.no_repeat_ngram) ----
# fairseq's `no_repeat_ngram_size`, OpenNMT-py's `block_ngram_repeat` and CTranslate2's
# `no_repeat_ngram_size`: a token that would complete an n-gram the hypothesis already
# contains may not be chosen. Small models trained on short sentences loop ("我 很 喜欢 我
# 很 喜欢 …"); this stops the loop at its second pass.


def block_repeats(logits: torch.Tensor, history: torch.Tensor, n: int) -> None:
    """Set to -inf, in place, each row's logits (R,V) of the tokens that would repeat an
    n-gram of that row's `history` (R,T) of written tokens. One pass over all rows: the
    n-grams whose first n-1 tokens equal the row's last n-1 name the tokens to block."""
    if n <= 0 or history.size(1) < n:
        return
    windows = history.unfold(1, n, 1)  # (R, T-n+1, n): every n-gram written so far
    recent = history[:, history.size(1) - n + 1 :]  # (R, n-1)
    match = (windows[:, :, :-1] == recent[:, None, :]).all(dim=-1)  # (R, T-n+1)
    hits = torch.zeros_like(logits).scatter_add_(1, windows[:, :, -1], match.to(logits.dtype))
    logits.masked_fill_(hits > 0, float("-inf"))


# ---- the selections ----


class Selection(Protocol):
    """How one step's candidates are chosen: the seam every search goes through."""

    beam: int  # K: the hypotheses a sentence keeps
    ends_at_limit: bool  # a hypothesis ends when its limit is written (else: EOS must follow)
    dtype: torch.dtype  # of the running scores

    def scored(self, logits: torch.Tensor) -> torch.Tensor:
        """The next-token logits (R,V) as the scores the candidates are chosen by."""
        ...

    def start(self, rows: int, device: torch.device) -> None:
        """`rows` hypotheses begin on `device` (each sentence's first)."""
        ...

    def candidates(
        self,
        scores: torch.Tensor,
        logp: torch.Tensor,
        alive: torch.Tensor,
        at_limit: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(score, origin beam, token) of each live sentence's candidates (n, M), in the
        order they are taken, from the hypotheses' `scores` (n,width) and the step's
        `logp` (n,width,V): the first K that end in EOS finish, the K best others go on."""
        ...

    def follow(self, rank: torch.Tensor, keep: torch.Tensor) -> None:
        """The hypotheses that go on: the candidates `rank` of the live sentences `keep`."""
        ...


class TopK:
    """Beam search's choice: the 2K best candidates over each sentence's beams, best first."""

    ends_at_limit = False
    dtype = torch.float32

    def __init__(self, beam: int):
        self.beam = beam

    def scored(self, logits: torch.Tensor) -> torch.Tensor:
        return logits.log_softmax(dim=-1)  # then masked, as fairseq does: no renormalising

    def start(self, rows: int, device: torch.device) -> None:
        """Nothing to track per hypothesis."""

    def candidates(self, scores, logp, alive, at_limit):
        n, width, vocab = logp.shape
        flat = (scores[:, :, None] + logp).view(n, width * vocab)
        top, index = flat.topk(2 * self.beam, dim=1)
        return top, index // vocab, index % vocab

    def follow(self, rank, keep) -> None:
        """Nothing to follow."""


class Greedy(TopK):
    """Greedy search: the most probable token of the logits as they are, no scores (the
    loop reports 0: `search` gives NaN)."""

    ends_at_limit = True

    def __init__(self):
        super().__init__(1)

    def scored(self, logits: torch.Tensor) -> torch.Tensor:
        return logits

    def candidates(self, scores, logp, alive, at_limit):
        token = logp.argmax(dim=-1)
        return scores, self.origin.expand_as(token), token

    def start(self, rows: int, device: torch.device) -> None:
        """Every candidate comes from the one hypothesis: origin 0."""
        self.origin = torch.zeros((), dtype=torch.long, device=device)


class Sampling(Greedy):
    """Sampling: a token drawn from the logits (`draw`), scored by its
    log-probability of the distribution left once `never` and the repetition guard have
    taken their tokens out, summed in float64."""

    dtype = torch.float64

    def __init__(self, how: TokenSampling):
        super().__init__()
        self.how = how

    def candidates(self, scores, logp, alive, at_limit):
        logits = logp[:, 0]
        token = draw(logits, self.how)[:, None]
        gained = logits.log_softmax(dim=-1).gather(1, token)
        return scores + gained, self.origin.expand_as(token), token


class Prefixed:
    """Another selection whose hypotheses start with given tokens: each sentence's prefix
    (B,P, padded with -1; `lengths` (B,)) is all a hypothesis may write at its first
    steps, scored by the model as any token is; then the selection chooses as it does."""

    def __init__(self, inner: Selection, prefixes: torch.Tensor, lengths: torch.Tensor):
        self.inner, self.prefixes, self.lengths = inner, prefixes, lengths
        self.beam, self.ends_at_limit, self.dtype = inner.beam, inner.ends_at_limit, inner.dtype
        self.step = 0

    def scored(self, logits: torch.Tensor) -> torch.Tensor:
        return self.inner.scored(logits)

    def start(self, rows: int, device: torch.device) -> None:
        self.step = 0
        self.inner.start(rows, device)

    def candidates(self, scores, logp, alive, at_limit):
        forced = self.lengths[alive] > self.step
        if forced.any():
            token = self.prefixes[alive, min(self.step, self.prefixes.size(1) - 1)]
            other = torch.arange(logp.size(-1), device=logp.device) != token[:, None]
            logp.masked_fill_((forced[:, None] & other)[:, None, :], float("-inf"))
        self.step += 1
        return self.inner.candidates(scores, logp, alive, at_limit)

    def follow(self, rank: torch.Tensor, keep: torch.Tensor) -> None:
        self.inner.follow(rank, keep)


def _next_logits(model: Transformer, tokens: torch.Tensor, state):
    """Logits (B,V) for the next position, and the advanced state."""
    logits, state = model.decode(tokens, state)
    return logits[:, -1].float(), state


@torch.inference_mode()
def beam_search(
    model: Transformer,
    src: torch.Tensor,
    src_mask: torch.Tensor,
    max_lens: torch.Tensor,
    selection: Selection,
    alpha: float = 0.6,
    *,
    nbest: int = 1,
    no_repeat_ngram: int = 0,
    never: list[int] = NEVER_OUTPUT,
) -> Found:
    """The search loop over sentences × the selection's K hypotheses in one batch, with
    GNMT length penalty `alpha`: each sentence's `nbest` best hypotheses, best first, as
    (ids, log P / lp(len + 1)).

    Each step the selection offers each sentence's candidates: those ending in EOS among
    the first K are finished hypotheses (kept, up to K a sentence, scored with the length
    penalty), the K best others continue. A sentence is done when it has K finished
    hypotheses, or when no live hypothesis can beat its `nbest`-th best finished one any
    more: a live one's log-probability only falls, so it can score at most
    score / lp(limit + 1) (alpha ≥ 0). A hypothesis writes at most `limit` tokens: one of
    greedy search or sampling ends there (`ends_at_limit`), one of beam search may only
    write EOS after them. With beam 1, `TopK` writes what `Greedy` writes, with scores."""
    if alpha < 0:
        raise ValueError("the length penalty alpha must be >= 0")
    k = selection.beam
    if not 1 <= nbest <= k:
        raise ValueError(f"nbest must be from 1 to the beam size ({k}), got {nbest}")
    batch, device = src.size(0), src.device
    # all beams start identical: the first step runs one row per sentence where the
    # vocabulary has 2k candidates to offer, and the k best then become the beams
    width = 1 if model.project.out_features >= 2 * k else k
    state = model.start_decoding(model.encode(src, src_mask), src_mask, width)
    limit = max_lens.to(device)  # each live sentence's (it follows `alive`)
    scores = torch.full((batch, width), float("-inf"), device=device, dtype=selection.dtype)
    scores[:, 0] = 0.0  # with width k: let only the first of the identical beams expand
    history = torch.empty(batch * width, 0, dtype=torch.long, device=device)
    tokens = torch.full((batch * width, 1), BOS, dtype=torch.long, device=device)
    alive = torch.arange(batch, device=device)  # which sentence each group of rows is
    kept = Finished(batch, nbest, device)
    selection.start(batch * width, device)
    # one step a token; beam search one more for the EOS after `limit` tokens
    steps = int(limit.max()) + (0 if selection.ends_at_limit else 1) if batch else 0
    for step in range(steps):
        logits, state = _next_logits(model, tokens, state)
        logp = selection.scored(logits)
        logp[:, never] = float("-inf")
        if no_repeat_ngram:
            block_repeats(logp, history, no_repeat_ngram)
        n, vocab = alive.numel(), logp.size(-1)
        logp = logp.view(n, width, vocab)
        if selection.ends_at_limit:  # the token written now may be the last
            at_limit = limit <= step + 1
        else:  # `limit` tokens written: only EOS may follow
            at_limit = limit <= step
            logp[at_limit, :, :EOS] = float("-inf")
            logp[at_limit, :, EOS + 1 :] = float("-inf")
        top, origin, token = selection.candidates(scores, logp, alive, at_limit)
        is_eos = token == EOS
        if selection.ends_at_limit:  # one hypothesis a sentence: done at EOS or its limit
            done = is_eos[:, 0] | at_limit
            scores, rank = top, origin
        else:  # a beam: done with K finished, or none of its live ones able to beat them
            rank, done = _beam_step(
                kept, selection, history, alive, top, origin, is_eos, step, alpha
            )
            scores, origin, token = (
                top.gather(1, rank),
                origin.gather(1, rank),
                token.gather(1, rank),
            )
            # the longest a live hypothesis can get: `limit` tokens and EOS
            bound = scores.max(dim=1).values / length_penalty(limit + 1, alpha)
            done |= (kept.nth[alive] >= bound) | at_limit
        keep = (~done).nonzero().squeeze(1)
        if selection.ends_at_limit and keep.numel() < n:  # those done are finished
            row = done.nonzero().squeeze(1)
            kept.add(alive[row], *_written(history[row], token[row, 0], top[row, 0], alpha))
        if keep.numel() == 0:
            break
        if k > 1 or keep.numel() < n:  # hypotheses moved or left: follow them
            rows = (keep[:, None] * width + origin[keep]).flatten()
            history, token = history[rows], token[keep]
            state = state.reorder(rows, keep if keep.numel() < n else None, beams=k)
            scores, alive, limit = scores[keep], alive[keep], limit[keep]
        selection.follow(rank, keep)
        width, tokens = k, token.reshape(-1, 1)
        history = torch.cat([history, tokens], dim=1)
    return kept.best()


def _beam_step(kept, selection, history, alive, top, origin, is_eos, step: int, alpha: float):
    """A beam search's step, of the candidates (n, M) offered: the finished hypotheses
    (EOS among the first K, up to K a sentence) added to `kept`, scored with `step + 1`
    tokens; the ranks of the K best that go on (those not ending in EOS, in order); and
    the sentences done as they now hold K finished hypotheses."""
    k, width = selection.beam, history.size(0) // alive.numel()
    ends = is_eos[:, :k] & (top[:, :k] > float("-inf"))
    ends &= ends.cumsum(dim=1) + kept.count[alive, None] <= k
    row, column = ends.nonzero().unbind(1)
    if row.numel():
        ids = history[row * width + origin[row, column]].tolist()
        score = top[row, column] / length_penalty(step + 1, alpha)
        kept.add(alive[row], ids, score.tolist())
    rank = torch.sort(is_eos.to(torch.int8), dim=1, stable=True).indices[:, :k]  # stable
    return rank, kept.count[alive] >= k


def _written(ids: torch.Tensor, token: torch.Tensor, total: torch.Tensor, alpha: float):
    """Hypotheses that end at this step where each ends at its limit (greedy search,
    sampling): each one's ids, the last token among them unless it is EOS, and its score,
    its total divided by the length penalty of its ids and EOS."""
    eos = (token == EOS).tolist()
    rows = [
        row if last else [*row, t]
        for row, t, last in zip(ids.tolist(), token.tolist(), eos, strict=True)
    ]
    score = [
        t / length_penalty(len(row) + 1, alpha) for row, t in zip(rows, total.tolist(), strict=True)
    ]
    return rows, score


class Finished:
    """The finished hypotheses of each sentence (at most K), and the score of each one's
    `nbest`-th best (-inf while it has fewer): the score a live beam must beat."""

    def __init__(self, batch: int, nbest: int, device: torch.device):
        self.nbest = nbest
        # each sentence's (ids, score), best first
        self.found: list[list[tuple[list[int], float]]] = [[] for _ in range(batch)]
        self.count = torch.zeros(batch, dtype=torch.long, device=device)
        self.nth = torch.full((batch,), float("-inf"), device=device)

    def add(self, sentences: torch.Tensor, ids: list[list[int]], scores: list[float]) -> None:
        """Hypotheses that ended at this step (E sentence indices, their ids and scores, in
        candidate order). Among equal scores the one found first ranks first."""
        self.count.index_add_(0, sentences, torch.ones_like(sentences))
        touched = {}
        for sentence, row, score in zip(sentences.tolist(), ids, scores, strict=True):
            found = self.found[sentence]
            found.append((row, score))
            found.sort(key=lambda hypothesis: -hypothesis[1])  # stable
            if len(found) >= self.nbest:
                touched[sentence] = found[self.nbest - 1][1]
        if touched:
            index = torch.tensor(list(touched), device=self.nth.device)
            self.nth[index] = torch.tensor(list(touched.values()), device=self.nth.device)

    def best(self) -> Found:
        """Each sentence's `nbest` best; one that took no step (a limit of 0 tokens for
        every sentence of a greedy search) has the empty output, scored 0."""
        return [found[: self.nbest] or [([], 0.0)] for found in self.found]


def selection_for(decode_cfg: DecodeConfig, generator: torch.Generator | None = None) -> Selection:
    """The selection `decode_cfg` asks for: sampling (decode.sample), greedy search (beam 1
    without n-best), or beam search."""
    if decode_cfg.sample:
        how = TokenSampling(decode_cfg.temperature, decode_cfg.topk, decode_cfg.topp, generator)
        return Sampling(how)
    if decode_cfg.beam == 1 and not decode_cfg.nbest:
        return Greedy()
    return TopK(decode_cfg.beam)


def search(
    model: Transformer,
    src: torch.Tensor,
    max_lens: torch.Tensor,
    decode_cfg: DecodeConfig,
    generator: torch.Generator | None = None,
    never: list[int] = NEVER_OUTPUT,
    prefixes: list[list[int]] | None = None,
) -> Found:
    """The search `decode_cfg` asks for over one batch (B,S) (`selection_for`): each
    sentence's `decode_cfg.nbest` best hypotheses (one without n-best); sampling draws
    that many for each sentence, best score first. Plain greedy search reports NaN scores.
    No output writes a token of `never`; with `prefixes` (target ids, one for each
    sentence), each hypothesis starts with its sentence's."""
    selection = selection_for(decode_cfg, generator)
    if prefixes is not None:
        if decode_cfg.sample:
            raise ValueError("a search from prefixes does not sample")
        longest = max(map(len, prefixes), default=0) or 1
        padded = torch.full((len(prefixes), longest), -1, dtype=torch.long, device=src.device)
        for row, prefix in enumerate(prefixes):
            padded[row, : len(prefix)] = torch.tensor(prefix, dtype=torch.long)
        lengths = torch.tensor([len(p) for p in prefixes], device=src.device)
        selection = Prefixed(selection, padded, lengths)
    guard, alpha = decode_cfg.no_repeat_ngram, decode_cfg.length_penalty
    if isinstance(selection, Sampling):  # each of the n samples is a search of its own
        copies = max(decode_cfg.nbest, 1)
        src, max_lens = src.repeat_interleave(copies, 0), max_lens.repeat_interleave(copies)
        drawn = beam_search(
            model, src, padding_mask(src), max_lens, selection, alpha,
            no_repeat_ngram=guard, never=never,
        )  # fmt: skip
        groups = [[h for (h,) in drawn[i : i + copies]] for i in range(0, len(drawn), copies)]
        return [sorted(group, key=lambda hypothesis: -hypothesis[1]) for group in groups]
    found = beam_search(
        model, src, padding_mask(src), max_lens, selection, alpha,
        nbest=max(decode_cfg.nbest, 1), no_repeat_ngram=guard, never=never,
    )  # fmt: skip
    if isinstance(getattr(selection, "inner", selection), Greedy):  # no scores computed
        return [[(ids, float("nan")) for ids, _ in hypotheses] for hypotheses in found]
    return found
