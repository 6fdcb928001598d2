"""The text side of translating, the same for every engine: lines in, translations out.

    normalise → sentences (document.py) → each in ordinary case (casing.py)
      → a "." or "?" after a sentence that ends without a mark (decode.final_mark)
      → protected spans as ⦅n⦆ where the model was trained with them (data/spans.py)
      → encode, cut to the model's positions → sort by length into batches (those whose
        source has no digit outside its placeholders apart, where decode.digit_guard
        keeps digits out of the output)
      → search (the engine's) → restore the input order → decode pieces to text
      → ⦅n⦆ back to its span (one the output lacks put at its end, where decode.span_guard
        asks); the spans missing from the output named → join each line's sentences

A protected span (a URL, an e-mail address, a number, a code…) that a translation does not
hold verbatim is named in its `Hypothesis.lost`, and counted in `spans_lost`; one whose
placeholder the model did not write, put at the end by decode.span_guard, is named in
`Hypothesis.appended` and counted in `spans_appended`.

An engine (our PyTorch model in torch_engine.py, CTranslate2 in ct2_engine.py) subclasses
`TextTranslator` and implements `hypotheses`; everything else is shared.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from translator.config import DecodeConfig
from translator.data import names, spans
from translator.data.glossary import Glossary, Match, term_ids
from translator.data.normalization import CONTROL, normalize_en
from translator.data.tokenizer import Tokenizer
from translator.errors import UserError
from translator.inference import document
from translator.inference.casing import Recaser
from translator.inference.document import Cutter
from translator.inference.hypothesis import Hypothesis

log = logging.getLogger(__name__)
_UNWRITABLE = re.compile(f"{CONTROL}|\ufffd")  # control characters, broken UTF-8
_UNMARKED = re.compile(r"[A-Za-z0-9]$")  # a sentence that ends without a mark
_ENDS = ("。", "？", "！")  # marks that end a Chinese sentence
_QUESTION = re.compile(
    r"^(?:what|where|who|whom|whose|why|how|when|which|do|does|did|is|are|was|were|am|can|"
    r"could|will|would|should|shall|may|might|must|have|has|had|(?:is|are|was|were|do|does|"
    r"did|ca|could|wo|would|should|have|has|had)n't)\b",
    re.IGNORECASE,
)


def _mark_for(sentence: str) -> str:
    """The mark decode.final_mark adds: "?" after a sentence that opens as an English
    question does (an interrogative or an auxiliary verb first), else "."."""
    return "?" if _QUESTION.match(sentence) else "."


class Prepared(NamedTuple):
    """One sentence as the model is given it (`text`), what its placeholders stand for
    (`spans`), and the glossary's terms in it: each one's Chinese, which the translation
    must hold, and its English as it stands in the sentence."""

    text: str
    spans: list[str]
    terms: list[str] = []
    english: list[str] = []


class Unit(NamedTuple):
    """A sentence (or line) as given, its protected spans where placeholders stand for
    them, the glossary's Chinese it must hold, and the hypotheses of each of its pieces."""

    source: str
    spans: list[str]
    pieces: list[list[tuple[list[int], float]]]
    terms: list[str] = []


class Batch(NamedTuple):
    """The indices of the sources one search takes, whether their outputs may not write
    digits (decode.digit_guard, where none of the sources has one), and whether they hold
    glossary terms (searched with constraints)."""

    rows: list[int]
    guarded: bool = False
    constrained: bool = False


