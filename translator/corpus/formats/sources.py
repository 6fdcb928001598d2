"""Each corpus of `data.inputs` as prepare reads it: its files (inside a zip archive or not),
their format, and the reader that cuts them into blocks and parses a block: readers.py for
one text file, tmx.py for TMX, moses.py for an English and a Chinese file. `parse` is a pure
function of the source and a block, so the workers can run it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from translator.corpus.formats import readers
from translator.corpus.formats.archive import corpus_members, is_zip
from translator.corpus.formats.moses import PairBlock, TextFile, pair_blocks, parse_pair_block
from translator.corpus.formats.read_stats import ReadStats
from translator.corpus.formats.tmx import UnitBlock, parse_unit_block, unit_blocks
from translator.errors import UserError
from translator.inputs import Corpus


@dataclass(frozen=True)
class Source:
    index: int  # the corpus's place in data.inputs
    paths: tuple[str, ...]  # as data.inputs gives them
    name: str  # as stats.json and the summary name it
    format: str  # tatoeba | anki | jsonl | tmx | moses
    files: tuple[TextFile, ...]  # one, or the English and the Chinese file
    weight: float
    train_only: bool = False

    @property
    def size(self) -> int:
        """Bytes on disk (compressed, for a compressed file), for the progress bar."""
        return sum(path.stat().st_size for path in {f.path for f in self.files})


def resolve(index: int, corpus: Corpus, fmt: str) -> Source:
    """The checked files and format of a corpus (`fmt`: data.format, used for one-file
    corpora; "auto" detects it). One error line for anything that cannot be read."""
    files = tuple(f for p in map(Path, corpus.paths) for f in _files(p))
    if len(files) > 2:
        raise UserError(f"{corpus.name}: a pair of files each holding a pair is not a corpus")
    if len(files) == 2:
        for f in files:
            readers.check_input(f.path, f.member)
        name, found = corpus.name, "moses"
    else:
        (only,) = files
        name, found = str(only), readers.check_format(only.path, fmt, only.member)
    return Source(index, corpus.paths, name, found, files, corpus.weight, corpus.train_only)


def _files(path: Path) -> list[TextFile]:
    """The file, or the corpus files inside it when it is a zip archive."""
    readers.check_file(path)
    return [TextFile(path, m) for m in corpus_members(path)] if is_zip(path) else [TextFile(path)]


def blocks(source: Source) -> Iterator[readers.Block | PairBlock | UnitBlock]:
    if source.format == "moses":
        return pair_blocks(*source.files)
    (f,) = source.files
    if source.format == "tmx":
        return unit_blocks(f.path, f.member)
    return readers.blocks(f.path, f.member)


def parse(source: Source, block) -> tuple[pd.DataFrame, ReadStats]:
    """The raw pairs of one block of the source, and what was skipped in it."""
    if source.format == "moses":
        en, zh = source.files
        return parse_pair_block((str(en), str(zh)), block)
    if source.format == "tmx":
        return parse_unit_block(source.name, block)
    return readers.parse_block(Path(source.name), source.format, block)
