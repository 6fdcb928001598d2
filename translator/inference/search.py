"""Search over the model's incremental decoder, batched over sentences: one token at a
time (greedy search, or sampling: sampling.py draws each token) and beam search, and
`search`, which runs the one the decode settings ask for.

Each takes a batch of sources (B,S) with its mask and each sentence's output limit, and
gives each sentence's ids without BOS/EOS. A sentence that is finished leaves the batch:
the decoder state is reordered to the rows still being decoded, so finished sentences cost
nothing more. With `no_repeat_ngram` = n, a token that would repeat an n-gram of the
row's output is never chosen; nor is a token of `never` (NEVER_OUTPUT, and the digits
decode.digit_guard keeps out). Scores (the sum of the model's log-probabilities of the
tokens written and EOS, at temperature 1, divided by the GNMT length penalty) are computed
only where they are asked for: plain greedy search does no more work than it needs.
"""

from __future__ import annotations

from itertools import chain

import torch

from translator.config import DecodeConfig
from translator.data.batching import padding_mask
from translator.data.tokenizer import BOS, EOS, PAD, UNK
from translator.inference.constraints import Constraints
from translator.inference.repeats import block_repeats
from translator.inference.sampling import NEG_INF, TokenSampling, choose, perturbed
from translator.model.transformer import DecoderState, Transformer

NEVER_OUTPUT = [PAD, UNK, BOS]  # ids the decoder may not produce (UNK would print " ⁇ ")


def length_penalty(length: int | torch.Tensor, alpha: float):
    """GNMT's lp(Y) = ((5 + |Y|) / 6) ** alpha; a hypothesis scores log P(Y) / lp(Y)."""
    return ((5 + length) / 6) ** alpha


def _next_logits(model: Transformer, tokens: torch.Tensor, state: DecoderState):
    """Logits (B,V) for the next position, and the advanced state."""
    logits, state = model.decode(tokens, state)
    return logits[:, -1].float(), state


def _vocab_size(model: Transformer) -> int:
    return model.project.out_features


@torch.inference_mode()
def one_at_a_time(
    model: Transformer,
    src: torch.Tensor,
    src_mask: torch.Tensor,
    max_lens: torch.Tensor,
    *,
    how: TokenSampling | None = None,
    no_repeat_ngram: int = 0,
    alpha: float | None = None,
    never: list[int] = NEVER_OUTPUT,
) -> list[tuple[list[int], float]]:
    """Greedy search (`how` None: the most probable token at each step) or sampling (a
    token drawn as `how` says), until EOS or the sentence's limit: each sentence's output
    ids (no BOS/EOS) and, with `alpha` given, its score (log P / ((5+len)/6)^alpha, len
    counting EOS; NaN without `alpha`)."""
    batch, device = src.size(0), src.device
    state = model.start_decoding(model.encode(src, src_mask), src_mask)
    limits = max_lens.tolist()
    outputs: list[list[int]] = [[] for _ in range(batch)]
    logp_sums = [0.0] * batch
    alive = list(range(batch))  # which sentence each row of the state belongs to
    history = torch.empty(batch, 0, dtype=torch.long, device=device)  # for the n-gram guard
    tokens = torch.full((batch, 1), BOS, dtype=torch.long, device=device)
    for step in range(max(limits, default=0)):
        logits, state = _next_logits(model, tokens, state)
        logits[:, never] = NEG_INF
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


