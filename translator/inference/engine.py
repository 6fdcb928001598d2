"""What an engine is to the text path: sources in, hypotheses out.

An engine only searches: normalising, splitting, placeholders, the glossary and joining the
output are the text path's (text.py) and the term policy's (terms.py), for every engine.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, NamedTuple, Protocol

import numpy as np
import torch

from translator.config import Config, DecodeConfig
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
    """Which engine decodes, in which precision, from what, and why each was chosen."""

    name: str  # as decode.engine names it
    precision: str
    origin: Path | None = None  # the checkpoint, or the directory the engine reads
    reason: str = ""  # why this engine (factory.py)
    precision_reason: str = ""  # why this precision (precision.py)
    checkpoint: Path | None = None  # an export's source checkpoint (default: origin)
    sha256: str = ""  # the checkpoint's, as recorded where it was made ("": not recorded)
    weights: Path | None = None  # the weights file it reads (default: origin; distill's digest)

    @property
    def line(self) -> str:
        """The line each command prints: engine and precision, and why."""
        return f"engine: {self.name}, {self.precision} ({self.reason}; {self.precision_reason})"


class SearchBatch(NamedTuple):
    """The sources one search takes, and what binds their outputs."""

    rows: list[int]  # the sources' indices
    never: list[int]  # ids no output may write: NEVER_OUTPUT, and decode.digit_guard's digits
    limits: list[int]  # how many tokens each output may have (`output_limits`)
    prefixes: list[list[int]] | None = None  # the target ids each output begins with

    def most(self) -> list[int]:
        """Each output's length at most: its limit, or its prefix where that is longer."""
        starts = self.prefixes or [[]] * len(self.rows)
        return [max(limit, len(p)) for limit, p in zip(self.limits, starts, strict=True)]


class Forced(NamedTuple):
    """Outputs given in full, for the model to score (term placement, terms.py)."""

    rows: list[int]  # each output's source
    outputs: list[list[int]]  # its ids
    tokens: list[int]  # the token whose expectation is asked at each of its places


class Engine(Protocol):
    """A model that searches: source ids in, each source's hypotheses out; all that the text
    path, the glossary, `serve` and `distill` ask of one (docs/architecture.md#extending)."""

    about: About
    src_tok: Tokenizer
    tgt_tok: Tokenizer
    max_positions: int  # the longest source or output, in tokens
    src_prefix: str  # data.src_prefix: a piece before every source
    known_words: frozenset[str] | None  # the English words it was trained on (known_words.py)
    reads_dir: ClassVar[bool]  # it reads a directory of its own (decode.model_dir)
    auto_rank: ClassVar[int | None]  # decode.engine auto asks the highest first (None: never)

    @classmethod
    def auto(cls, checkpoint: Path) -> tuple[str | None, str]:
        """For decode.engine auto: the model directory it would decode `checkpoint` from
        ("" for the checkpoint itself; None: it does not take it), and why."""
        ...

    @classmethod
    def open(cls, config: Config, checkpoint: Path, model_dir: str, reason: str) -> Engine:
        """The engine for `checkpoint` (or `model_dir`, where it reads one) on train.device,
        in the precision decode.precision means there; `reason`: why (for `about`)."""
        ...

    def batch_size(self, decode_cfg: DecodeConfig) -> int:
        """The most sentences a search batch holds."""
        ...

    def search(
        self, sources: Sources, batches: Sequence[SearchBatch], decode_cfg: DecodeConfig
    ) -> Found:
        """Each source's decode.nbest (one without) hypotheses (ids, score), best first, the
        score NaN where nothing asked for it; each output at most its batch's `most()`
        tokens, none of `never`, starting with its prefix where the batch has them."""
        ...

    def expected(self, sources: Sources, batches: Sequence[Forced]) -> list[list[float]]:
        """For each output of the batches, in order: how much more the model expects its
        token than what the output wrote, in log-probability, before each of its ids and its
        EOS (len + 1 values)."""
        ...


def by_length(lengths: Sequence[int], size: int) -> list[list[int]]:
    """The positions of `lengths`, the shortest first, in batches of `size`: the one way
    a search or a scoring pass is cut into batches (similar lengths pad least)."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    return [order[at : at + size] for at in range(0, len(order), size)]


def batches(
    sources: Sources,
    size: int,
    guarded: Sequence[bool],
    digits: list[int],
    limits: list[int],
    prefixes: dict[int, list[int]] | None = None,
) -> list[SearchBatch]:
    """The indices of `sources` (with `prefixes`: those it starts, each output starting with
    its prefix), sorted by length, in batches of `size`: the `guarded` ones (which may not
    write the `digits`) apart from the others; `limits`: each source's."""
    given = range(len(sources)) if prefixes is None else list(prefixes)
    found = []
    for guard in (False, True):
        rows = [i for i in given if guarded[i] == guard]
        never = NEVER_OUTPUT + digits if guard else NEVER_OUTPUT
        for part in by_length([len(sources[i]) for i in rows], size):
            chosen = [rows[k] for k in part]
            starts = None if prefixes is None else [prefixes[i] for i in chosen]
            found.append(SearchBatch(chosen, never, [limits[i] for i in chosen], starts))
    return found


def output_limits(
    source_lengths: Sequence[int], decode_cfg: DecodeConfig, max_positions: int
) -> list[int]:
    """How many tokens each output may have: a × source length + b (decode.max_len_a and
    max_len_b), within the model's positions (BOS takes one)."""
    limit = torch.tensor(source_lengths) * decode_cfg.max_len_a + decode_cfg.max_len_b
    return limit.long().clamp(max=max_positions - 1).tolist()


def detokenize(tokenizer: Tokenizer, ids: list[int]) -> str:
    """Output ids → one line of text. Broken UTF-8 (byte fallback) and control characters
    are dropped and whitespace made one space, as in every training target."""
    text = _UNWRITABLE.sub("", tokenizer.decode(ids))
    return " ".join(text.split())
