"""The glossary and the names, as one policy over any engine (`TermPolicy`): which of a
sentence's words must come out as given, how each travels, and how the engine is made to
write them.

    find(sentence, glossary)    the glossary's entries in the sentence (data/glossary.py)
                                and the names the model does not know (data/known_words.py):
                                those `carried` as placeholders, the rest `terms`
    search(...)                 the sources searched as without a glossary; the terms that
                                a translation misses placed by the model (TermPlacement):
                                each where the model most expects it, the engine writing
                                what follows afresh

On a model trained with placeholders, a name (`Python → Python`, or a capitalised word the
model never saw, decode.keep_names) and a term whose English the model never saw (GPU: it
could only guess) travel as ⦅n⦆ and come back as the glossary writes them; every other
term is placed, as is an unknown name on a model without placeholders. Why placing won
over a constrained beam search and over edits at every place:
docs/studies.md#glossaries-the-mechanism.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from translator.config import DecodeConfig
from translator.data import known_words, spans
from translator.data.glossary import Glossary, Match, sentence_ends, term_ids
from translator.inference.engine import (
    NEVER_OUTPUT,
    Engine,
    Found,
    Scored,
    batches,
    detokenize,
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
        carried: list[Match] = []
        kept: list[Match] = []
        for m in found:  # one pass: `m not in carried` would be quadratic in the matches
            carry = m.identity(sentence) or self.unseen(sentence[m.start : m.end])
            (carried if carry else kept).append(m)
        return carried, kept

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
        how = "term placement (a missing term put where the model expects it, the rest anew)"
        if self.placeholders:
            how += "; names (X → X) and terms the model never saw carried as placeholders"
        return how

    def search(
        self,
        sources: Sequence[np.ndarray],
        guarded: Sequence[bool],
        terms: Sequence[Sequence[str]],
        decode_cfg: DecodeConfig,
    ) -> Found:
        """Each source's hypotheses, holding its `terms` (Chinese): the sources searched as
        without a glossary, and the terms a best translation misses placed in it
        (`TermPlacement`). `guarded`: the sources whose outputs may not write digits."""
        ids = [[found for c in chinese if (found := self.term_ids(c))] for chinese in terms]
        size = self.engine.batch_size(decode_cfg)
        found = self.engine.search(
            sources, batches(sources, size, guarded, self.digits), decode_cfg
        )
        never = [NEVER_OUTPUT + self.digits if guard else NEVER_OUTPUT for guard in guarded]
        TermPlacement(self, sources, never, decode_cfg).run(found, ids)
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


class Placing(Engine, Protocol):
    """What placing a term asks of an engine."""

    def expected(self, sources, rows, outputs, tokens) -> list[list[float]]:
        """How much more the model expects `tokens[k]` than what output `k` wrote, at each
        of its places (log-probabilities: its ids, then EOS)."""
        ...

    def complete(self, sources, rows, prefixes, never, limits, decode_cfg) -> Found:
        """Each of `rows`' sources' hypotheses that start with its prefix."""
        ...


class TermPlacement:
    """The glossary's terms written into the translations that miss them, on any engine,
    the model choosing where and writing what follows. For a translation's first missing
    term: one teacher-forced pass over it gives, at each of its places, how much more the
    model expects the term's first token there than the token it wrote (the place where
    the model wrote its own word for the term, where it wrote one); the engine then
    searches again from the translation up to the likeliest place followed by the term,
    so that the model writes the rest afresh and need not write its own word as well. A
    term is not put after a mark that ends the sentence (。？！), nor inside a term the
    translation holds. Where what the engine
    writes loses a term the translation held, the term goes in at that place with the
    rest as it was (its score NaN). Then the next missing term, until none is."""

    def __init__(self, policy: TermPolicy, sources, never: Sequence[list[int]], decode_cfg):
        self.policy, self.sources, self.never, self.decode_cfg = policy, sources, never, decode_cfg
        self.engine: Placing = policy.engine  # type: ignore[assignment]
        self.ends = sentence_ends(self.engine.tgt_tok)
        lengths = [len(source) for source in sources]
        self.limits = output_limits(lengths, decode_cfg, self.engine.max_positions).tolist()

    def run(self, outputs: Found, ids: Sequence[list[list[int]]]) -> None:
        """The sources of `outputs` whose best translation misses one of its terms (`ids`)
        made to hold them."""
        tgt = self.engine.tgt_tok
        self.terms, self.chinese = ids, [[tgt.decode(t) for t in terms] for terms in ids]
        todo = [i for i, found in enumerate(outputs) if ids[i] and self.missing(i, best(found))]
        while todo:
            todo = self.place(todo, outputs)

    def missing(self, row: int, ids: list[int]) -> list[int]:
        """The indices of `row`'s terms that the output `ids` does not hold."""
        chinese = self.chinese[row]
        return [chinese.index(term) for term in self.policy.missing(chinese, ids)]

    def place(self, rows: list[int], outputs: Found) -> list[int]:
        """One round: each row's first missing term placed; returns the rows that still
        miss one (and may gain one more)."""
        bases = {i: best(outputs[i]) for i in rows}
        terms = {i: self.terms[i][self.missing(i, bases[i])[0]] for i in rows}
        places = self.likeliest(bases, terms)
        prefixes = {i: bases[i][: places[i]] + terms[i] for i in rows}
        completed = self.completed(prefixes)
        todo = []
        for i in rows:
            before = len(self.missing(i, bases[i]))
            found = [h for h in completed[i] if len(self.missing(i, h[0])) < before]
            inserted = prefixes[i] + bases[i][places[i] :]
            if not found and len(inserted) < self.engine.max_positions:
                found = [(inserted, float("nan"))]  # the search lost a term: the rest kept
            if not found or len(self.missing(i, found[0][0])) >= before:
                continue  # the term does not fit in the model's positions
            found.sort(key=lambda h: len(self.missing(i, h[0])))  # stable: best first
            outputs[i] = found
            if 0 < len(self.missing(i, found[0][0])) < before:
                todo.append(i)
        return todo

    def likeliest(self, bases: dict[int, list[int]], terms: dict[int, list[int]]):
        """Each row's place for its term: where the model most expects the term's first
        token over what it wrote, not after a mark that ends the sentence."""
        rows = list(bases)
        expected: list[list[float]] = []
        for at in range(0, len(rows), PLACED_AT_ONCE):
            part = rows[at : at + PLACED_AT_ONCE]
            outputs, tokens = [bases[i] for i in part], [terms[i][0] for i in part]
            expected += self.engine.expected(self.sources, part, outputs, tokens)
        places = {}
        for i, gain in zip(rows, expected, strict=True):
            open_ = self.open_places(i, bases[i], terms[i])
            # the first of equals; a place past what the engine scored (it stops at the
            # model's positions) last
            places[i] = max(open_, key=lambda p: gain[p] if p < len(gain) else float("-inf"))
        return places

    def open_places(self, row: int, base: list[int], term: list[int]) -> list[int]:
        """The places of `base` where `term` may go: not after a mark that ends the
        sentence, nor inside a term `base` holds (there it would break that term)."""
        before = len(self.missing(row, base))
        places = [p for p in range(len(base) + 1) if not (p and base[p - 1] in self.ends)]
        if before == len(self.terms[row]):  # it holds none to break
            return places
        whole = [p for p in places if len(self.missing(row, base[:p] + term + base[p:])) < before]
        return whole or places

    def completed(self, prefixes: dict[int, list[int]]) -> dict[int, list[Scored]]:
        """Each row's hypotheses that start with its prefix, searched as decode_cfg asks;
        the rows whose outputs may not write digits apart from the others."""
        found: dict[int, list[Scored]] = {}
        for never in {tuple(self.never[i]) for i in prefixes}:
            rows = [i for i in prefixes if tuple(self.never[i]) == never]
            hypotheses = self.engine.complete(
                self.sources, rows, [prefixes[i] for i in rows], list(never), self.limits,
                self.decode_cfg,
            )  # fmt: skip
            found.update(zip(rows, hypotheses, strict=True))
        return found


PLACED_AT_ONCE = 64  # translations one pass takes (CTranslate2 returns each step's logits)


def best(found: list[Scored]) -> list[int]:
    """The ids of the best of a source's hypotheses (none: the empty output)."""
    return found[0][0] if found else []


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
