"""Lexically constrained beam search: a glossary's Chinese terms as token sequences that
every finished hypothesis must contain (Post & Vilar 2018's dynamic beam allocation, in the
vectorised form of Hu et al. 2019 that fairseq's `--constraints` implements).

    PackedTerms.of(batch, vocab, ends)
                            each sentence's terms (target ids), padded into one tensor,
                            and the pieces that end a sentence
    Constrained(terms, beam)
                            the search's selection (search.py): each hypothesis's progress
                            through its terms, and each step's candidates in the order the
                            search takes them

Each hypothesis carries its progress through each term of its sentence: how many of the
term's tokens it has just written in order (the term's length once it is met; a term
broken off half-way starts again). Each step, every live hypothesis offers three kinds of
candidates: the 2K best tokens over the beam (as plain beam search takes), the next token
of each term it has not met (so the search can start or continue one wherever it stands),
and its own best token. A candidate's bank is how many term tokens it has written; the K
beams are dealt out round-robin across the banks, the most advanced bank first and the best
score first within each, so hypotheses that have placed a term compete with those that
have not yet, instead of being pushed out by their lower scores. A hypothesis may end only
when it has met every term of its sentence, and so may a mark that ends a sentence (。？！:
a term put after the sentence, "…过敏。花生。", reads as an afterthought); at its length
limit it ends anyway, and ranks below every hypothesis that met them.

A term written twice must be written twice: one token advances at most one term (an
unfinished one first, the most advanced of them; else the first it starts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from translator.data.tokenizer import EOS

Terms = Sequence[Sequence[int]]  # one sentence's terms, each as target token ids


@dataclass(frozen=True)
class PackedTerms:
    """A batch's terms as tensors: what the constrained search is given (fairseq's
    `pack_constraints`); the progress through them is `Constrained`'s."""

    tokens: torch.Tensor  # (B, C, L) each sentence's terms, padded with -1
    lengths: torch.Tensor  # (B, C) their lengths (0: padding, always met)
    ends: torch.Tensor  # (V,) bool: the tokens that end a sentence (。？！), and EOS

    @classmethod
    def of(
        cls,
        batch: Sequence[Terms],
        vocab: int,
        ends: Sequence[int] = (),
        device: torch.device | str = "cpu",
    ) -> PackedTerms:
        """Each sentence's terms (a sentence may have none), as tensors on `device`;
        `ends`: the ids of the target pieces that end a sentence (of `vocab`), which, as
        EOS, may not be written before every term is."""
        count = max((len(terms) for terms in batch), default=0) or 1
        longest = max((len(t) for terms in batch for t in terms), default=0) or 1
        tokens = torch.full((len(batch), count, longest), -1, dtype=torch.long)
        lengths = torch.zeros(len(batch), count, dtype=torch.long)
        for i, terms in enumerate(batch):
            for c, term in enumerate(terms):
                tokens[i, c, : len(term)] = torch.tensor(term, dtype=torch.long)
                lengths[i, c] = len(term)
        closing = torch.zeros(vocab, dtype=torch.bool)
        closing[[EOS, *ends]] = True
        return cls(tokens.to(device), lengths.to(device), closing.to(device))