class TextTranslator:
    """The text side of translating, the same for every engine: normalise, split into
    sentences, encode, cut to the model's positions, search (the engine's), detokenize,
    join. Engines implement `hypotheses`."""

    def __init__(
        self,
        src_tok: Tokenizer,
        tgt_tok: Tokenizer,
        decode_cfg: DecodeConfig,
        max_positions: int,
        src_prefix: str = "",
    ):
        self.src_tok = src_tok
        self.src_prefix = src_prefix  # data.src_prefix: a piece before every source
        self.tgt_tok = tgt_tok
        self.decode_cfg = decode_cfg
        self.max_positions = max_positions
        self.precision, self.precision_reason = "fp32", "the model as given"  # precision.py
        self.engine_line = ""  # which engine and precision decode, and why (engines.py)
        self.engine_name = ""  # torch or ctranslate2, once engines.py opened it
        self.origin: Path | None = None  # the checkpoint or exported directory decoded
        self._cutter: Cutter | None = None
        self._recaser: Recaser | None = None
        self._placeholders: bool | None = None
        self._digit_pieces: list[int] | None = None
        self._sentence_ends: list[int] | None = None
        self.counts: Counter[str] = Counter()  # shared with with_decode's copies
        self._glossaries: dict[str, Glossary] = {}  # decode.glossary, loaded once (shared)
        # the English words the model was trained on (data/names.py); None: not known
        self.known_words: frozenset[str] | None = None
        self._term_ids: dict[str, list[int] | None] = {}  # a term's target ids (shared)

    def with_decode(self, **changes) -> TextTranslator:
        """The same engine and model with other decoding settings, e.g. beam=5, checked as
        the config checks them (a ValueError when they do not fit together)."""
        other = copy.copy(self)
        other.decode_cfg = changed(self.decode_cfg, **changes)
        return other

    def translate(
        self,
        sentences: str | Sequence[str],
        *,
        beam: int | None = None,
        length_penalty: float | None = None,
        split: bool | None = None,
        nbest: int | None = None,
        glossary: Glossary | Mapping[str, str] | str | Path | None = None,
    ):
        """English lines → Chinese, in input order (one string → one string). Each line is
        split into sentences unless `split` is False (decode.split), and blank lines give
        blank outputs. With `nbest` N ≥ 1 (decode.nbest), each line gives a list of up to
        N `Hypothesis(text, score)`, best first. `glossary` (a TSV or CSV file, a mapping
        English → Chinese, or a Glossary) decides how its terms are translated, laid over
        decode.glossary's. Arguments apply to this call only."""
        if isinstance(sentences, str):
            return self.translate(
                [sentences], beam=beam, length_penalty=length_penalty, split=split,
                nbest=nbest, glossary=glossary,
            )[0]  # fmt: skip
        if changes := overrides(beam, length_penalty, split, nbest):
            return self.with_decode(**changes).translate(sentences, glossary=glossary)
        given = Glossary.open(glossary)
        lines = self.nbest_lines(sentences, given.over(self.glossary) if given else None)
        if self.decode_cfg.nbest:
            return lines
        return [found[0].text if found else "" for found in lines]

    def nbest_lines(
        self, lines: Sequence[str], glossary: Glossary | None = None
    ) -> list[list[Hypothesis]]:
        """Each line's hypotheses: the i-th joins the i-th of each of its pieces (their
        last where a piece has fewer), its score their sum; a blank line has none.
        `glossary`: the one to obey (default: decode.glossary's)."""
        glossary = self.glossary if glossary is None else glossary
        texts = [normalize_en(s) for s in lines]
        units, owners = document.units(texts, self.decode_cfg.split)
        protected = [self.prepare(u, glossary) for u in units]
        pieces = self.cutter.pieces([p.text for p in protected], range(len(units)))
        if pieces.cut:
            what = "sentence" if self.decode_cfg.split else "line"
            log.warning(
                "%d %s%s longer than the model's %d tokens: cut at clause boundaries and "
                "translated in pieces",
                pieces.cut,
                what,
                "" if pieces.cut == 1 else "s",
                self.max_positions,
            )
        terms = self._terms_of_pieces(pieces, protected)
        guarded = [
            self.guards(protected[unit].text, chinese)
            for unit, chinese in zip(pieces.line, terms, strict=True)
        ]
        found = self._held(pieces.sources, guarded, terms)
        by_unit: list[list[list[tuple[list[int], float]]]] = [[] for _ in units]
        for unit, hypotheses in zip(pieces.line, found, strict=True):
            by_unit[unit].append(hypotheses or [([], float("nan"))])
        by_line: list[list[Unit]] = [[] for _ in texts]
        for unit, line in enumerate(owners):
            prepared = protected[unit]
            by_line[line].append(Unit(units[unit], prepared.spans, by_unit[unit], prepared.terms))
        combined = [self._combine(line) for line in by_line]
        self.counts["spans_lost"] += sum(len(found[0].lost) for found in combined if found)
        self.counts["spans_appended"] += sum(len(f[0].appended) for f in combined if f)
        self.counts["terms_missed"] += sum(len(f[0].missed) for f in combined if f)
        return combined

    def _held(self, sources, guarded, terms: list[list[str]]):
        """The hypotheses of each source, holding its glossary `terms`: with
        decode.glossary_search = "missing", the sources are searched as without a glossary
        and only those whose best translation lacks a term searched again with
        constraints; with "all", every source with a term is searched with them."""
        term_ids = [[ids for c in chinese if (ids := self.term_ids(c))] for chinese in terms]
        if self.decode_cfg.glossary_search == "all" or not any(term_ids):
            return self.hypotheses(sources, guarded, term_ids)
        found = self.hypotheses(sources, guarded)
        again = [
            i
            for i, (ids, chinese) in enumerate(zip(term_ids, terms, strict=True))
            if ids and (not found[i] or missing_terms(chinese, self.detokenize(found[i][0][0])))
        ]
        if again:
            redone = self.hypotheses(
                [sources[i] for i in again],
                [guarded[i] for i in again],
                [term_ids[i] for i in again],
            )
            for i, hypotheses in zip(again, redone, strict=True):
                found[i] = hypotheses
        return found

    def _terms_of_pieces(self, pieces: document.Pieces, protected: list[Prepared]):
        """The glossary's Chinese each piece must hold: its sentence's, or, of a sentence
        cut into pieces, those whose English the piece holds."""
        terms: list[list[str]] = []
        count = Counter(pieces.line)
        for i, unit in enumerate(pieces.line):
            prepared = protected[unit]
            whole = count[unit] == 1
            if whole or not prepared.terms:
                terms.append(prepared.terms if whole else [])
                continue
            text = self.src_tok.decode(pieces.sources[i].tolist()).lower()
            terms.append(
                [
                    c
                    for c, e in zip(prepared.terms, prepared.english, strict=True)
                    if e.lower() in text
                ]
            )
        return terms

    def _combine(self, units: list[Unit]) -> list[Hypothesis]:
        """A line's i-th hypothesis: the i-th of each piece of each of its units (their last
        where a piece has fewer), each unit's spans put back and checked."""
        count = max((len(p) for unit in units for p in unit.pieces), default=0)
        combined = []
        for i in range(count):
            texts, lost, appended, missed, score = [], [], [], [], 0.0
            for unit in units:
                chosen = [p[min(i, len(p) - 1)] for p in unit.pieces]
                text = document.join([self.detokenize(ids) for ids, _ in chosen])
                if self.placeholders:  # also where it has none: a ⦅n⦆ of its own goes
                    unmasked = spans.unmask(text, unit.spans, self.decode_cfg.span_guard)
                    text, appended = unmasked.text, appended + unmasked.appended
                texts.append(text)
                lost += spans.missing(unit.source, text)
                missed += missing_terms(unit.terms, text)
                score += sum(s for _, s in chosen)
            combined.append(
                Hypothesis(document.join(texts), score, tuple(lost), tuple(appended), tuple(missed))
            )
        return combined

    def for_model(self, sentence: str) -> tuple[str, list[str]]:
        """One normalised sentence as the model is given it, and its protected spans where
        placeholders stand for them (`prepare` without a glossary)."""
        prepared = self.prepare(sentence)
        return prepared.text, prepared.spans

    def prepare(self, sentence: str, glossary: Glossary | None = None) -> Prepared:
        """One normalised sentence as the model is given it: in ordinary case
        (decode.recase), with a final mark (decode.final_mark), its spans as ⦅n⦆ (a model
        trained with data.placeholders); and the terms of `glossary` it holds outside its
        spans, and the names the model does not know (decode.keep_names: data/names.py).
        On a model with placeholders, an entry that keeps its English (a name: `Python →
        Python`) and an unknown name are spans too, given back as the glossary writes them
        or as written (with decode.glossary_mode = placeholders, every entry is a span);
        every other term goes to the search as a constraint, which also keeps an unknown
        name on a model without placeholders."""
        if self.decode_cfg.recase:
            sentence = self.recaser(sentence)
        if self.decode_cfg.final_mark and _UNMARKED.search(sentence):
            sentence += _mark_for(sentence)
        found = self._entries_in(sentence, glossary)
        carried = self._carried(sentence, found)
        terms = [m for m in found if m not in carried]
        chinese, english = [m.chinese for m in terms], [sentence[m.start : m.end] for m in terms]
        if not self.placeholders:
            return Prepared(sentence, [], chinese, english)
        text, held = spans.mask(sentence, extra=[(m.start, m.end, m.chinese) for m in carried])
        return Prepared(text, held, chinese, english)

    def _entries_in(self, sentence: str, glossary: Glossary | None) -> list[Match]:
        """The glossary's entries in `sentence` outside its protected spans, and the names
        the model does not know (decode.keep_names), each one a name that keeps its
        English; left to right."""
        protected = spans.ranges(sentence)
        found = glossary.find(sentence, protected) if glossary else []
        self.counts["terms"] += len(found)
        if not self.decode_cfg.keep_names or self.known_words is None:
            return found
        taken = protected + [(m.start, m.end) for m in found]
        unknown = names.unknown(sentence, self.known_words, taken)
        self.counts["names_kept"] += len(unknown)
        return sorted(found + [Match(s, e, sentence[s:e]) for s, e in unknown])

    def _carried(self, sentence: str, found: list[Match]) -> list[Match]:
        """Of the entries `found`, those carried as placeholders, on a model trained with
        them: the names (X → X), and the terms whose English the model never saw (GPU,
        where its words are known: data/names.py), which it could only guess at, so it
        loses nothing by seeing a placeholder instead; all of them with
        decode.glossary_mode = placeholders."""
        if found and self.glossary_placeholders:
            return found
        if not self.placeholders:
            return []
        return [m for m in found if m.identity(sentence) or self.unseen(sentence[m.start : m.end])]

    def unseen(self, english: str) -> bool:
        """Whether no word of `english` is one the model was trained on (False where its
        words are not known)."""
        words = names.words_of(english)
        known = self.known_words
        return known is not None and bool(words) and not any(names.seen(w, known) for w in words)

    @property
    def glossary_placeholders(self) -> bool:
        """decode.glossary_mode = placeholders: every term carried as ⦅n⦆ and replaced by
        its Chinese, which only a model trained with placeholders can do."""
        if self.decode_cfg.glossary_mode != "placeholders":
            return False
        if not self.placeholders:
            raise UserError(
                "decode.glossary_mode = placeholders needs a model trained with "
                "data.placeholders; this one was not (use glossary_mode = search)"
            )
        return True

    @property
    def glossary(self) -> Glossary | None:
        """decode.glossary's entries, loaded on first use (None without one)."""
        path = self.decode_cfg.glossary
        if not path:
            return None
        if path not in self._glossaries:
            self._glossaries[path] = Glossary.load(path)
        return self._glossaries[path]

    def term_ids(self, chinese: str) -> list[int] | None:
        """A glossary term as the target ids the search must write (glossary.term_ids)."""
        if chinese not in self._term_ids:
            self._term_ids[chinese] = term_ids(self.tgt_tok, chinese)
        return self._term_ids[chinese]

    @property
    def glossary_mechanism(self) -> str:
        """How this engine makes a translation hold a glossary's terms, in words."""
        if self.glossary_placeholders:
            return "placeholders (decode.glossary_mode): each term as ⦅n⦆, then its Chinese"
        names = ""
        if self.placeholders:
            names = "; names (X → X) and terms the model never saw carried as placeholders"
        beams = max(self.decode_cfg.beam, self.decode_cfg.glossary_beam)
        return f"{self.constrained_search} ({beams} beams){names}"

    constrained_search = "constrained beam search"  # an engine's search with constraints

    def guards(self, text: str, terms: Sequence[str] = ()) -> bool:
        """Whether decode.digit_guard keeps digits out of the translation of `text` (as
        the model is given it): it has none outside its placeholders, nor do the glossary
        `terms` it must hold."""
        free = spans.has_free_digit(text) or any(map(spans.has_free_digit, terms))
        return self.decode_cfg.digit_guard and not free

    def decoded(self, sentence: str) -> tuple[np.ndarray, list[int]]:
        """One normalised sentence's source ids as the model is given it (its first piece,
        as `encode` takes it), and the ids of its best translation, found as `translate`
        finds them (its decode.glossary terms and names held): what `translator attention`
        reads the weights of."""
        prepared = self.prepare(sentence, self.glossary)
        source = self.encode([prepared.text])[0]
        guard = self.guards(prepared.text, prepared.terms)
        found = self._held([source], [guard], [prepared.terms])[0]
        return source, found[0][0] if found else []

    @property
    def digit_pieces(self) -> list[int]:
        """The target pieces a guarded output may not write (spans.digit_pieces)."""
        if self._digit_pieces is None:
            self._digit_pieces = spans.digit_pieces(self.tgt_tok)
        return self._digit_pieces

    @property
    def sentence_ends(self) -> list[int]:
        """The target pieces that end with a mark that ends a sentence (。？！): what a
        constrained search may not write before every term is."""
        if self._sentence_ends is None:
            pieces = (self.tgt_tok.id_to_piece(i) for i in range(self.tgt_tok.get_piece_size()))
            self._sentence_ends = [i for i, p in enumerate(pieces) if p.endswith(_ENDS)]
        return self._sentence_ends

    @property
    def spans_lost(self) -> int:
        """Protected spans missing from the best translations of every call so far."""
        return self.counts["spans_lost"]

    @property
    def spans_appended(self) -> int:
        """Protected spans the model did not write, put at the end of their sentence by
        decode.span_guard, in the best translations of every call so far."""
        return self.counts["spans_appended"]

    @property
    def placeholders(self) -> bool:
        """Whether the model was trained with data.placeholders (both tokenizers keep ⦅n⦆
        whole): then protected spans go through it as placeholders."""
        if self._placeholders is None:
            self._placeholders = spans.has_placeholders(self.src_tok) and spans.has_placeholders(
                self.tgt_tok
            )
        return self._placeholders

    @property
    def recaser(self) -> Recaser:
        """decode.recase (casing.py), from the source tokenizer's vocabulary."""
        if self._recaser is None:
            pieces = (self.src_tok.id_to_piece(i) for i in range(self.src_tok.get_piece_size()))
            self._recaser = Recaser.from_pieces(pieces)
        return self._recaser

    @property
    def cutter(self) -> document.Cutter:
        if self._cutter is None:
            self._cutter = document.Cutter(self.src_tok, self.max_positions, self.src_prefix)
        return self._cutter

    def detokenize(self, ids: list[int]) -> str:
        """Output ids → one line of text. With byte fallback the model can write any byte:
        bytes that form no whole UTF-8 character (U+FFFD) and control characters are
        dropped and whitespace runs made one space, as in every training target, so an
        output never breaks into two lines."""
        text = _UNWRITABLE.sub("", self.tgt_tok.decode(ids))
        return " ".join(text.split())

    def encode(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Normalised text → source ids ending in EOS, one array a text (for looking at one
        sentence, as `translator attention` does): a text longer than the model's
        positions keeps its first piece, with a warning."""
        sources = []
        for i, text in enumerate(texts, 1):
            first, *rest = self.cutter.pieces([text], [0]).sources
            if rest:
                log.warning(
                    "input %d is longer than %d tokens: only its first part is used",
                    i,
                    self.max_positions,
                )
            sources.append(first)
        return sources

    def limits(self, source_lengths: Sequence[int]) -> torch.Tensor:
        """How many tokens each sentence may produce: a × source length + b, within the
        model's positions (BOS takes one)."""
        lengths = torch.tensor(source_lengths)
        limit = (lengths * self.decode_cfg.max_len_a + self.decode_cfg.max_len_b).long()
        return limit.clamp(max=self.max_positions - 1)

    def hypotheses(
        self,
        sources: Sequence[np.ndarray],
        guarded: Sequence[bool] | None = None,
        terms: Sequence[Sequence[list[int]]] | None = None,
    ) -> list[list[tuple[list[int], float]]]:
        """Source ids → each source's hypotheses as (ids without BOS/EOS, score), best
        first: one (score NaN where nothing asked for it) unless decode.nbest asks for more.
        Where `guarded` is true for a source, its outputs write no `digit_pieces`; `terms`:
        the target ids of the glossary terms each source's outputs must hold."""
        raise NotImplementedError

    def search(self, sources: Sequence[np.ndarray]) -> list[list[int]]:
        """Source ids → the best output ids (no BOS/EOS), in input order."""
        return [found[0][0] if found else [] for found in self.hypotheses(sources)]

    def batch_size(self) -> int:
        """The most sentences a decoding batch holds (an engine may take fewer)."""
        return self.decode_cfg.batch_size

    def batches(
        self,
        sources: Sequence[np.ndarray],
        guarded: Sequence[bool] | None = None,
        terms: Sequence[Sequence[list[int]]] | None = None,
    ) -> list[Batch]:
        """The indices of `sources`, sorted by length, in batches of `decode.batch_size`:
        the guarded ones apart from the others, and those with glossary terms apart from
        those without (which so decode exactly as they would without a glossary)."""
        guarded = guarded or [False] * len(sources)
        constrained = [bool(t) for t in terms] if terms else [False] * len(sources)
        size, batches = self.batch_size(), []
        for guard, bound in ((False, False), (True, False), (False, True), (True, True)):
            order = sorted(
                (i for i in range(len(sources)) if (guarded[i], constrained[i]) == (guard, bound)),
                key=lambda i: len(sources[i]),
            )
            batches += [
                Batch(order[at : at + size], guard, bound) for at in range(0, len(order), size)
            ]
        return batches


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


def changed(decode_cfg: DecodeConfig, **changes) -> DecodeConfig:
    """`decode_cfg` with `changes`, checked as the config checks them (ValueError: the Python
    API's error for arguments)."""
    decode_cfg = dataclasses.replace(decode_cfg, **changes)
    try:
        decode_cfg.check()
    except UserError as exc:
        raise ValueError(str(exc)) from None
    return decode_cfg


def overrides(
    beam: int | None = None,
    length_penalty: float | None = None,
    split: bool | None = None,
    nbest: int | None = None,
) -> dict:
    """The Python API's decoding arguments that were given, as DecodeConfig changes (for
    `changed`, which checks them; the beam here, as the config checks it elsewhere)."""
    if beam is not None and beam < 1:
        raise ValueError(f"beam must be at least 1, got {beam}")
    changes = {"beam": beam, "length_penalty": length_penalty, "split": split, "nbest": nbest}
    return {key: value for key, value in changes.items() if value is not None}
