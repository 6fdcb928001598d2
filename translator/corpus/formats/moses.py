"""A corpus as two line-aligned files (`news.en` + `news.zh`, "Moses format", as OPUS,
WMT, fairseq, OpenNMT-py and Marian have it): line N of one is the translation of line N
of the other. A bad line on either side is skipped and counted, and the lines after it
stay aligned.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pandas as pd

from translator.corpus.formats import readers
from translator.corpus.formats.compression import open_input, reading
from translator.corpus.formats.read_stats import ReadStats
from translator.corpus.formats.readers import Block, decode_lines
from translator.data.normalization import CONTROL
from translator.errors import UserError


@dataclass
class PairBlock:
    """The same lines of both files: their bytes and the 1-based number of the first."""

    first_line: int
    en: bytes
    zh: bytes

    @property
    def size(self) -> int:
        return len(self.en) + len(self.zh)


@dataclass(frozen=True)
class TextFile:
    path: Path
    member: str | None = None  # a file inside the zip archive at `path`

    def __str__(self) -> str:
        return f"{self.path}/{self.member}" if self.member else str(self.path)


class _Lines:
    """A binary stream read in whole lines."""

    def __init__(self, stream: BinaryIO):
        self.stream, self.rest, self.eof = stream, b"", False

    def _fill(self) -> None:
        data = self.stream.read(readers.BLOCK_BYTES)  # looked up each time: tests shrink it
        self.eof = not data
        self.rest += data

    def block(self) -> bytes:
        """About readers.BLOCK_BYTES of whole lines (the last may lack its newline)."""
        if not self.eof:
            self._fill()
        while not self.eof and b"\n" not in self.rest:  # one line longer than a block
            self._fill()
        cut = len(self.rest) if self.eof else self.rest.rfind(b"\n") + 1
        out, self.rest = self.rest[:cut], self.rest[cut:]
        return out

    def take(self, count: int) -> bytes:
        """The next `count` lines, or all that are left if there are fewer."""
        while not self.eof and self.rest.count(b"\n") < count:
            self._fill()
        newlines = np.flatnonzero(np.frombuffer(self.rest, np.uint8) == 10)
        cut = newlines[count - 1] + 1 if len(newlines) >= count else len(self.rest)
        out, self.rest = self.rest[:cut], self.rest[cut:]
        return out

    def count_rest(self) -> int:
        """How many lines are left (reads to the end)."""
        lines = 0
        while self.rest or not self.eof:
            lines += line_count(self.rest)
            self.rest = b""
            if not self.eof:
                self._fill()
        return lines


def line_count(data: bytes) -> int:
    return data.count(b"\n") + (bool(data) and not data.endswith(b"\n"))


def pair_blocks(en: TextFile, zh: TextFile) -> Iterator[PairBlock]:
    """Both files in step: a block of whole lines of the English file, then exactly as many
    lines of the Chinese one, so a block's lines are pairs and go through the same workers as
    any other. Files whose line counts differ are one error, raised before anything is
    written."""
    with ExitStack() as stack:
        streams = []
        for f in (en, zh):
            stack.enter_context(reading(f.path))
            streams.append(_Lines(stack.enter_context(open_input(f.path, f.member))))
        en_lines, zh_lines = streams
        first = 1
        while True:
            en_block = en_lines.block()
            count = line_count(en_block)
            zh_block = zh_lines.take(count or 1)
            if line_count(zh_block) != count:
                en_total = first - 1 + count + en_lines.count_rest()
                zh_total = first - 1 + line_count(zh_block) + zh_lines.count_rest()
                raise UserError(
                    f"{en} has {en_total:,} lines but {zh} has {zh_total:,}: the two files of "
                    f"a pair must be line-aligned (nothing was prepared)"
                )
            if not count:
                return
            yield PairBlock(first, en_block, zh_block)
            first += count


def parse_pair_block(names: tuple[str, str], block: PairBlock) -> tuple[pd.DataFrame, ReadStats]:
    """The raw pairs of a block, indexed by line number, and what was skipped in it."""
    stats = ReadStats()
    en = decode_lines(Block(block.first_line, block.en, block.first_line == 1))
    zh = decode_lines(Block(block.first_line, block.zh, block.first_line == 1))
    stats.rows += len(en)
    keep = pd.Series(True, index=en.index)
    for name, side in zip(names, (en, zh), strict=True):
        undecodable = keep & side.str.contains("\ufffd", regex=False)
        stats.skip(
            Path(name), en.index[undecodable], "undecodable", "undecodable bytes (not UTF-8)"
        )
        keep &= ~undecodable
    for name, side in zip(names, (en, zh), strict=True):
        control = keep & side.str.contains(CONTROL)
        stats.skip(Path(name), en.index[control], "control characters", "control characters")
        keep &= ~control
    return pd.DataFrame({"en": en[keep], "zh": zh[keep]}, dtype=str), stats
