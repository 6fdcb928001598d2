"""The one reader for files of sentences, one a line: `translate --input` and stdin,
`eval --src/--ref`, and the prepared splits all read through it.

Lines are split on "\\n" only (`str.splitlines` also splits on \\x0b, \\x1c or U+2028, which
can sit inside a sentence): a final newline adds no empty line, a "\\r" before "\\n" and a
UTF-8 byte-order mark at the start are dropped, and a blank line is a blank sentence.
"""

from __future__ import annotations

import codecs
import sys
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

from translator.errors import UserError


def split_lines(data: bytes, source: str) -> list[str]:
    """UTF-8 bytes → lines (see the module docstring). `source` names them in errors."""
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise UserError(f"{source}: line {line} is not valid UTF-8") from None
    lines = text.replace("\r\n", "\n").split("\n")
    if lines[-1] == "":
        lines.pop()  # the text ended with a newline
    return lines


def read_lines(path: Path | str) -> list[str]:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"file not found: {path}")
    return split_lines(path.read_bytes(), str(path))


def read_chunks(path: Path | str, size: int) -> Iterator[list[str]]:
    """A file's lines in chunks of `size` (the last may be shorter), for files too large to
    read whole: split on "\n" only, a "\r" before it dropped, as `split_lines` does."""
    with Path(path).open(encoding="utf-8", newline="\n") as f:
        while chunk := list(islice(f, size)):
            yield [line.rstrip("\n").removesuffix("\r") for line in chunk]


def read_stdin_lines() -> list[str]:
    return split_lines(sys.stdin.buffer.read(), "stdin")


def write_lines(path: Path | str, lines: list[str]) -> None:
    Path(path).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
