"""The glossary and the names, as one policy over any engine (`TermPolicy`): which of a
sentence's words must come out as given, how each travels, and how the engine is made to
write them.

    find(sentence, glossary)    the glossary's entries in the sentence (data/glossary.py)
                                and the names the model does not know (data/known_words.py):
                                those `carried` as placeholders, the rest `terms`
    search(...)                 the sources searched as without a glossary; those whose
                                best translation misses a term searched again by the
                                engine's mechanism:
      constrained beam search   an engine whose search keeps terms (ours: constraints.py)
      TermInsertion             one that has none (CTranslate2): each term put at every
                                place of the best translation, the engine finishing each

On a model trained with placeholders, a name (`Python → Python`, or a capitalised word the
model never saw, decode.keep_names) and a term whose English the model never saw (GPU: it
could only guess) travel as ⦅n⦆ and come back as the glossary writes them; every other
term is a constraint, which also keeps an unknown name on a model without placeholders.
A term is searched with at least decode.glossary_beam beams.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

import numpy as np

from translator.config import DecodeConfig
from translator.data import known_words, spans
from translator.data.glossary import Glossary, Match, sentence_ends, term_ids
from translator.inference.engine import (
    Engine,
    Found,
    Scored,
    SearchBatch,
    batches,
    detokenize,
    length_penalty,
    output_limits,
)
from translator.inference.sentences import Pieces


class TermPolicy:
    """The glossary and the names for one engine: found in a sentence, carried or kept as
    terms, and written by the engine's mechanism. `counts` (shared with the translator):
    the terms and names found."""

    def __init__(self, engine: Engine, counts: Counter[str]):
        self.engine, self.counts = engine, counts
        self.placeholders = spans.has_placeholders(engine.src_tok) and spans.has_placeholders(
            engine.tgt_tok
        )
        self.digits = spans.digit_pieces(engine.tgt_tok)  # what decode.digit_guard keeps out
        self._glossaries: dict[str, Glossary] = {}  # decode.glossary, loaded once
        self._term_ids: dict[str, list[int] | None] = {}  # a term's target ids

    def glossary(self, path: str) -> Glossary | None:
        """The glossary file `path` (decode.glossary), loaded on first use (None for "")."""
        if not path:
            return None
        if path not in self._glossaries:
            self._glossaries[path] = Glossary.load(path)
        return self._glossaries[path]

    def find(
        self, sentence: str, glossary: Glossary | None, decode_cfg: DecodeConfig
    ) -> tuple[list[Match], list[Match]]:
        """The entries of `glossary` in `sentence` outside its protected spans, and the
        names the model does not know (decode.keep_names), each a name that keeps its
        English: those carried as placeholders and those the search must write, each left
        to right. Sampling keeps no terms: there a name travels only as a placeholder."""
        protected = spans.ranges(sentence)
        found = glossary.find(sentence, protected) if glossary else []
        self.counts["terms"] += len(found)
        names_kept = decode_cfg.keep_names and (self.placeholders or not decode_cfg.sample)
        if names_kept and self.engine.known_words is not None:
            taken = protected + [(m.start, m.end) for m in found]
            unknown = known_words.unknown(sentence, self.engine.known_words, taken)
            self.counts["names_kept"] += len(unknown)
            found = sorted(found + [Match(s, e, sentence[s:e]) for s, e in unknown])
        if not self.placeholders:
            return [], found
        carried = [
            m for m in found if m.identity(sentence) or self.unseen(sentence[m.start : m.end])
        ]
        return carried, [m for m in found if m not in carried]

    def unseen(self, english: str) -> bool:
        """Whether no word of `english` is one the model was trained on (False where its
        words are not known)."""
        words = known_words.words_of(english)
        known = self.engine.known_words
        return (
            known is not None and bool(words) and not any(known_words.seen(w, known) for w in words)
        )

    def term_ids(self, chinese: str) -> list[int] | None:
        """A term as the target ids the search must write (glossary.term_ids)."""
        if chinese not in self._term_ids:
            self._term_ids[chinese] = term_ids(self.engine.tgt_tok, chinese)
        return self._term_ids[chinese]

    def mechanism(self, decode_cfg: DecodeConfig) -> str:
        """How the engine is made to write the terms, in words (translate says it)."""
        how = "constrained beam search"
        if not self.engine.constrains:
            how = "term insertion (CTranslate2 target prefixes: TermInsertion)"
        carried = ""
        if self.placeholders:
            carried = "; names (X → X) and terms the model never saw carried as placeholders"
        return f"{how} ({max(decode_cfg.beam, decode_cfg.glossary_beam)} beams){carried}"

    def search(
        self,
        sources: Sequence[np.ndarray],
        guarded: Sequence[bool],
        terms: Sequence[Sequence[str]],
        decode_cfg: DecodeConfig,
    ) -> Found:
        """Each source's hypotheses, holding its `terms` (Chinese): the sources searched as
        without a glossary, and those whose best translation misses a term searched again
        with them. `guarded`: the sources whose outputs may not write digits."""
        ids = [[found for c in chinese if (found := self.term_ids(c))] for chinese in terms]
        size = self.engine.batch_size(decode_cfg)
        found = self.engine.search(
            sources, batches(sources, size, guarded, self.digits), decode_cfg
        )
        again = [
            i
            for i, (wanted, chinese) in enumerate(zip(ids, terms, strict=True))
            if wanted and (not found[i] or self.missing(chinese, found[i][0][0]))
        ]
        if again:
            redone = self._constrained(
                [sources[i] for i in again],
                [guarded[i] for i in again],
                [ids[i] for i in again],
                decode_cfg,
            )
            for i, hypotheses in zip(again, redone, strict=True):
                found[i] = hypotheses
        return found

    def of_pieces(self, pieces: Pieces, terms: Sequence[Sequence[str]], english) -> list[list[str]]:
        """The terms each of `pieces` must hold: its sentence's `terms`, or, of a sentence
        cut into pieces, those whose `english` the piece holds."""
        count = Counter(pieces.line)
        found: list[list[str]] = []
        for i, unit in enumerate(pieces.line):
            whole = count[unit] == 1
            if whole or not terms[unit]:
                found.append(list(terms[unit]) if whole else [])
                continue
            text = self.engine.src_tok.decode(pieces.sources[i].tolist()).lower()
            pairs = zip(terms[unit], english[unit], strict=True)
            found.append([c for c, e in pairs if e.lower() in text])
        return found

    def missing(self, chinese: Sequence[str], ids: list[int]) -> list[str]:
        """The terms `chinese` that the output `ids` does not hold."""
        return missing_terms(chinese, detokenize(self.engine.tgt_tok, ids))

    def _constrained(self, sources, guarded, ids, decode_cfg: DecodeConfig) -> Found:
        """The engine's mechanism over sources that each have terms (`ids`), searched with
        at least decode.glossary_beam beams."""
        wide = replace(decode_cfg, beam=max(decode_cfg.beam, decode_cfg.glossary_beam))
        size = self.engine.batch_size(decode_cfg)
        grouped = batches(sources, size, guarded, self.digits, ids)
        if self.engine.constrains:
            return self.engine.search(sources, grouped, wide)
        every = replace(wide, nbest=wide.beam)  # each batch's whole beam, with scores
        plain = [batch._replace(terms=None) for batch in grouped]
        found = self.engine.search(sources, plain, every)
        limits = output_limits([len(s) for s in sources], every, self.engine.max_positions)
        keep = max(decode_cfg.nbest, 1)
        for batch in grouped:
            TermInsertion(self, sources, batch, limits.tolist(), every).run(found, keep)
        return found


class Completing(Engine, Protocol):
    """What term insertion asks of an engine without a constrained search."""

    def complete(self, sources, rows, prefixes, never, limits, decode_cfg) -> list[list[int]]:
        """The best translation of each of `rows`' sources that starts with its prefix."""
        ...

    def log_probability(self, sources, rows, outputs) -> list[float]:
        """The model's log-probability of each output (ids, then EOS)."""
        ...


