"""The text side of translating, the same for every engine: lines in, translations out.

    normalise → sentences (document.py) → encode, cut to the model's positions
      → sort by length into batches → search (the engine's) → restore the input order
      → decode pieces to text → join each line's sentences

An engine (our PyTorch model in torch_engine.py, CTranslate2 in ct2_engine.py) subclasses
`TextTranslator` and implements `hypotheses`; everything else is shared.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import re
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from translator.config import DecodeConfig
from translator.data.normalization import CONTROL, normalize_en
from translator.data.tokenizer import Tokenizer
from translator.errors import UserError
from translator.inference import document
from translator.inference.document import Cutter

log = logging.getLogger(__name__)
_UNWRITABLE = re.compile(f"{CONTROL}|\ufffd")  # control characters, broken UTF-8


class Hypothesis(NamedTuple):
    """One of a line's n best translations, and its score: the log-probability the search
    ranked it by (divided by the length penalty; summed over a line's sentences)."""

    text: str
    score: float


class TextTranslator:
    """The text side of translating, the same for every engine: normalise, split into
    sentences, encode, cut to the model's positions, search (the engine's), detokenize,
    join. Engines implement `hypotheses`."""

    def __init__(
        self, src_tok: Tokenizer, tgt_tok: Tokenizer, decode_cfg: DecodeConfig, max_positions: int
    ):
        self.src_tok = src_tok
        self.tgt_tok = tgt_tok
        self.decode_cfg = decode_cfg
        self.max_positions = max_positions
        self._cutter: Cutter | None = None

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
    ):
        """English lines → Chinese, in input order (one string → one string). Each line is
        split into sentences unless `split` is False (decode.split), and blank lines give
        blank outputs. With `nbest` N ≥ 1 (decode.nbest), each line gives a list of up to
        N `Hypothesis(text, score)`, best first. Arguments apply to this call only."""
        if isinstance(sentences, str):
            return self.translate(
                [sentences], beam=beam, length_penalty=length_penalty, split=split, nbest=nbest
            )[0]
        if changes := overrides(beam, length_penalty, split, nbest):
            return self.with_decode(**changes).translate(sentences)
        lines = self.nbest_lines(sentences)
        if self.decode_cfg.nbest:
            return lines
        return [found[0].text if found else "" for found in lines]

    def nbest_lines(self, lines: Sequence[str]) -> list[list[Hypothesis]]:
        """Each line's hypotheses: the i-th joins the i-th of each of its pieces (their
        last where a piece has fewer), its score their sum; a blank line has none."""
        texts = [normalize_en(s) for s in lines]
        units, owners = document.units(texts, self.decode_cfg.split)
        pieces = self.cutter.pieces(units, owners)
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
        found = self.hypotheses(pieces.sources)
        by_line: list[list[list[tuple[list[int], float]]]] = [[] for _ in texts]
        for line, hypotheses in zip(pieces.line, found, strict=True):
            by_line[line].append(hypotheses or [([], float("nan"))])
        return [self._combine(parts) for parts in by_line]

    def _combine(self, parts: list[list[tuple[list[int], float]]]) -> list[Hypothesis]:
        count = max((len(p) for p in parts), default=0)
        combined = []
        for i in range(count):
            chosen = [p[min(i, len(p) - 1)] for p in parts]
            text = document.join([self.detokenize(ids) for ids, _ in chosen])
            combined.append(Hypothesis(text, sum(score for _, score in chosen)))
        return combined

    @property
    def cutter(self) -> document.Cutter:
        if self._cutter is None:
            self._cutter = document.Cutter(self.src_tok, self.max_positions)
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

    def hypotheses(self, sources: Sequence[np.ndarray]) -> list[list[tuple[list[int], float]]]:
        """Source ids → each source's hypotheses as (ids without BOS/EOS, score), best
        first: one (score NaN where nothing asked for it) unless decode.nbest asks for more."""
        raise NotImplementedError

    def search(self, sources: Sequence[np.ndarray]) -> list[list[int]]:
        """Source ids → the best output ids (no BOS/EOS), in input order."""
        return [found[0][0] if found else [] for found in self.hypotheses(sources)]

    def batches(self, sources: Sequence[np.ndarray]) -> list[list[int]]:
        """The indices of `sources`, sorted by length, in batches of `decode.batch_size`."""
        order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
        size = self.decode_cfg.batch_size
        return [order[start : start + size] for start in range(0, len(order), size)]


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
