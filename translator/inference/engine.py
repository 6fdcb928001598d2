"""What an engine is to the text path: sources in, hypotheses out.

    Engine          the protocol our PyTorch model (torch_engine.py) and CTranslate2
                    (ct2_engine.py) implement; factory.py opens one
    SearchBatch     the sources one search takes: their indices, and the ids none of
                    their outputs may write
    batches(...)    sources sorted by length into SearchBatches
    output_limits   how many tokens each output may have
    detokenize      output ids → one line of text

An engine only searches: normalising, splitting, placeholders, the glossary and joining
the output are the text path's (text.py) and the term policy's (terms.py), the same for
every engine.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Protocol

import numpy as np
import torch

from translator.config import DecodeConfig
from translator.data.normalization import CONTROL
from translator.data.tokenizer import BOS, PAD, UNK, Tokenizer

NEVER_OUTPUT = [PAD, UNK, BOS]  # ids no engine writes (UNK would print " ⁇ ")
Scored = tuple[list[int], float]  # one hypothesis: its ids (no BOS/EOS) and its score
Found = list[list[Scored]]  # each source's hypotheses, best first
Sources = Sequence[np.ndarray]  # source ids, each ending in EOS
_UNWRITABLE = re.compile(f"{CONTROL}|\ufffd")  # control characters, broken UTF-8


def length_penalty(length: int | torch.Tensor, alpha: float):
    """GNMT's lp(Y) = ((5 + |Y|) / 6) ** alpha; a hypothesis scores log P(Y) / lp(Y)."""
    return ((5 + length) / 6) ** alpha


@dataclass(frozen=True)
class About:
    """Which engine decodes (`name`: torch or ctranslate2), in which precision, from what
    (`origin`: the checkpoint or the exported directory), and why each was chosen."""

    name: str
    precision: str
    origin: Path | None = None
    reason: str = ""  # why this engine (factory.py)
    precision_reason: str = ""  # why this precision (precision.py)

    @property
    def line(self) -> str:
        """The line each command prints: engine and precision, and why."""
        return f"engine: {self.name}, {self.precision} ({self.reason}; {self.precision_reason})"


class SearchBatch(NamedTuple):
    """The indices of the sources one search takes, and the ids none of their outputs may
    write (NEVER_OUTPUT, and the digits decode.digit_guard keeps out)."""

    rows: list[int]
    never: list[int]


class Engine(Protocol):
    """A model that searches: source ids in, each source's hypotheses out."""

    about: About
    src_tok: Tokenizer
    tgt_tok: Tokenizer
    max_positions: int  # the longest source or output, in tokens
    src_prefix: str  # data.src_prefix: a piece before every source
    known_words: frozenset[str] | None  # the English words it was trained on (known_words.py)

    def batch_size(self, decode_cfg: DecodeConfig) -> int:
        """The most sentences a search batch holds."""
        ...

    def search(
        self, sources: Sources, batches: Sequence[SearchBatch], decode_cfg: DecodeConfig
    ) -> Found:
        """Each source's hypotheses (ids, score), best first, searched batch by batch as
        `decode_cfg` asks: decode.nbest of them (one without), the score NaN where nothing
        asked for it."""
        ...


def batches(
    sources: Sequence[np.ndarray], size: int, guarded: Sequence[bool], digits: list[int]
) -> list[SearchBatch]:
    """The indices of `sources`, sorted by length, in batches of `size`: the `guarded` ones
    (which may not write the `digits`) apart from the others."""
    found = []
    for guard in (False, True):
        order = sorted(
            (i for i in range(len(sources)) if guarded[i] == guard), key=lambda i: len(sources[i])
        )
        never = NEVER_OUTPUT + digits if guard else NEVER_OUTPUT
        found += [SearchBatch(order[at : at + size], never) for at in range(0, len(order), size)]
    return found


def output_limits(
    source_lengths: Sequence[int], decode_cfg: DecodeConfig, max_positions: int
) -> torch.Tensor:
    """How many tokens each output may have: a × source length + b (decode.max_len_a and
    max_len_b), within the model's positions (BOS takes one)."""
    lengths = torch.tensor(source_lengths)
    limit = (lengths * decode_cfg.max_len_a + decode_cfg.max_len_b).long()
    return limit.clamp(max=max_positions - 1)


def detokenize(tokenizer: Tokenizer, ids: list[int]) -> str:
    """Output ids → one line of text. With byte fallback a model can write any byte: bytes
    that form no whole UTF-8 character (U+FFFD) and control characters are dropped and
    whitespace runs made one space, as in every training target, so an output never breaks
    into two lines."""
    text = _UNWRITABLE.sub("", tokenizer.decode(ids))
    return " ".join(text.split())