class TermInsertion:
    """The glossary on an engine with no constrained search (CTranslate2): of a batch's
    hypotheses (a beam of at least decode.glossary_beam, all kept), the best that holds
    every term wins. Where none does, the best hypothesis takes its first missing term at
    each place in turn (a target prefix: its first tokens, then the term's), the engine
    finishes each, scores each whole (log P / GNMT's length penalty, as our search ranks),
    and the best that holds the most terms is the next to take one, until every term is in
    or no place adds one. A term is not put after a mark that ends a sentence (。？！), as
    the constrained search does not end one before its terms."""

    def __init__(self, policy: TermPolicy, sources, batch: SearchBatch, limits, decode_cfg):
        self.policy, self.sources, self.batch = policy, sources, batch
        self.limits, self.decode_cfg = limits, decode_cfg
        self.engine: Completing = policy.engine  # type: ignore[assignment]
        self.terms = dict(zip(batch.rows, batch.terms, strict=True))
        tgt = self.engine.tgt_tok
        self.chinese = {i: [tgt.decode(t) for t in terms] for i, terms in self.terms.items()}

    def missing(self, row: int, ids: list[int]) -> list[int]:
        """The indices of `row`'s terms that the output `ids` does not hold."""
        chinese = self.chinese[row]
        return [chinese.index(term) for term in self.policy.missing(chinese, ids)]

    def run(self, outputs: Found, keep: int) -> None:
        """Each row's hypotheses, in `outputs`, made to hold its terms; `keep` of them."""
        todo = {}
        for i in self.batch.rows:
            found = sorted(outputs[i], key=lambda h: len(self.missing(i, h[0])))  # stable
            outputs[i] = found[:keep]
            if found and self.missing(i, found[0][0]):
                todo[i] = found[0][0]
        while todo:
            todo = self.insert(todo, outputs, keep)

    def insert(self, bases: dict[int, list[int]], outputs: Found, keep: int):
        """One round: each row's first missing term at every place of its base; returns
        the rows that still miss a term, with their new base."""
        rows, prefixes = [], []
        room = self.engine.max_positions - 1  # what a prefix and its ending may take
        ends = sentence_ends(self.engine.tgt_tok)
        for i, base in bases.items():
            term = self.terms[i][self.missing(i, base)[0]]
            for place in range(min(len(base), room - len(term)) + 1):
                if place and base[place - 1] in ends:  # not after the sentence: "…。显卡"
                    continue
                rows.append(i)
                prefixes.append(base[:place] + term)
        if not rows:
            return {}
        finished = self.engine.complete(
            self.sources, rows, prefixes, self.batch.never, self.limits, self.decode_cfg
        )
        logp = self.engine.log_probability(self.sources, rows, finished)
        alpha = self.decode_cfg.length_penalty
        by_row: dict[int, list[Scored]] = {i: [] for i in bases}
        for i, ids, total in zip(rows, finished, logp, strict=True):
            by_row[i].append((ids, total / length_penalty(len(ids) + 1, alpha)))
        todo = {}
        for i, found in by_row.items():
            if not found:  # the term does not fit in the model's positions
                continue
            found.sort(key=lambda h: (len(self.missing(i, h[0])), -h[1]))
            outputs[i] = found[:keep]
            left = len(self.missing(i, found[0][0]))
            if left and left < len(self.missing(i, bases[i])):
                todo[i] = found[0][0]
        return todo


def missing_terms(terms: Sequence[str], text: str) -> list[str]:
    """The glossary's Chinese that `text` does not hold (a term given twice must be there
    twice)."""
    seen: Counter[str] = Counter()
    missed = []
    for term in terms:
        seen[term] += 1
        if text.count(term) < seen[term]:
            missed.append(term)
    return missed
