"""Readers for the three corpus formats, yielding chunks of raw (en, zh) pairs.

- tatoeba: Tatoeba's sentence-pairs export, `en_id <TAB> en <TAB> zh_id <TAB> zh`
- anki:    manythings.org/anki files, `en <TAB> zh <TAB> attribution` (attribution optional)
- jsonl:   one JSON object a line, `{"english": ..., "chinese": ...}`

A row that cannot be read (wrong column count, undecodable bytes, bad JSON) is skipped
and recorded in `ReadStats` with its file and 1-based line number; it never stops the read.
Tables are parsed by pandas with quoting off, since Tatoeba sentences contain quote marks.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from translator.errors import UserError

FORMATS = ("tatoeba", "anki", "jsonl")
CHUNK_ROWS = 100_000
MAX_EXAMPLES = 5  # malformed rows kept for the report
_BAD = "\x00malformed"  # marker row put in place of a line with too many columns

# columns read for each table format, and where English and Chinese are
_TABLES = {
    "tatoeba": {"columns": 4, "min_columns": 4, "en": 1, "zh": 3},
    "anki": {"columns": 3, "min_columns": 2, "en": 0, "zh": 1},
}


@dataclass
class Malformed:
    path: str
    line: int  # 1-based
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


@dataclass
class ReadStats:
    rows: int = 0  # non-blank lines seen
    malformed: int = 0
    examples: list[Malformed] = field(default_factory=list)

    def skip(self, path: Path, line: int, reason: str) -> None:
        self.malformed += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(Malformed(str(path), line, reason))


def check_input(path: Path) -> None:
    if not path.exists():
        raise UserError(f"input file not found: {path}")
    if not path.is_file():
        raise UserError(f"input is not a file: {path}")


def detect_format(path: Path) -> str:
    """Tell the format from the first non-blank line."""
    with path.open("rb") as f:
        for raw in f:
            line = raw.decode("utf-8-sig", errors="replace").rstrip("\r\n")
            if line.strip():
                break
        else:
            raise UserError(f"input file is empty: {path}")
    if line.lstrip().startswith("{"):
        return "jsonl"
    fields = line.split("\t")
    if len(fields) == 4 and fields[0].strip().isdigit() and fields[2].strip().isdigit():
        return "tatoeba"
    if len(fields) in (2, 3):
        return "anki"
    raise UserError(
        f"cannot tell the format of {path} from its first line ({len(fields)} tab-separated "
        f"fields); pass --format ({', '.join(FORMATS)})"
    )


def read_pairs(path: Path, fmt: str, stats: ReadStats) -> Iterator[pd.DataFrame]:
    """Yield DataFrames with string columns `en` and `zh`, raw (not yet normalised)."""
    check_input(path)
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt == "jsonl":
        yield from _read_jsonl(path, stats)
    elif fmt in _TABLES:
        yield from _read_table(path, _TABLES[fmt], stats)
    else:
        raise UserError(f"unknown format {fmt!r} (choose from auto, {', '.join(FORMATS)})")


def _mark_bad(fields: list[str]) -> list[str]:
    return [_BAD, str(len(fields))]


def _read_table(path: Path, layout: dict, stats: ReadStats) -> Iterator[pd.DataFrame]:
    width = layout["columns"]
    reader = pd.read_csv(
        path,
        sep="\t",
        header=None,
        names=list(range(width)),
        quoting=csv.QUOTE_NONE,
        dtype=str,
        na_filter=False,
        keep_default_na=False,
        skip_blank_lines=False,  # keeps the row index equal to the line number
        engine="python",  # the only engine that hands bad lines to a callable
        on_bad_lines=_mark_bad,
        encoding="utf-8-sig",
        encoding_errors="replace",
        chunksize=CHUNK_ROWS,
    )
    for chunk in reader:
        present = chunk.notna()
        blank = ~present.iloc[:, 1:].any(axis=1) & (chunk[0].fillna("").str.strip() == "")
        chunk = chunk[~blank]
        stats.rows += len(chunk)
        too_many = chunk[0] == _BAD
        too_few = ~too_many & chunk[layout["min_columns"] - 1].isna()
        undecodable = ~too_many & chunk.apply(
            lambda col: col.str.contains("\ufffd", regex=False, na=False)
        ).any(axis=1)
        for line, row in chunk[too_many | too_few].iterrows():
            count = int(row[1]) if row[0] == _BAD else int(row.notna().sum())
            stats.skip(path, line + 1, f"expected {_describe(layout)} columns, found {count}")
        for line in chunk.index[undecodable & ~too_few]:
            stats.skip(path, line + 1, "undecodable bytes (not UTF-8)")
        good = chunk[~(too_many | too_few | undecodable)]
        yield pd.DataFrame({"en": good[layout["en"]], "zh": good[layout["zh"]]})


def _describe(layout: dict) -> str:
    low, high = layout["min_columns"], layout["columns"]
    return str(high) if low == high else f"{low}-{high}"


def _read_jsonl(path: Path, stats: ReadStats) -> Iterator[pd.DataFrame]:
    en: list[str] = []
    zh: list[str] = []
    with path.open("rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError:
                stats.rows += 1
                stats.skip(path, number, "undecodable bytes (not UTF-8)")
                continue
            if not line.strip():
                continue
            stats.rows += 1
            pair = _parse_json_pair(line)
            if isinstance(pair, str):
                stats.skip(path, number, pair)
                continue
            en.append(pair[0])
            zh.append(pair[1])
            if len(en) >= CHUNK_ROWS:
                yield pd.DataFrame({"en": en, "zh": zh}, dtype=str)
                en, zh = [], []
    yield pd.DataFrame({"en": en, "zh": zh}, dtype=str)


def _parse_json_pair(line: str) -> tuple[str, str] | str:
    """The (english, chinese) pair of one JSON line, or the reason it is malformed."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        return f"bad JSON ({exc.msg})"
    if not isinstance(obj, dict):
        return "expected a JSON object"
    missing = [key for key in ("english", "chinese") if not isinstance(obj.get(key), str)]
    if missing:
        return f"missing or non-string {' and '.join(repr(k) for k in missing)}"
    return obj["english"], obj["chinese"]
