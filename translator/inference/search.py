"""Search over the model's incremental decoder, batched over sentences: one loop
(`beam_search`) and the selections that choose each step's candidates in it. `search`
runs the one decode.search names (registry.py), else greedy (`Greedy`), beam (`TopK`) or
sampling (`Sampling`) as decode.beam and decode.sample say; `Prefixed` makes any of them
start each hypothesis with given tokens (a placed term: terms.py).

Scores (log P of the tokens and EOS, at temperature 1, over the GNMT length penalty) are
computed only where asked for: plain greedy search reports NaN.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from translator.config import DecodeConfig
from translator.data.batching import padding_mask
from translator.data.tokenizer import BOS, EOS
from translator.inference.engine import NEVER_OUTPUT, Found, length_penalty
from translator.inference.registry import SEARCHES
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
    """Logits (R,V) → the logits to sample from: divided by the temperature, -inf outside the
    `topk` most probable and the smallest set holding `topp` of the probability."""
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


# ---- the repetition guard (decode.no_repeat_ngram, fairseq's `no_repeat_ngram_size`) ----
# small models trained on short sentences loop ("我 很 喜欢 我 很 喜欢 …"): see
# docs/translating.md#repetition-guard


def block_repeats(logits: torch.Tensor, history: torch.Tensor, n: int) -> None:
    """Set to -inf, in place, each row's logits (R,V) of the tokens that would repeat an
    n-gram of that row's `history` (R,T) of written tokens."""
    if n <= 0 or history.size(1) < n:
        return
    windows = history.unfold(1, n, 1)  # (R, T-n+1, n): every n-gram written so far
    recent = history[:, history.size(1) - n + 1 :]  # (R, n-1)
    match = (windows[:, :, :-1] == recent[:, None, :]).all(dim=-1)  # (R, T-n+1)
    hits = torch.zeros_like(logits).scatter_add_(1, windows[:, :, -1], match.to(logits.dtype))
    logits.masked_fill_(hits > 0, float("-inf"))


# ---- how a hypothesis ends: at its limit (one a sentence), or with EOS (a beam) ----


class OneEach:
    """One hypothesis a sentence, one candidate a step (greedy search, sampling): it ends
    at EOS or when its limit is written, and is then finished."""

    extra_steps = 0  # the last step may write the limit's token

    @staticmethod
    def limited(logp: torch.Tensor, limit: torch.Tensor, step: int) -> torch.Tensor:
        """The sentences whose token written now is their last."""
        return limit <= step + 1

    @staticmethod
    def advance(loop: Loop, top, origin, token, at_limit):
        """The step's hypotheses (score, origin, token) and the live sentences that go on
        (`keep`), those done finished."""
        done = (token[:, 0] == EOS) | at_limit
        keep = (~done).nonzero().squeeze(1)
        if keep.numel() < done.numel():
            row = done.nonzero().squeeze(1)
            ids = loop.history[row]
            loop.kept.add(loop.alive[row], *_written(ids, token[row, 0], top[row, 0], loop.alpha))
        return top, origin, token, keep


