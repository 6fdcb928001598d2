"""`Translator`, the Python API (docs/translating.md#python-api) and what every command
translates with: lines in, translations out, over one engine (engine.py), the same for
every engine.

Read `nbest_lines` top to bottom:

    normalise → sentences (sentences.py) → each in ordinary case (casing.py)
      → a "." or "?" after a sentence that ends without a mark (decode.final_mark)
      → the glossary's terms and the unknown names found (terms.py), protected spans and
        the terms carried as placeholders written ⦅n⦆ (data/spans.py)
      → encode, cut to the model's positions
      → search: the engine's, through the term policy (terms.py), in length-sorted batches
        (those decode.digit_guard keeps from writing digits apart)
      → decode pieces to text → ⦅n⦆ back to its span (one the output lacks put at its end,
        where decode.span_guard asks); the spans and terms missing named → join each
        line's sentences

`Translator.open` is the one way a model is opened: the API and every command use it.
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

from translator.atomic import atomic_write
from translator.config import (
    SAMPLING_KEEPS_NO_TERMS,
    Config,
    DecodeConfig,
    EngineOptions,
    from_dict,
)
from translator.data import spans
from translator.data.glossary import Glossary
from translator.data.normalization import normalize_en
from translator.data.splitting import join
from translator.documents import conversion
from translator.documents.document import Document, format_name
from translator.documents.inline import Counts, Request
from translator.errors import UserError
from translator.inference import sentences
from translator.inference.casing import Recaser
from translator.inference.engine import Engine, Found, detokenize
from translator.inference.factory import open_engine
from translator.inference.hypothesis import Hypothesis
from translator.inference.registry import SEARCHES
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
    """One sentence as the model is given it, and the glossary's terms in it."""

    text: str
    spans: list[str]  # what its placeholders stand for
    terms: list[str] = []  # each term's Chinese, which the translation must hold
    english: list[str] = []  # its English as it stands in the sentence


