"""The text side of translating, the same for every engine: sentences in, translations out.

    normalise → encode (cut to the model's positions) → sort by length into batches
      → search (the engine's) → restore the input order → decode pieces to one line of text

An engine (our PyTorch model in torch_engine.py, CTranslate2 in ct2_engine.py) subclasses
`TextTranslator` and implements `search`; everything else is shared.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import re
from collections.abc import Sequence

import numpy as np
import torch

from translator.config import DecodeConfig
from translator.data.batching import encode
from translator.data.normalization import CONTROL, normalize_en
from translator.data.tokenizer import EOS, Tokenizer

log = logging.getLogger(__name__)
_UNWRITABLE = re.compile(f"{CONTROL}|\ufffd")  # control characters, broken UTF-8


class TextTranslator:
    """The text side of translating, the same for every engine: normalise, encode, cut to
    the model's positions, search (the engine's), detokenize. Engines implement `search`."""

    def __init__(
        self, src_tok: Tokenizer, tgt_tok: Tokenizer, decode: DecodeConfig, max_positions: int
    ):
        self.src_tok = src_tok
        self.tgt_tok = tgt_tok
        self.decode = decode
        self.max_positions = max_positions

    def with_decode(self, **changes) -> TextTranslator:
        """The same engine and model with other decoding settings, e.g. beam=5."""
        other = copy.copy(self)
        other.decode = dataclasses.replace(self.decode, **changes)
        return other

    def translate(
        self,
        sentences: str | Sequence[str],
        *,
        beam: int | None = None,
        length_penalty: float | None = None,
    ):
        """English sentences → Chinese, in input order (one string → one string). Blank
        inputs give blank outputs. `beam` and `length_penalty` apply to this call only."""
        if isinstance(sentences, str):
            return self.translate([sentences], beam=beam, length_penalty=length_penalty)[0]
        if changes := overrides(beam, length_penalty):
            return self.with_decode(**changes).translate(sentences)
        texts = [normalize_en(s) for s in sentences]
        todo = [i for i, text in enumerate(texts) if text]
        results = [""] * len(texts)
        outputs = self.search(self.encode([texts[i] for i in todo], [i + 1 for i in todo]))
        for i, ids in zip(todo, outputs, strict=True):
            results[i] = self.detokenize(ids)
        return results

    def detokenize(self, ids: list[int]) -> str:
        """Output ids → one line of text. With byte fallback the model can write any byte:
        bytes that form no whole UTF-8 character (U+FFFD) and control characters are
        dropped and whitespace runs made one space, as in every training target, so an
        output never breaks into two lines."""
        text = _UNWRITABLE.sub("", self.tgt_tok.decode(ids))
        return " ".join(text.split())

    def encode(self, texts: Sequence[str], lines: Sequence[int] | None = None) -> list[np.ndarray]:
        """Normalised text → source ids ending in EOS, cut to the model's max_positions
        with a warning naming the input's line (`lines`, default 1, 2, …)."""
        limit = self.max_positions
        sources = encode(texts, self.src_tok)
        lines = lines or range(1, len(texts) + 1)
        for i, seq in enumerate(sources):
            if len(seq) > limit:
                log.warning(
                    "input %d has %d tokens; only the first %d are translated",
                    lines[i],
                    len(seq),
                    limit,
                )
                sources[i] = np.append(seq[: limit - 1], EOS).astype(seq.dtype)
        return sources

    def limits(self, source_lengths: Sequence[int]) -> torch.Tensor:
        """How many tokens each sentence may produce: a × source length + b, within the
        model's positions (BOS takes one)."""
        lengths = torch.tensor(source_lengths)
        limit = (lengths * self.decode.max_len_a + self.decode.max_len_b).long()
        return limit.clamp(max=self.max_positions - 1)

    def search(self, sources: Sequence[np.ndarray]) -> list[list[int]]:
        """Source ids → output ids (no BOS/EOS), in input order."""
        raise NotImplementedError

    def batches(self, sources: Sequence[np.ndarray]) -> list[list[int]]:
        """The indices of `sources`, sorted by length, in batches of `decode.batch_size`."""
        order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
        size = self.decode.batch_size
        return [order[start : start + size] for start in range(0, len(order), size)]


def overrides(beam: int | None, length_penalty: float | None) -> dict:
    """The Python API's decoding arguments that were given, checked as the config checks
    them, as DecodeConfig changes."""
    if beam is not None and beam < 1:
        raise ValueError(f"beam must be at least 1, got {beam}")
    if length_penalty is not None and length_penalty < 0:
        raise ValueError(f"length_penalty must be >= 0, got {length_penalty}")
    changes = {"beam": beam, "length_penalty": length_penalty}
    return {key: value for key, value in changes.items() if value is not None}