@torch.inference_mode()
def beam_search(
    model: Transformer,
    src: torch.Tensor,
    src_mask: torch.Tensor,
    max_lens: torch.Tensor,
    beam: int,
    alpha: float = 0.6,
    *,
    nbest: int = 1,
    no_repeat_ngram: int = 0,
    never: list[int] = NEVER_OUTPUT,
    constraints: Constraints | None = None,
    how: TokenSampling | None = None,
) -> list[list[tuple[list[int], float]]]:
    """Beam search over sentences × beams in one batch, with GNMT length penalty `alpha`:
    each sentence's `nbest` best hypotheses, best first, as (ids, log P / lp(len + 1)).

    Each step extends every live beam by every token and keeps the 2K best candidates per
    sentence: those ending in EOS among the first K are finished hypotheses (kept, up to
    K a sentence, scored with the length penalty), the K best others continue. A sentence
    is done when it has K finished hypotheses, or when no live beam can beat its
    `nbest`-th best finished one any more: a live beam's log-probability only falls, so it
    can score at most score / lp(limit + 1) (alpha ≥ 0). After `limit` tokens only EOS is
    allowed, as greedy search writes at most `limit` tokens. With beam 1 this is exactly
    greedy search.

    With `constraints` (constraints.py), each sentence's terms must be in its hypotheses:
    its selection offers and deals out the candidates, and a hypothesis that ends at its
    limit without them ranks last. With `how`, the search ranks by log-probabilities
    perturbed as sampling draws (sampling.perturbed): the best it finds is a draw (the
    scores it reports stay the model's)."""
    if alpha < 0:
        raise ValueError("the length penalty alpha must be >= 0")
    if not 1 <= nbest <= beam:
        raise ValueError(f"nbest must be from 1 to the beam size ({beam}), got {nbest}")
    batch, k, device = src.size(0), beam, src.device
    # all beams start identical: the first step runs one row per sentence where the
    # vocabulary has 2k candidates to offer, and the k best then become the beams
    width = 1 if _vocab_size(model) >= 2 * k else k
    state = model.start_decoding(model.encode(src, src_mask), src_mask, width)
    limits = max_lens.to(device)
    scores = torch.full((batch, width), float("-inf"), device=device)
    scores[:, 0] = 0.0  # with width k: let only the first of the identical beams expand
    truth = scores  # the model's log-probabilities, where `scores` are perturbed (`how`)
    history = torch.empty(batch * width, 0, dtype=torch.long, device=device)
    tokens = torch.full((batch * width, 1), BOS, dtype=torch.long, device=device)
    alive = torch.arange(batch, device=device)  # which sentence each group of rows is
    kept = Finished(batch, nbest, device)
    selection = TopK() if constraints is None else constraints
    selection.start(batch * width)
    for step in range(int(limits.max()) + 1 if batch else 0):
        logits, state = _next_logits(model, tokens, state)
        logp = logits.log_softmax(dim=-1)  # then mask, as fairseq does: no renormalising
        logp[:, never] = float("-inf")
        if no_repeat_ngram:
            block_repeats(logp, history, no_repeat_ngram)
        n, vocab = alive.numel(), logp.size(-1)
        logp = logp.view(n, width, vocab)
        at_limit = step >= limits[alive]  # `limit` tokens written: only EOS may follow
        logp[at_limit, :, :EOS] = float("-inf")
        logp[at_limit, :, EOS + 1 :] = float("-inf")
        ranked = logp if how is None else perturbed(logp, how)
        top, origin, token = selection.candidates(scores, ranked, k, alive, at_limit)
        true = top
        if how is not None:
            true = (truth[:, :, None] + logp).view(n, -1).gather(1, origin * vocab + token)
        is_eos = token == EOS

        # finished hypotheses: EOS among the first k candidates, up to k per sentence
        ends = is_eos[:, :k] & (top[:, :k] > float("-inf"))
        ends &= ends.cumsum(dim=1) + kept.count[alive, None] <= k
        if ends.any():
            row, column = ends.nonzero().unbind(1)
            penalty = length_penalty(step + 1, alpha)  # all: step+1 tokens
            ids = history[row * width + origin[row, column]]
            kept.add(
                alive[row], ids, top[row, column] / penalty, true[row, column] / penalty,
                selection.unmet(alive[row], row, column),
            )  # fmt: skip

        # the k best candidates that do not end in EOS continue (stable sort keeps rank)
        rank = torch.sort(is_eos.to(torch.int8), dim=1, stable=True).indices[:, :k]
        scores, truth = top.gather(1, rank), true.gather(1, rank)
        origin, token = origin.gather(1, rank), token.gather(1, rank)
        # the longest a live hypothesis can get: `limit` tokens and EOS
        bound = scores.max(dim=1).values / length_penalty(limits[alive] + 1, alpha)
        done = (kept.count[alive] >= k) | (kept.nth[alive] >= bound) | at_limit
        keep = (~done).nonzero().squeeze(1)
        if keep.numel() == 0:
            break
        rows = (keep[:, None] * width + origin[keep]).flatten()
        history = torch.cat([history[rows], token[keep].reshape(-1, 1)], dim=1)
        selection.follow(rank, keep)
        state = state.reorder(rows, keep if keep.numel() < n else None, beams=k)
        scores, truth, alive, width = scores[keep], truth[keep], alive[keep], k
        tokens = token[keep].reshape(-1, 1)
    return kept.best()