class Unit(NamedTuple):
    """A sentence (or line) as given, its spans and terms, and its pieces' hypotheses."""

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
        decoding as `[decode]` says. Each command logs `.engine.about.line` once its own
        checks have passed (so that a bad input stays the one line it prints)."""
        if config.decode.search:
            SEARCHES.get(config.decode.search)  # a name there is not: one line, here
        engine = open_engine(config, checkpoint)
        about = engine.about
        model_dir = str(about.origin) if engine.reads_dir else ""
        decode_cfg = dataclasses.replace(config.decode, engine=about.name, model_dir=model_dir)
        translator = cls(engine, decode_cfg)
        if config.decode.engine != "auto" and config.decode.model_dir and engine.reads_dir:
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
        **options,
    ) -> Translator:
        """The model a checkpoint holds, opened as `translator translate` opens it, decoding
        as `decode_cfg` (default: the checkpoint's) and `options`, any [decode] key
        (beam=5, precision="int8", …), say."""
        config = from_dict(load_checkpoint(path, mmap=True)["config"])
        config.decode = changed(decode_cfg or config.decode, opening=True, **options)
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
        """The same engine and model with other search and text settings, e.g. beam=5
        (a ValueError where they do not fit together or name what is fixed at opening)."""
        other = copy.copy(self)
        other.decode_cfg = changed(self.decode_cfg, **changes)
        return other

    def translate(
        self,
        sentences: str | Sequence[str],
        *,
        glossary: Glossary | Mapping[str, str] | str | Path | None = None,
        **options,
    ):
        """English lines → Chinese, in input order (one string → one string); with nbest=N,
        each line's up to N `Hypothesis`, best first. `glossary` (a TSV or CSV file, a
        mapping English → Chinese, or a Glossary) is laid over decode.glossary's;
        `options`: any search or text key of [decode] (beam=5, …), for this call only."""
        if isinstance(sentences, str):
            return self.translate([sentences], glossary=glossary, **options)[0]
        if changes := {key: value for key, value in options.items() if value is not None}:
            return self.with_decode(**changes).translate(sentences, glossary=glossary)
        given = Glossary.open(glossary)
        lines = self.nbest_lines(sentences, given.over(self.glossary) if given else None)
        return lines if self.decode_cfg.nbest else [f[0].text if f else "" for f in lines]

    def translate_file(
        self,
        path: str | Path,
        out: str | Path,
        *,
        format: str | None = None,  # noqa: A002
        glossary: Glossary | Mapping[str, str] | str | Path | None = None,
        retranslate: bool = False,
        **options,
    ) -> Counts:
        """A document (.docx .pptx .odt .epub .html .md .srt .vtt .po .xliff .txt: its
        extension or `format` says which) translated into `out`, its structure and inline
        formatting kept (docs/documents.md); `path` is only read. `retranslate`: PO and
        XLIFF entries translated already are translated again. `glossary` and `options` as
        for `translate`. Returns what was counted."""
        if Path(out).resolve() == Path(path).resolve():
            raise UserError(f"{out}: the output would overwrite the input; name another file")
        name = format_name(path, format)
        document = conversion.read(Path(path).read_bytes(), name, retranslate)
        return self.translate_document(document, out, glossary=glossary, **options)

    def translate_document(
        self,
        document: Document,
        out: str | Path,
        *,
        glossary: Glossary | Mapping[str, str] | str | Path | None = None,
        **options,
    ) -> Counts:
        """A document read already (documents/conversion.py's `read`) translated into `out`,
        written atomically; as `translate_file`."""
        options = {name: value for name, value in options.items() if value is not None}
        decode_cfg = changed(self.decode_cfg, **options)
        if decode_cfg.nbest:
            raise UserError("a document is written with the best translations: drop --nbest")
        given = Glossary.open(glossary)
        sampling = decode_cfg.sample

        def call(request: Request) -> list[str]:
            terms = Glossary.of(request.terms, "the document's formatting")
            laid = given.over(terms) if given else terms
            chosen = laid if (request.terms and not sampling) else given
            return self.translate(request.texts, glossary=chosen, **options)

        written, counts = conversion.translated(document, call, decode_cfg.split)
        atomic_write(Path(out), lambda tmp: Path(tmp).write_bytes(written))
        return counts

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
        """One normalised sentence as the model is given it (recased, marked, ⦅n⦆ for its
        spans and carried terms), and the terms and names the search must write."""
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
        """Whether the model was trained with data.placeholders: then protected spans go
        through it as ⦅n⦆."""
        return self.terms.placeholders

    def for_model(self, sentence: str) -> tuple[str, list[str]]:
        """One normalised sentence as the model is given it, and its protected spans where
        placeholders stand for them (`prepare` without a glossary)."""
        prepared = self.prepare(sentence)
        return prepared.text, prepared.spans

    def guards(self, text: str, terms: Sequence[str] = ()) -> bool:
        """Whether decode.digit_guard keeps digits out of the translation of `text` (as the
        model is given it): neither it, outside its placeholders, nor its `terms` has one."""
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
                text = join([self.detokenize(ids) for ids, _ in chosen])
                if self.placeholders:  # also where it has none: a ⦅n⦆ of its own goes
                    unmasked = spans.unmask(text, unit.spans, self.decode_cfg.span_guard)
                    text, appended = unmasked.text, appended + unmasked.appended
                texts.append(text)
                lost += spans.missing(unit.source, text)
                missed += missing_terms(unit.terms, text)
                score += sum(s for _, s in chosen)
            named = tuple(lost), tuple(appended), tuple(missed)
            combined.append(Hypothesis(join(texts), score, *named))
        return combined

    def decoded(self, sentence: str) -> tuple[np.ndarray, list[int]]:
        """One normalised sentence's source ids (its first piece) and the ids of its best
        translation as `translate` finds them: what `translator attention` reads."""
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
        """Normalised text → source ids ending in EOS, one array a text: a text longer than
        the model's positions keeps its first piece, with a warning."""
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


def changed(decode_cfg: DecodeConfig, *, opening: bool = False, **changes) -> DecodeConfig:
    """`decode_cfg` with `changes` (None: not given), checked as the config checks them (a
    ValueError); what is fixed when an engine opens (EngineOptions) only while `opening`."""
    changes = {key: value for key, value in changes.items() if value is not None}
    fixed = {f.name for f in dataclasses.fields(EngineOptions)}
    known = {f.name for f in dataclasses.fields(DecodeConfig)}
    for key in changes:
        if key not in known:
            raise ValueError(f"{key!r} is not a decoding option (a key of [decode])")
        if key in fixed and not opening:
            raise ValueError(
                f"{key} is fixed when the engine opens: give it to Translator.from_checkpoint "
                "or from_run"
            )
    decode_cfg = dataclasses.replace(decode_cfg, **changes)
    try:
        decode_cfg.check()
    except UserError as exc:
        raise ValueError(str(exc)) from None
    return decode_cfg