class Beams:
    """K hypotheses a sentence (beam search), each ending with EOS: a sentence is done with K
    finished, or when no live one can beat its `nbest`-th best finished one any more."""

    extra_steps = 1  # the EOS after `limit` tokens

    @staticmethod
    def limited(logp: torch.Tensor, limit: torch.Tensor, step: int) -> torch.Tensor:
        """The sentences with `limit` tokens written, where only EOS may follow now."""
        at_limit = limit <= step
        logp[at_limit, :, :EOS] = float("-inf")
        logp[at_limit, :, EOS + 1 :] = float("-inf")
        return at_limit

    @staticmethod
    def advance(loop: Loop, top, origin, token, at_limit):
        """The K best candidates that go on, and the live sentences that do; the finished ones
        (EOS among the first K, up to K a sentence) kept, scored with `step + 1` tokens."""
        k, kept, alive = loop.beam, loop.kept, loop.alive
        width = loop.history.size(0) // alive.numel()
        is_eos = token == EOS
        ends = is_eos[:, :k] & (top[:, :k] > float("-inf"))
        ends &= ends.cumsum(dim=1) + kept.count[alive, None] <= k
        row, column = ends.nonzero().unbind(1)
        if row.numel():
            ids = loop.history[row * width + origin[row, column]].tolist()
            score = top[row, column] / length_penalty(loop.step + 1, loop.alpha)
            kept.add(alive[row], ids, score.tolist())
        rank = torch.sort(is_eos.to(torch.int8), dim=1, stable=True).indices[:, :k]  # stable
        top, origin, token = top.gather(1, rank), origin.gather(1, rank), token.gather(1, rank)
        # log P only falls: a live hypothesis scores at most this (alpha ≥ 0)
        bound = top.max(dim=1).values / length_penalty(loop.limit + 1, loop.alpha)
        done = (kept.count[alive] >= k) | (kept.nth[alive] >= bound) | at_limit
        return top, origin, token, (~done).nonzero().squeeze(1)


# ---- the selections: how one step's candidates are chosen ----