class TopK:
    """Plain beam search's choice of candidates: the 2K best over each sentence's beams,
    best first. (constraints.Constraints chooses with glossary terms.)"""

    def start(self, rows: int) -> None:
        """Nothing to track per hypothesis."""

    def candidates(self, scores, logp, k, alive, at_limit):
        """(score, origin beam, token) of each sentence's 2K best candidates (n, 2K)."""
        n, width, vocab = logp.shape
        top, flat = (scores[:, :, None] + logp).view(n, width * vocab).topk(2 * k, dim=1)
        return top, flat // vocab, flat % vocab

    def unmet(self, sentences, row, column) -> None:
        return None

    def follow(self, rank, keep) -> None:
        """Nothing to follow."""


class Finished:
    """The finished hypotheses of each sentence (at most K), and the score of each one's
    `nbest`-th best (-inf while it has fewer): the score a live beam must beat."""

    def __init__(self, batch: int, nbest: int, device: torch.device):
        self.nbest = nbest
        # each sentence's (ids, reported score, terms not met, rank score), best first
        self.found: list[list[tuple[list[int], float, int, float]]] = [[] for _ in range(batch)]
        self.count = torch.zeros(batch, dtype=torch.long, device=device)
        self.nth = torch.full((batch,), float("-inf"), device=device)

    def add(
        self,
        sentences: torch.Tensor,
        ids: torch.Tensor,
        scores: torch.Tensor,
        reported: torch.Tensor | None = None,
        unmet: torch.Tensor | None = None,
    ) -> None:
        """Hypotheses that ended at this step (E sentence indices, ids (E,T), E scores, in
        candidate order), ranked by `scores`; `reported`: the scores to give back, where
        they are not those (sampling); `unmet`: the constraints each did not meet, which
        rank it below every hypothesis that met more. Among equal scores the one found
        first ranks first."""
        self.count.index_add_(0, sentences, torch.ones_like(sentences))
        reported = scores if reported is None else reported
        missed = [0] * len(sentences) if unmet is None else unmet.tolist()
        touched = {}
        for sentence, row, score, told, miss in zip(
            sentences.tolist(), ids.tolist(), scores.tolist(), reported.tolist(), missed,
            strict=True,
        ):  # fmt: skip
            found = self.found[sentence]
            found.append((row, told, miss, score))
            found.sort(key=lambda hypothesis: (hypothesis[2], -hypothesis[3]))  # stable
            if len(found) >= self.nbest:
                touched[sentence] = found[self.nbest - 1][3]
        if touched:
            index = torch.tensor(list(touched), device=self.nth.device)
            self.nth[index] = torch.tensor(list(touched.values()), device=self.nth.device)

    def best(self) -> list[list[tuple[list[int], float]]]:
        return [[(ids, told) for ids, told, *_ in found[: self.nbest]] for found in self.found]


Found = list[list[tuple[list[int], float]]]  # each sentence's hypotheses: (ids, score)


