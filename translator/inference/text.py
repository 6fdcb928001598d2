"""`Translator`, the Python API and what every command translates with: lines in,
translations out, over one engine (engine.py), the same for every engine.

    from translator import Translator
    translator = Translator.from_run("runs/tatoeba-cpu")
    translator.translate(["Hello.", "How are you?"], beam=5)

Read `nbest_lines` top to bottom:

    normalise → sentences (sentences.py) → each in ordinary case (casing.py)
      → a "." or "?" after a sentence that ends without a mark (decode.final_mark)
      → the glossary's terms and the unknown names found (terms.py), protected spans and
        the terms carried as placeholders written ⦅n⦆ (data/spans.py)
      → encode, cut to the model's positions
      → search: the engine's, through the term policy (terms.py), in length-sorted batches
        (those whose source has no digit outside its placeholders apart, where
        decode.digit_guard keeps digits out of the output)
      → decode pieces to text → ⦅n⦆ back to its span (one the output lacks put at its end,
        where decode.span_guard asks); the spans and terms missing named → join each
        line's sentences

A protected span (a URL, an e-mail address, a number, a code…) that a translation does not
hold verbatim is named in its `Hypothesis.lost`, and counted in `spans_lost`; one whose
placeholder the model did not write, put at the end by decode.span_guard, is named in
`Hypothesis.appended` and counted in `spans_appended`.

`Translator.open(config, checkpoint)` is the one way a model is opened (factory.py chooses
the engine): `from_run`, `from_checkpoint`, translate, eval, serve and distill all come
through it, so each decodes with the same engine and precision and says which (attention,
which reads our model's weights, through it with decode.engine = torch).
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

from translator.config import SAMPLING_KEEPS_NO_TERMS, Config, DecodeConfig, from_dict
from translator.data import spans
from translator.data.glossary import Glossary
from translator.data.normalization import normalize_en
from translator.errors import UserError
from translator.inference import sentences
from translator.inference.casing import Recaser
from translator.inference.engine import Engine, Found, detokenize
from translator.inference.factory import open_engine
from translator.inference.hypothesis import Hypothesis
from translator.inference.terms import TermPolicy, missing_terms
from translator.model.checkpoint import load as load_checkpoint
from translator.model.rundir import RunDir, why

log = logging.getLogger(__name__)
_UNMARKED = re.compile(r"[A-Za-z0-9]$")  # a sentence that ends without a mark
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


class Sentence(NamedTuple):
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
    pieces: Found
    terms: list[str] = []


class Translator:
    """Lines in, translations out, over `engine`, decoded as `decode_cfg` says."""

    def __init__(self, engine: Engine, decode_cfg: DecodeConfig):
        self.engine, self.decode_cfg = engine, decode_cfg
        self.model_line = ""  # which model decodes, and why (`open` sets it)
        self.src_tok, self.tgt_tok = engine.src_tok, engine.tgt_tok
        self.counts: Counter[str] = Counter()  # shared with with_decode's copies
        self.terms = TermPolicy(engine, self.counts)  # the glossary and the names
        self.cutter = sentences.Cutter(self.src_tok, engine.max_positions, engine.src_prefix)
        pieces = (self.src_tok.id_to_piece(i) for i in range(self.src_tok.get_piece_size()))
        self.recaser = Recaser.from_pieces(pieces)  # decode.recase (casing.py)

    @classmethod
    def open(cls, config: Config, checkpoint: Path) -> Translator:
        """The engine `decode.engine` means for `checkpoint` (factory.py), on `train.device`,
        decoding as `[decode]` says. `.engine.about.line` says which engine and precision
        decode, and why: each command logs it once its own checks have passed (so that a
        bad input stays the one line it prints)."""
        engine = open_engine(config, checkpoint)
        name = engine.about.name
        model_dir = str(engine.about.origin) if name == "ctranslate2" else ""
        decode_cfg = dataclasses.replace(config.decode, engine=name, model_dir=model_dir)
        translator = cls(engine, decode_cfg)
        if config.decode.engine == "ctranslate2" and config.decode.model_dir:
            translator.model_line = f"model: {config.decode.model_dir} (decode.model_dir)"
        else:
            translator.model_line = f"model: {checkpoint} ({why(checkpoint)})"
        return translator

    @classmethod
    def from_checkpoint(
        cls,
        path: str | Path,
        device: str | torch.device = "auto",
        decode_cfg: DecodeConfig | None = None,
        *,
        beam: int | None = None,
        length_penalty: float | None = None,
        precision: str | None = None,
        engine: str | None = None,
    ) -> Translator:
        """The model a checkpoint holds, opened as `translator translate` opens it (the
        CTranslate2 export beside it where decode.engine is auto and there is one). Decoding
        settings: `decode_cfg`, else the ones the checkpoint was trained with; `beam`,
        `length_penalty`, `precision` ("fp32", "bf16", "int8" or "auto") and `engine`
        ("torch": ours, whatever lies beside the checkpoint) override either. `.engine_line`
        says which engine and precision decode."""
        config = from_dict(load_checkpoint(path, mmap=True)["config"])
        named = {"precision": precision, "engine": engine}
        changes = overrides(beam, length_penalty) | {k: v for k, v in named.items() if v}
        config.decode = changed(decode_cfg or config.decode, **changes)
        config.train.device = str(device)
        translator = cls.open(config, Path(path))
        log.info(translator.model_line)
        log.info(translator.engine_line)
        return translator

    @classmethod
    def from_run(cls, run_dir: str | Path, device: str | torch.device = "auto", **options):
        """The model of a training run directory (`train.run_dir`): the checkpoint its
        train.final names (final.json), opened as `from_checkpoint` opens it."""
        return cls.from_checkpoint(RunDir(run_dir).final.path, device, **options)

    @property
    def engine_line(self) -> str:
        """Which engine and precision decode, and why."""
        return self.engine.about.line

    def with_decode(self, **changes) -> Translator:
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

    @property
    def glossary(self) -> Glossary | None:
        """decode.glossary's entries, loaded on first use (None without one)."""
        return self.terms.glossary(self.decode_cfg.glossary)

    def nbest_lines(
        self, lines: Sequence[str], glossary: Glossary | None = None
    ) -> list[list[Hypothesis]]:
        """Each line's hypotheses: the i-th joins the i-th of each of its pieces (their
        last where a piece has fewer), its score their sum; a blank line has none.
        `glossary`: the one to obey (default: decode.glossary's)."""
        glossary = self.glossary if glossary is None else glossary
        if glossary and self.decode_cfg.sample:  # a glossary of this call's, or the config's
            raise UserError(SAMPLING_KEEPS_NO_TERMS)
        texts = [normalize_en(line) for line in lines]
        units, owners = sentences.units(texts, self.decode_cfg.split)
        prepared = [self.prepare(unit, glossary) for unit in units]
        pieces = self.cutter.pieces([p.text for p in prepared], range(len(units)))
        if pieces.cut:
            what = "sentence" if self.decode_cfg.split else "line"
            log.warning(
                "%d %s%s longer than the model's %d tokens: cut at clause boundaries and "
                "translated in pieces",
                pieces.cut,
                what,
                "" if pieces.cut == 1 else "s",
                self.engine.max_positions,
            )
        terms = self.terms.of_pieces(
            pieces, [p.terms for p in prepared], [p.english for p in prepared]
        )
        guarded = [
            self.guards(prepared[unit].text, chinese)
            for unit, chinese in zip(pieces.line, terms, strict=True)
        ]
        found = self.terms.search(pieces.sources, guarded, terms, self.decode_cfg)
        by_unit: list[Found] = [[] for _ in units]
        for unit, hypotheses in zip(pieces.line, found, strict=True):
            by_unit[unit].append(hypotheses or [([], float("nan"))])
        by_line: list[list[Unit]] = [[] for _ in texts]
        for unit, line in enumerate(owners):
            p = prepared[unit]
            by_line[line].append(Unit(units[unit], p.spans, by_unit[unit], p.terms))
        combined = [self._restored(line) for line in by_line]
        self.counts["spans_lost"] += sum(len(found[0].lost) for found in combined if found)
        self.counts["spans_appended"] += sum(len(f[0].appended) for f in combined if f)
        self.counts["terms_missed"] += sum(len(f[0].missed) for f in combined if f)
        return combined

    def prepare(self, sentence: str, glossary: Glossary | None = None) -> Sentence:
        """One normalised sentence as the model is given it: in ordinary case
        (decode.recase), with a final mark (decode.final_mark), its spans and the terms
        carried as placeholders as ⦅n⦆ (a model trained with data.placeholders); and the
        terms of `glossary` and the unknown names the search must write (terms.py)."""
        if self.decode_cfg.recase:
            sentence = self.recaser(sentence)
        if self.decode_cfg.final_mark and _UNMARKED.search(sentence):
            sentence += _mark_for(sentence)
        carried, terms = self.terms.find(sentence, glossary, self.decode_cfg)
        chinese, english = [m.chinese for m in terms], [sentence[m.start : m.end] for m in terms]
        if not self.placeholders:
            return Sentence(sentence, [], chinese, english)
        text, held = spans.mask(sentence, extra=[(m.start, m.end, m.chinese) for m in carried])
        return Sentence(text, held, chinese, english)

    @property
    def placeholders(self) -> bool:
        """Whether the model was trained with data.placeholders (both tokenizers keep ⦅n⦆
        whole): then protected spans go through it as placeholders."""
        return self.terms.placeholders

    def for_model(self, sentence: str) -> tuple[str, list[str]]:
        """One normalised sentence as the model is given it, and its protected spans where
        placeholders stand for them (`prepare` without a glossary)."""
        prepared = self.prepare(sentence)
        return prepared.text, prepared.spans

    def guards(self, text: str, terms: Sequence[str] = ()) -> bool:
        """Whether decode.digit_guard keeps digits out of the translation of `text` (as
        the model is given it): it has none outside its placeholders, nor do the glossary
        `terms` it must hold."""
        free = spans.has_free_digit(text) or any(map(spans.has_free_digit, terms))
        return self.decode_cfg.digit_guard and not free

    def _restored(self, units: list[Unit]) -> list[Hypothesis]:
        """A line's i-th hypothesis: the i-th of each piece of each of its units (their last
        where a piece has fewer), each unit's spans put back and checked."""
        count = max((len(p) for unit in units for p in unit.pieces), default=0)
        combined = []
        for i in range(count):
            texts, lost, appended, missed, score = [], [], [], [], 0.0
            for unit in units:
                chosen = [p[min(i, len(p) - 1)] for p in unit.pieces]
                text = sentences.join([self.detokenize(ids) for ids, _ in chosen])
                if self.placeholders:  # also where it has none: a ⦅n⦆ of its own goes
                    unmasked = spans.unmask(text, unit.spans, self.decode_cfg.span_guard)
                    text, appended = unmasked.text, appended + unmasked.appended
                texts.append(text)
                lost += spans.missing(unit.source, text)
                missed += missing_terms(unit.terms, text)
                score += sum(s for _, s in chosen)
            combined.append(
                Hypothesis(
                    sentences.join(texts), score, tuple(lost), tuple(appended), tuple(missed)
                )
            )
        return combined

    def decoded(self, sentence: str) -> tuple[np.ndarray, list[int]]:
        """One normalised sentence's source ids as the model is given it (its first piece,
        as `encode` takes it), and the ids of its best translation, found as `translate`
        finds them (its decode.glossary terms and names held): what `translator attention`
        reads the weights of."""
        prepared = self.prepare(sentence, self.glossary)
        source = self.encode([prepared.text])[0]
        guard = self.guards(prepared.text, prepared.terms)
        found = self.terms.search([source], [guard], [prepared.terms], self.decode_cfg)[0]
        return source, found[0][0] if found else []

    def search(self, sources: Sequence[np.ndarray]) -> list[list[int]]:
        """Source ids (as `encode` gives them) → each one's best output ids, searched as
        decode_cfg says, without the text around it: what the benchmarks time."""
        plain = [[] for _ in sources]
        found = self.terms.search(sources, [False] * len(sources), plain, self.decode_cfg)
        return [hypotheses[0][0] if hypotheses else [] for hypotheses in found]

    def detokenize(self, ids: list[int]) -> str:
        """Output ids → one line of text (engine.detokenize)."""
        return detokenize(self.tgt_tok, ids)

    def encode(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Normalised text → source ids ending in EOS, one array a text (for looking at one
        sentence, as `translator attention` does): a text longer than the model's
        positions keeps its first piece, with a warning."""
        found = []
        for i, text in enumerate(texts, 1):
            first, *rest = self.cutter.pieces([text], [0]).sources
            if rest:
                log.warning(
                    "input %d is longer than %d tokens: only its first part is used",
                    i,
                    self.engine.max_positions,
                )
            found.append(first)
        return found

    @property
    def spans_lost(self) -> int:
        """Protected spans missing from the best translations of every call so far."""
        return self.counts["spans_lost"]

    @property
    def spans_appended(self) -> int:
        """Protected spans the model did not write, put at the end of their sentence by
        decode.span_guard, in the best translations of every call so far."""
        return self.counts["spans_appended"]


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
