"""The glossary and the names, as one policy over any engine (`TermPolicy`): which of a
sentence's words must come out as given, how each travels, and how the engine is made to
write them.

On a model trained with placeholders, a name (`Python → Python`, or a capitalised word the
model never saw) and a term whose English the model never saw travel as ⦅n⦆; every other
term is placed (docs/translating.md#glossaries; why: docs/studies.md#glossaries-the-mechanism).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from translator.config import DecodeConfig
from translator.data import known_words, spans
from translator.data.glossary import Glossary, Match, sentence_ends, term_ids
from translator.inference.engine import (
    Engine,
    Forced,
    Found,
    Scored,
    batches,
    by_length,
    detokenize,
    output_limits,
)
from translator.inference.sentences import Pieces


class TermPolicy:
    """The glossary and the names for one engine; `counts` (shared with the translator): the
    terms and names found."""

    def __init__(self, engine: Engine, counts: Counter[str]):
        self.engine, self.counts = engine, counts
        self.placeholders = all(map(spans.has_placeholders, (engine.src_tok, engine.tgt_tok)))
        self.digits = spans.digit_pieces(engine.tgt_tok)  # what decode.digit_guard keeps out
        self._glossaries: dict[str, Glossary] = {}  # decode.glossary, loaded once
        self._term_ids: dict[str, list[int] | None] = {}  # a term's target ids

    def glossary(self, path: str) -> Glossary | None:
        """The glossary file `path` (decode.glossary), loaded on first use (None for "")."""
        if path and path not in self._glossaries:
            self._glossaries[path] = Glossary.load(path)
        return self._glossaries.get(path)

    def find(
        self, sentence: str, glossary: Glossary | None, decode_cfg: DecodeConfig
    ) -> tuple[list[Match], list[Match]]:
        """The entries of `glossary` in `sentence` outside its protected spans and the names
        the model does not know (decode.keep_names): those carried as placeholders and those
        the search must write, left to right. Sampling keeps no terms, only placeholders."""
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
        known = self.engine.known_words
        words = [] if known is None else known_words.words_of(english)
        return bool(words) and not any(known_words.seen(w, known) for w in words)

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
        """Each source's hypotheses, searched as without a glossary, the `terms` (Chinese) a
        best one misses then placed in it; `guarded`: those whose outputs write no digit."""
        ids = [[found for c in chinese if (found := self.term_ids(c))] for chinese in terms]
        limits = output_limits([len(s) for s in sources], decode_cfg, self.engine.max_positions)
        todo = batches(sources, self.engine.batch_size(decode_cfg), guarded, self.digits, limits)
        found = self.engine.search(sources, todo, decode_cfg)
        if any(ids):
            TermPlacement(self, sources, guarded, limits, decode_cfg).run(found, ids)
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


class TermPlacement:
    """The glossary's terms written into the translations that miss them, one term a round,
    on any engine: the model chooses where and writes what follows afresh
    (docs/translating.md#glossaries)."""

    def __init__(self, policy: TermPolicy, sources, guarded, limits: list[int], decode_cfg):
        self.policy, self.sources, self.guarded = policy, sources, guarded
        self.engine, self.limits, self.decode_cfg = policy.engine, limits, decode_cfg
        self.ends = sentence_ends(self.engine.tgt_tok)

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
        size = min(PLACED_AT_ONCE, self.engine.batch_size(self.decode_cfg))
        lengths = [len(self.sources[i]) for i in rows]
        parts = [[rows[k] for k in part] for part in by_length(lengths, size)]
        forced = [Forced(p, [bases[i] for i in p], [terms[i][0] for i in p]) for p in parts]
        gains = self.engine.expected(self.sources, forced)
        expected = dict(zip([i for p in parts for i in p], gains, strict=True))
        places = {}
        for i in rows:
            gain, open_ = expected[i], self.open_places(i, bases[i], terms[i])
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
        """Each row's hypotheses that start with its prefix, in batches cut as every search's
        are (those whose outputs write no digit apart)."""
        size = self.engine.batch_size(self.decode_cfg)
        digits = self.policy.digits
        todo = batches(self.sources, size, self.guarded, digits, self.limits, prefixes)
        found = self.engine.search(self.sources, todo, self.decode_cfg)
        return {i: found[i] for batch in todo for i in batch.rows}


PLACED_AT_ONCE = 64  # translations one scoring pass takes (each step's logits come back)


def best(found: list[Scored]) -> list[int]:
    """The ids of the best of a source's hypotheses (none: the empty output)."""
    return found[0][0] if found else []


def missing_terms(terms: Sequence[str], text: str) -> list[str]:
    """The glossary's Chinese that `text` does not hold (a term given twice, twice)."""
    seen: Counter[str] = Counter()
    missed = []
    for term in terms:
        seen[term] += 1
        if text.count(term) < seen[term]:
            missed.append(term)
    return missed