def search(
    model: Transformer,
    src: torch.Tensor,
    max_lens: torch.Tensor,
    decode_cfg: DecodeConfig,
    generator: torch.Generator | None = None,
    never: list[int] = NEVER_OUTPUT,
    constraints: Constraints | None = None,
) -> Found:
    """The search `decode_cfg` asks for over one batch (B,S): sampling (`decode_cfg.nbest` samples a
    sentence, best score first), beam search (`decode_cfg.nbest` best), or greedy. Scores are
    computed only where they are asked for (nbest ≥ 1, or sampling): plain greedy leaves
    them NaN, and with beam 1 and nbest beam search gives greedy's output and its score.
    No output writes a token of `never`. With `constraints` (each sentence's glossary
    terms), every search is the constrained one (`constrained`)."""
    if constraints is not None:
        return constrained(model, src, max_lens, decode_cfg, constraints, generator, never)
    mask, guard = padding_mask(src), decode_cfg.no_repeat_ngram
    if decode_cfg.sample:
        copies = max(decode_cfg.nbest, 1)
        how = TokenSampling(decode_cfg.temperature, decode_cfg.topk, decode_cfg.topp, generator)
        src, max_lens = src.repeat_interleave(copies, 0), max_lens.repeat_interleave(copies)
        drawn = one_at_a_time(
            model, src, padding_mask(src), max_lens, how=how, no_repeat_ngram=guard,
            alpha=decode_cfg.length_penalty, never=never,
        )  # fmt: skip
        groups = [drawn[i : i + copies] for i in range(0, len(drawn), copies)]
        return [sorted(group, key=lambda hypothesis: -hypothesis[1]) for group in groups]
    if decode_cfg.beam == 1 and not decode_cfg.nbest:
        return [
            [found]
            for found in one_at_a_time(
                model, src, mask, max_lens, no_repeat_ngram=guard, never=never
            )
        ]
    return beam_search(
        model, src, mask, max_lens, decode_cfg.beam, decode_cfg.length_penalty,
        nbest=max(decode_cfg.nbest, 1), no_repeat_ngram=guard, never=never,
    )  # fmt: skip


def constrained(
    model: Transformer,
    src: torch.Tensor,
    max_lens: torch.Tensor,
    decode_cfg: DecodeConfig,
    constraints: Constraints,
    generator: torch.Generator | None = None,
    never: list[int] = NEVER_OUTPUT,
) -> Found:
    """The search `decode_cfg` asks for, with each sentence's terms in every hypothesis:
    beam search with constraints (constraints.py) of `decode.beam` beams, and at least
    `decode.glossary_beam` (greedy search, one beam, has no room to place a term, so it
    searches with that many); with sampling, each of the `decode.nbest` samples a sentence
    is such a search whose candidates are drawn."""
    beam = max(decode_cfg.beam, decode_cfg.glossary_beam)
    options = {"no_repeat_ngram": decode_cfg.no_repeat_ngram, "never": never}
    if decode_cfg.sample:
        copies = max(decode_cfg.nbest, 1)
        how = TokenSampling(decode_cfg.temperature, decode_cfg.topk, decode_cfg.topp, generator)
        src, max_lens = src.repeat_interleave(copies, 0), max_lens.repeat_interleave(copies)
        drawn = beam_search(
            model, src, padding_mask(src), max_lens, beam, decode_cfg.length_penalty,
            constraints=constraints.repeat_interleave(copies), how=how,
            **options,
        )  # fmt: skip
        groups = [[*chain(*drawn[i : i + copies])] for i in range(0, len(drawn), copies)]
        return [sorted(group, key=lambda hypothesis: -hypothesis[1]) for group in groups]
    return beam_search(
        model, src, padding_mask(src), max_lens, beam, decode_cfg.length_penalty,
        nbest=max(decode_cfg.nbest, 1), constraints=constraints, **options,
    )  # fmt: skip
