"""Readers for the single-file table formats, yielding chunks of raw (en, zh) pairs.

- tatoeba: Tatoeba's sentence-pairs export, `en_id <TAB> en <TAB> zh_id <TAB> zh`
- anki:    manythings.org/anki files, `en <TAB> zh <TAB> attribution` (attribution optional)
- jsonl:   one JSON object a line, `{"english": ..., "chinese": ...}`

A file is read in blocks of whole lines, each checked with vectorised string operations; a
row that cannot be used is skipped and counted (docs/formats.md#input-formats), never
stopping the read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import get_args

import pandas as pd

from translator.config import InputFormat
from translator.corpus.formats.compression import open_input, reading
from translator.corpus.formats.read_stats import ReadStats
from translator.data.normalization import CONTROL
from translator.errors import UserError

FORMATS = tuple(name for name in get_args(InputFormat) if name != "auto")  # data.format
BLOCK_BYTES = 16 << 20  # read this much at a time, cut at the last newline
HAN = r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]"

# columns of each table format, and where English and Chinese are
_TABLES = {
    "tatoeba": {"columns": 4, "min_columns": 4, "en": 1, "zh": 3, "ids": (0, 2)},
    "anki": {"columns": 3, "min_columns": 2, "en": 0, "zh": 1, "ids": ()},
}
_MAGIC = {
    b"PK\x03\x04": "a zip archive (only a corpus in data.inputs may be one)",
    b"\xff\xfe": "UTF-16 text: save it as UTF-8",
    b"\xfe\xff": "UTF-16 text: save it as UTF-8",
}


def check_file(path: Path) -> None:
    if not path.exists():
        raise UserError(f"input file not found: {path}")
    if not path.is_file():
        raise UserError(f"input is not a file: {path}")


def check_input(path: Path, member: str | None = None) -> None:
    """One error line unless the file (or the zip archive's `member`) is UTF-8 text with
    something in it, or a TMX file."""
    check_file(path)
    with reading(path), open_input(path, member) as f:
        head = f.read(1 << 16)
        more = bool(f.read(1))
    name = f"{path}/{member}" if member else path
    if not head.strip() and not more:
        raise UserError(f"input file is empty: {name}")
    if is_tmx(head):
        return
    for magic, what in _MAGIC.items():
        if head.startswith(magic):
            raise UserError(f"{name} is {what}")
    text = head.decode("utf-8", errors="replace")
    odd = sum(text.count(c) for c in "\ufffd\x00")
    if odd > max(8, len(text) // 20):
        raise UserError(f"{name} is not a UTF-8 text file ({odd} undecodable or NUL bytes)")


def is_tmx(head: bytes) -> bool:
    """The first bytes of a file are those of a TMX document (UTF-8 or UTF-16)."""
    for bom, codec in ((b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be")):
        if head.startswith(bom):
            head = head[2:].decode(codec, errors="replace").encode()
    text = head[:4096].decode("utf-8-sig", errors="replace").lstrip()
    return text.startswith("<") and "<tmx" in text


def detect_format(path: Path, member: str | None = None) -> str:
    """Tell the format from the first non-blank line (the second, if the first is a header)."""
    with reading(path), open_input(path, member) as f:
        if is_tmx(f.read(4096)):
            return "tmx"
    with reading(path), open_input(path, member) as f:
        decoded = (raw.decode("utf-8-sig", errors="replace").rstrip("\r\n") for raw in f)
        lines = list(islice((line for line in decoded if line.strip()), 2))
    if not lines:
        raise UserError(f"input file is empty: {path}")
    if lines[0].lstrip().startswith("{"):
        return "jsonl"
    for line in lines:
        fields = line.split("\t")
        if len(fields) == 4 and fields[0].strip().isdigit() and fields[2].strip().isdigit():
            return "tatoeba"
        if len(fields) in (2, 3) and re.search(HAN, fields[1]):
            return "anki"
    fields = lines[0].split("\t")
    if len(fields) in (2, 3):
        return "anki"
    raise UserError(
        f"cannot tell the format of {path} from its first line ({len(fields)} tab-separated "
        f"fields); pass --format ({', '.join(FORMATS)})"
    )


def check_format(path: Path, fmt: str, member: str | None = None) -> str:
    """The format to read `path` in (`auto` detected), after checking the file can be read."""
    check_input(path, member)
    if fmt == "auto":
        fmt = detect_format(path, member)
    if fmt not in FORMATS:
        raise UserError(f"unknown format {fmt!r} (choose from auto, {', '.join(FORMATS)})")
    return fmt


@dataclass
class Block:
    """Whole lines of a file: its bytes and the 1-based number of its first line."""

    first_line: int
    data: bytes
    at_start: bool  # the file's first block, where a header row may be

    @property
    def size(self) -> int:
        return len(self.data)


def parse_block(path: Path, fmt: str, block: Block) -> tuple[pd.DataFrame, ReadStats]:
    """The raw pairs of one block, indexed by line number, and what was skipped in it."""
    stats = ReadStats()
    lines = decode_lines(block)
    lines = lines[lines.str.strip() != ""]  # blank lines are ignored
    stats.rows += len(lines)
    if block.at_start and len(lines) and fmt != "jsonl" and _is_header(lines.iloc[0], fmt):
        stats.headers += 1
        lines = lines.iloc[1:]
    undecodable = lines.str.contains("\ufffd", regex=False)
    stats.skip(path, lines.index[undecodable], "undecodable", "undecodable bytes (not UTF-8)")
    lines = lines[~undecodable]
    if fmt == "jsonl":
        pairs = _parse_json(path, lines, stats)
    else:
        pairs = _parse_table(path, lines, _TABLES[fmt], stats)
    control = pairs["en"].str.contains(CONTROL) | pairs["zh"].str.contains(CONTROL)
    stats.skip(path, pairs.index[control], "control characters", "control characters")
    return pairs[~control], stats


def blocks(path: Path, member: str | None = None) -> Iterator[Block]:
    """The file in blocks of about BLOCK_BYTES, each cut after a newline."""
    line_number = 1
    with reading(path), open_input(path, member) as f:
        rest = b""
        while True:
            data = f.read(BLOCK_BYTES)  # read at each call, so tests can make blocks small
            rest += data
            cut = rest.rfind(b"\n") + 1 if data else len(rest)
            if cut == 0 and data:
                continue  # one line longer than a block: read on
            block, rest = rest[:cut], rest[cut:]
            if not block:
                return
            yield Block(line_number, block, line_number == 1)
            line_number += block.count(b"\n") + (not block.endswith(b"\n"))


def decode_lines(block: Block) -> pd.Series:
    """The block's lines, decoded, indexed by line number."""
    text = block.data.decode("utf-8", errors="replace").replace("\r\n", "\n")
    text = text.replace("\ufeff", "")  # byte-order marks, also mid-file
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    index = pd.RangeIndex(block.first_line, block.first_line + len(lines))
    return pd.Series(lines, index=index, dtype=object)


def _is_header(line: str, fmt: str) -> bool:
    """A first row whose ids are not numbers, or whose Chinese has no Chinese character."""
    layout = _TABLES[fmt]
    fields = line.split("\t")
    if not layout["min_columns"] <= len(fields) <= layout["columns"]:
        return False
    ids_ok = all(fields[c].strip().isdigit() for c in layout["ids"])
    return not (ids_ok and re.search(HAN, fields[layout["zh"]]))


def _parse_table(path: Path, lines: pd.Series, layout: dict, stats: ReadStats) -> pd.DataFrame:
    low, high = layout["min_columns"], layout["columns"]
    expected = str(high) if low == high else f"{low}-{high}"
    columns = lines.str.count("\t") + 1
    wrong = (columns < low) | (columns > high)
    for count in sorted(set(columns[wrong])):
        stats.skip(
            path,
            lines.index[wrong & (columns == count)],
            "wrong column count",
            f"expected {expected} columns, found {count}",
        )
    fields = lines[~wrong].str.split("\t", expand=True)
    if fields.empty:
        return pd.DataFrame({"en": [], "zh": []}, dtype=str)
    for column in layout["ids"]:
        bad_id = ~fields[column].str.strip().str.fullmatch(r"\d+")
        if bad_id.any():
            found = fields[column][bad_id].iloc[0][:20]
            reason = f"column {column + 1} should be a sentence id, found {found!r}"
            stats.skip(path, fields.index[bad_id], "id not a number", reason)
        fields = fields[~bad_id]
    return pd.DataFrame({"en": fields[layout["en"]], "zh": fields[layout["zh"]]}, dtype=str)


def _parse_json(path: Path, lines: pd.Series, stats: ReadStats) -> pd.DataFrame:
    parsed = lines.map(_parse_json_pair)
    failed = parsed.map(lambda p: isinstance(p, str)).astype(bool)
    for reason in sorted(set(parsed[failed])):
        stats.skip(path, parsed.index[failed & (parsed == reason)], reason, reason)
    good = parsed[~failed]
    return pd.DataFrame(
        {"en": good.map(lambda p: p[0]), "zh": good.map(lambda p: p[1])},
        index=good.index,
        dtype=str,
    )


def _parse_json_pair(line: str) -> tuple[str, str] | str:
    """The (english, chinese) pair of one JSON line, or the reason it is malformed."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError:
        return "bad JSON"
    if not isinstance(obj, dict):
        return "not a JSON object"
    missing = [key for key in ("english", "chinese") if not isinstance(obj.get(key), str)]
    if missing:
        return f"missing or non-string {' and '.join(repr(k) for k in missing)}"
    return obj["english"], obj["chinese"]
