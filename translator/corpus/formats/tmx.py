"""TMX, the translation-memory XML that OPUS and CAT tools export, read as a stream.

Each translation unit (`<tu>`) gives one pair: its first English and its first Chinese
variant, inline codes dropped (docs/formats.md). The parser frees each unit once read, so
memory stays bounded. An XML error anywhere (a truncated file) is one error line.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pandas as pd

from translator.corpus.formats.compression import open_input, reading
from translator.corpus.formats.read_stats import ReadStats
from translator.data.normalization import CONTROL
from translator.errors import UserError

BLOCK_UNITS = 100_000
_LANG_KEYS = ("{http://www.w3.org/XML/1998/namespace}lang", "lang")
_EN = re.compile(r"(en|eng)([-_].*)?", re.IGNORECASE)
_ZH = re.compile(r"(zh|cmn|zho|chi)([-_].*)?", re.IGNORECASE)
_CODES = {"bpt", "ept", "ph", "it", "ut"}  # inline native codes, not text


@dataclass
class UnitBlock:
    """Translation units: the number of the first, and each unit's English and Chinese
    text (None where the unit has no variant in that language)."""

    first_line: int
    en: list[str | None]
    zh: list[str | None]
    size: int = 0  # bytes of the file the units took (decompressed), for the progress bar


def _tag(element: ET.Element) -> str:
    return element.tag.rsplit("}", 1)[-1]


def _text(seg: ET.Element) -> str:
    """The segment's text, with inline codes dropped and the text around them kept."""
    parts = [seg.text or ""]
    for child in seg:
        if _tag(child) not in _CODES:
            parts.append(_text(child))
        parts.append(child.tail or "")
    return "".join(parts)


def _variant(unit: ET.Element, language: re.Pattern) -> str | None:
    for tuv in unit:
        lang = next((tuv.get(k) for k in _LANG_KEYS if tuv.get(k)), "")
        if _tag(tuv) == "tuv" and language.fullmatch(lang.strip()):
            seg = next((c for c in tuv if _tag(c) == "seg"), None)
            return "" if seg is None else _text(seg)
    return None


def unit_blocks(path: Path, member: str | None = None) -> Iterator[UnitBlock]:
    """The file's translation units, BLOCK_UNITS at a time."""
    block, read = UnitBlock(1, [], []), 0
    with reading(path), open_input(path, member) as f:
        stream = _Counted(f)
        try:
            parents: list[ET.Element] = []
            for event, element in ET.iterparse(stream, events=("start", "end")):
                if event == "start":
                    parents.append(element)
                    continue
                parents.pop()
                if _tag(element) != "tu":
                    continue
                block.en.append(_variant(element, _EN))
                block.zh.append(_variant(element, _ZH))
                if parents:
                    parents[-1].clear()  # the units read so far, freed
                if len(block.en) == BLOCK_UNITS:
                    block.size, read = stream.bytes - read, stream.bytes
                    yield block
                    block = UnitBlock(block.first_line + BLOCK_UNITS, [], [])
        except ET.ParseError as exc:
            name = f"{path}/{member}" if member else path
            raise UserError(
                f"{name}: not valid TMX ({exc}); the file may be cut off — nothing was "
                f"prepared from it"
            ) from None
        block.size = stream.bytes - read
    if block.en:
        yield block


class _Counted:
    """A binary stream that counts the bytes read from it."""

    def __init__(self, stream: BinaryIO):
        self.stream, self.bytes = stream, 0

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(size)
        self.bytes += len(data)
        return data


def parse_unit_block(name: str, block: UnitBlock) -> tuple[pd.DataFrame, ReadStats]:
    """The raw pairs of a block of units, indexed by unit number, and what was skipped."""
    stats = ReadStats()
    index = pd.RangeIndex(block.first_line, block.first_line + len(block.en))
    en = pd.Series(block.en, index=index, dtype=object)
    zh = pd.Series(block.zh, index=index, dtype=object)
    stats.rows += len(en)
    missing = en.isna() | zh.isna()
    stats.skip(Path(name), index[missing], "missing en or zh", "no English or no Chinese variant")
    en, zh = en[~missing].astype(str), zh[~missing].astype(str)
    control = en.str.contains(CONTROL) | zh.str.contains(CONTROL)
    stats.skip(Path(name), en.index[control], "control characters", "control characters")
    return pd.DataFrame({"en": en[~control], "zh": zh[~control]}, dtype=str), stats