class Constrained:
    """The constrained beam search's selection (search.py's `Selection`): each live
    hypothesis's progress through its sentence's `terms`, and the candidates it offers."""

    ends_at_limit = False  # a hypothesis ends with EOS, as in beam search
    dtype = torch.float32

    def __init__(self, terms: PackedTerms, beam: int):
        self.terms, self.beam = terms, beam
        self.progress: torch.Tensor | None = None  # (rows, C), set by `start`
        self.offered: torch.Tensor | None = None  # (n, M, C): the last step's candidates'

    def scored(self, logits: torch.Tensor) -> torch.Tensor:
        return logits.log_softmax(dim=-1)  # as beam search scores: no renormalising

    def start(self, rows: int, device: torch.device) -> None:
        """No term begun in any of the `rows` hypotheses."""
        count = self.terms.tokens.size(1)
        self.progress = torch.zeros(rows, count, dtype=torch.long, device=device)
        self.offered = None

    def candidates(self, scores, logp, alive, at_limit):
        """One step's candidates for the `alive` sentences (n, of `width` beams each, with
        `scores` (n,width) and next-token `logp` (n,width,V)), in the order the search takes
        them: (score, origin beam, token), each (n, M); each one's progress through its
        terms is kept for `unmet` and `follow`. Candidates that may not be taken score -inf
        and come last: an end of sentence before every term is met (unless `at_limit`), a
        candidate offered twice."""
        n, width, vocab = logp.shape
        total = (scores[:, :, None] + logp).view(n, width * vocab)
        origin, token = self._offered(total.view(n, width, vocab), self.terms.tokens[alive])
        top = total.gather(1, origin * vocab + token)
        progress = self._advanced(origin, token, alive)
        met = (progress >= self.terms.lengths[alive][:, None, :]).all(dim=-1)
        early = self.terms.ends[token] & ~met & ~at_limit[:, None]
        top = top.masked_fill(early, float("-inf"))
        top = top.masked_fill(_repeated(origin * vocab + token), float("-inf"))
        order = _dealt(top, progress.sum(dim=-1))
        self.offered = progress.gather(1, order[:, :, None].expand_as(progress))
        return top.gather(1, order), origin.gather(1, order), token.gather(1, order)

    def unmet(self, sentences: torch.Tensor, row: torch.Tensor, column: torch.Tensor):
        """How many terms each candidate (`row`, `column` of the last step's, of
        `sentences`) has not met."""
        return (self.offered[row, column] < self.terms.lengths[sentences]).sum(dim=-1)

    def follow(self, rank: torch.Tensor, keep: torch.Tensor) -> None:
        """The hypotheses that go on: the candidates `rank` of the sentences `keep`."""
        count = self.offered.size(-1)
        chosen = self.offered.gather(1, rank[:, :, None].expand(-1, -1, count))
        self.progress = chosen[keep].reshape(-1, count)

    def _offered(self, total, tokens) -> tuple[torch.Tensor, torch.Tensor]:
        """(origin, token) of every candidate offered (n, M): the 2K best over the beam,
        each beam's next token of each term it has not met, and each beam's best token."""
        n, width, vocab = total.shape
        beams = torch.arange(width, device=total.device)
        flat = total.view(n, width * vocab).topk(min(2 * self.beam, width * vocab), dim=1).indices
        nxt = _next(self.progress.view(n, width, -1), tokens)  # (n, width, C)
        origin = torch.cat(
            [flat // vocab, beams[None, :, None].expand_as(nxt).reshape(n, -1),
             beams.expand(n, width)],
            dim=1,
        )  # fmt: skip
        token = torch.cat([flat % vocab, nxt.reshape(n, -1), total.argmax(dim=-1)], dim=1)
        return origin, token.clamp(min=0)  # a met term offers -1: PAD, which scores -inf

    def _advanced(self, origin: torch.Tensor, token: torch.Tensor, alive: torch.Tensor):
        """Each candidate's progress through its sentence's terms (n,M,C) once its token is
        written after its origin beam's."""
        n, m = origin.shape
        count = self.terms.tokens.size(1)
        width = self.progress.size(0) // n
        before = self.progress.view(n, width, count).gather(
            1, origin[:, :, None].expand(n, m, count)
        )
        tokens = self.terms.tokens[alive]
        met = before >= self.terms.lengths[alive][:, None, :]
        written = token[:, :, None]
        advance = (written == _next(before, tokens)) & ~met  # continues a term, or starts it
        restart = (written == tokens[:, None, :, 0]) & ~met & ~advance  # broken, begun anew
        # one term takes the token: the most advanced unfinished term it continues, else
        # the first it starts
        index = count - torch.arange(count, device=origin.device)
        priority = torch.where(advance & (before > 0), before * (count + 1) + index, -1)
        priority = torch.where((advance & (before == 0)) | restart, index, priority)
        best = priority.max(dim=-1, keepdim=True)
        takes = torch.zeros_like(advance).scatter_(2, best.indices, True) & (best.values >= 0)
        return torch.where(takes, torch.where(advance, before + 1, 1), torch.where(met, before, 0))


def _next(progress: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """The next token of each term (-1 where it is met): progress (n,R,C) and the terms
    (n,C,L) → (n,R,C)."""
    n, rows, count = progress.shape
    longest = tokens.size(-1)
    index = progress.clamp(max=longest - 1)[..., None]
    nxt = tokens[:, None].expand(n, rows, count, longest).gather(3, index).squeeze(3)
    return nxt.masked_fill(progress >= longest, -1)


def _repeated(keys: torch.Tensor) -> torch.Tensor:
    """(n,M) → True where a row's key is one it had earlier in the row."""
    ordered, order = keys.sort(dim=1, stable=True)
    again = torch.zeros_like(keys, dtype=torch.bool)
    again[:, 1:] = ordered[:, 1:] == ordered[:, :-1]
    return torch.zeros_like(again).scatter(1, order, again)


def _dealt(top: torch.Tensor, bank: torch.Tensor) -> torch.Tensor:
    """The order (n,M) in which candidates are taken: round-robin over the banks, the most
    advanced bank first, each bank's candidates best first; those scoring -inf last."""
    valid = top > float("-inf")
    bank = torch.where(valid, bank, -1)
    by_score = top.argsort(dim=1, descending=True, stable=True)
    by_bank = bank.gather(1, by_score).argsort(dim=1, descending=True, stable=True)
    order = by_score.gather(1, by_bank)  # bank first, then score
    banks = bank.gather(1, order)
    position = torch.arange(banks.size(1), device=banks.device).expand_as(banks)
    starts = torch.ones_like(banks, dtype=torch.bool)
    starts[:, 1:] = banks[:, 1:] != banks[:, :-1]
    rank = position - torch.where(starts, position, 0).cummax(dim=1).values  # within its bank
    top_bank = int(banks.max()) + 1
    turn = rank * (top_bank + 1) + (top_bank - banks)
    turn = turn.masked_fill(banks < 0, torch.iinfo(turn.dtype).max)
    return order.gather(1, turn.argsort(dim=1, stable=True))