class Selection(Protocol):
    """How one step's candidates are chosen: the seam every search goes through (a
    package adds one through the entry-point group translator.searches, registry.py)."""

    beam: int  # K: the hypotheses a sentence keeps
    ending: type[OneEach] | type[Beams]  # how a hypothesis ends
    dtype: torch.dtype  # of the running scores
    scoring: bool  # its scores mean something (False: greedy's, reported as NaN)
    draws: bool  # each of the n best is a search of its own (sampling)

    def scored(self, logits: torch.Tensor) -> torch.Tensor:
        """The next-token logits (R,V) as the scores the candidates are chosen by."""
        ...

    def candidates(
        self, scores: torch.Tensor, logp: torch.Tensor, alive: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(score, origin beam, token) of each live sentence's candidates (n,M), in the order
        they are taken, from the hypotheses' `scores` (n,width) and the step's `logp`
        (n,width,V) of the sentences `alive`. Beams: the first K ending in EOS finish, the K
        best others go on (M ≥ 2K); one each: M = 1."""
        ...


class TopK:
    """Beam search's choice: the 2K best candidates over each sentence's beams, best first."""

    ending, dtype, scoring, draws = Beams, torch.float32, True, False

    def __init__(self, beam: int):
        self.beam = beam

    def scored(self, logits: torch.Tensor) -> torch.Tensor:
        return logits.log_softmax(dim=-1)  # then masked, as fairseq does: no renormalising

    def candidates(self, scores, logp, alive):
        n, width, vocab = logp.shape
        flat = (scores[:, :, None] + logp).view(n, width * vocab)
        top, index = flat.topk(2 * self.beam, dim=1)
        return top, index // vocab, index % vocab


class Greedy:
    """Greedy search: the most probable token of the logits as they are, no scores."""

    beam, ending, dtype, scoring, draws = 1, OneEach, torch.float32, False, False

    def scored(self, logits: torch.Tensor) -> torch.Tensor:
        return logits

    def candidates(self, scores, logp, alive):
        token = logp.argmax(dim=-1)
        return scores, torch.zeros_like(token), token


class Sampling:
    """Sampling: a token drawn (`draw`), scored by its log-probability once `never` and the
    repetition guard have taken theirs out, summed in float64."""

    beam, ending, dtype, scoring, draws = 1, OneEach, torch.float64, True, True

    def __init__(self, how: TokenSampling):
        self.how = how

    def scored(self, logits: torch.Tensor) -> torch.Tensor:
        return logits

    def candidates(self, scores, logp, alive):
        logits = logp[:, 0]
        token = draw(logits, self.how)[:, None]
        gained = logits.log_softmax(dim=-1).gather(1, token)
        return scores + gained, torch.zeros_like(token), token


class Prefixed:
    """Another selection whose hypotheses start with given tokens, each sentence's prefix
    (B,P, padded with -1; `lengths` (B,)), scored by the model as any token is."""

    def __init__(self, inner: Selection, prefixes: torch.Tensor, lengths: torch.Tensor):
        self.inner, self.prefixes, self.lengths = inner, prefixes, lengths
        self.beam, self.ending, self.dtype = inner.beam, inner.ending, inner.dtype
        self.scoring, self.draws, self.step = inner.scoring, inner.draws, 0

    def scored(self, logits: torch.Tensor) -> torch.Tensor:
        return self.inner.scored(logits)

    def candidates(self, scores, logp, alive):
        forced = self.lengths[alive] > self.step
        if forced.any():
            token = self.prefixes[alive, min(self.step, self.prefixes.size(1) - 1)]
            other = torch.arange(logp.size(-1), device=logp.device) != token[:, None]
            logp.masked_fill_((forced[:, None] & other)[:, None, :], float("-inf"))
        self.step += 1
        return self.inner.candidates(scores, logp, alive)


def greedy(decode_cfg: DecodeConfig, generator: torch.Generator | None = None) -> Selection:
    """decode.search greedy (and beam 1 without n-best)."""
    return Greedy()


def beam(decode_cfg: DecodeConfig, generator: torch.Generator | None = None) -> Selection:
    """decode.search beam (and beam > 1, or n-best): decode.beam beams."""
    return TopK(decode_cfg.beam)


def sample(decode_cfg: DecodeConfig, generator: torch.Generator | None = None) -> Selection:
    """decode.search sample (and decode.sample): decode.temperature, topk and topp."""
    how = TokenSampling(decode_cfg.temperature, decode_cfg.topk, decode_cfg.topp, generator)
    return Sampling(how)


def selection_for(decode_cfg: DecodeConfig, generator: torch.Generator | None = None) -> Selection:
    """The selection decode.search names, else the one decode.beam and decode.sample mean."""
    name = decode_cfg.search
    if not name:
        plain = decode_cfg.beam == 1 and not decode_cfg.nbest
        name = "sample" if decode_cfg.sample else "greedy" if plain else "beam"
    return SEARCHES.get(name)(decode_cfg, generator)


# ---- the loop ----


@dataclass
class Loop:
    """What a selection's ending reads and changes at each step of `beam_search`."""

    alive: torch.Tensor  # which sentence each group of rows is
    limit: torch.Tensor  # each live sentence's
    history: torch.Tensor  # the tokens each live row has written
    kept: Finished
    beam: int
    alpha: float
    step: int = 0


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
    (ids, log P / lp(len + 1)). A finished sentence leaves the batch; with beam 1, `TopK`
    writes what `Greedy` writes, with scores."""
    if alpha < 0:
        raise ValueError("the length penalty alpha must be >= 0")
    k, ending = selection.beam, selection.ending
    if not 1 <= nbest <= k:
        raise ValueError(f"nbest must be from 1 to the beam size ({k}), got {nbest}")
    batch, device = src.size(0), src.device
    # all beams start identical: the first step runs one row per sentence where the
    # vocabulary has 2k candidates to offer, and the k best then become the beams
    width = 1 if model.project.out_features >= 2 * k else k
    state = model.start_decoding(model.encode(src, src_mask), src_mask, width)
    scores = torch.full((batch, width), float("-inf"), device=device, dtype=selection.dtype)
    scores[:, 0] = 0.0  # with width k: let only the first of the identical beams expand
    tokens = torch.full((batch * width, 1), BOS, dtype=torch.long, device=device)
    loop = Loop(
        alive=torch.arange(batch, device=device),
        limit=max_lens.to(device),
        history=torch.empty(batch * width, 0, dtype=torch.long, device=device),
        kept=Finished(batch, nbest, device),
        beam=k,
        alpha=alpha,
    )
    steps = int(loop.limit.max()) + ending.extra_steps if batch else 0
    for loop.step in range(steps):
        logits, state = model.decode(tokens, state)
        logp = selection.scored(logits[:, -1].float())
        logp[:, never] = float("-inf")
        if no_repeat_ngram:
            block_repeats(logp, loop.history, no_repeat_ngram)
        n = loop.alive.numel()
        logp = logp.view(n, width, logp.size(-1))
        at_limit = ending.limited(logp, loop.limit, loop.step)
        top, origin, token = selection.candidates(scores, logp, loop.alive)
        scores, origin, token, keep = ending.advance(loop, top, origin, token, at_limit)
        if keep.numel() == 0:
            break
        if k > 1 or keep.numel() < n:  # hypotheses moved or left: follow them
            rows = (keep[:, None] * width + origin[keep]).flatten()
            loop.history, token = loop.history[rows], token[keep]
            state = state.reorder(rows, keep if keep.numel() < n else None, beams=k)
            scores, loop.alive, loop.limit = scores[keep], loop.alive[keep], loop.limit[keep]
        width, tokens = k, token.reshape(-1, 1)
        loop.history = torch.cat([loop.history, tokens], dim=1)
    return loop.kept.best()


def _written(ids: torch.Tensor, token: torch.Tensor, total: torch.Tensor, alpha: float):
    """Hypotheses that end at this step, one a sentence (greedy search, sampling): each one's
    ids, the last token among them unless it is EOS, and its score over lp(ids + EOS)."""
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
        self.found: Found = [[] for _ in range(batch)]  # each sentence's (ids, score), best first
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


def search(
    model: Transformer,
    src: torch.Tensor,
    max_lens: torch.Tensor,
    decode_cfg: DecodeConfig,
    generator: torch.Generator | None = None,
    never: list[int] = NEVER_OUTPUT,
    prefixes: list[list[int]] | None = None,
) -> Found:
    """The search `decode_cfg` asks for over one batch (B,S): each sentence's decode.nbest
    best hypotheses (one without; drawn ones best first, NaN scores where the selection does
    not score), none writing a token of `never`, each starting with its sentence's prefix."""
    selection = selection_for(decode_cfg, generator)
    if prefixes is not None:
        selection = _prefixed(selection, prefixes, src.device)
    guard, alpha, nbest = decode_cfg.no_repeat_ngram, decode_cfg.length_penalty, decode_cfg.nbest
    if selection.draws:  # each of the n samples is a search of its own
        copies = max(nbest, 1)
        src, max_lens = src.repeat_interleave(copies, 0), max_lens.repeat_interleave(copies)
        drawn = beam_search(
            model, src, padding_mask(src), max_lens, selection, alpha,
            no_repeat_ngram=guard, never=never,
        )  # fmt: skip
        groups = [[h for (h,) in drawn[i : i + copies]] for i in range(0, len(drawn), copies)]
        return [sorted(group, key=lambda hypothesis: -hypothesis[1]) for group in groups]
    found = beam_search(
        model, src, padding_mask(src), max_lens, selection, alpha,
        nbest=max(nbest, 1), no_repeat_ngram=guard, never=never,
    )  # fmt: skip
    if not selection.scoring:
        return [[(ids, float("nan")) for ids, _ in hypotheses] for hypotheses in found]
    return found


def _prefixed(selection: Selection, prefixes: list[list[int]], device) -> Prefixed:
    """`selection` with each hypothesis starting with its sentence's prefix."""
    if selection.draws:
        raise ValueError("a search from prefixes does not sample")
    longest = max(map(len, prefixes), default=0) or 1
    padded = torch.full((len(prefixes), longest), -1, dtype=torch.long, device=device)
    for row, prefix in enumerate(prefixes):
        padded[row, : len(prefix)] = torch.tensor(prefix, dtype=torch.long)
    return Prefixed(selection, padded, torch.tensor([len(p) for p in prefixes], device=device))
