"""A document as every format gives it: `units` (a paragraph, a cell, a cue, an entry), each
a list of `Run`s, the text with its inline markup; `write` puts translated units back
and returns the file's bytes. Formats are found by name in the entry-point group
`translator.formats`, one name per file extension (`docx`, `htm`, …).

A format is a class with `media_type`, `extra` (the pip extra its library comes with) and
`read(data, retranslate)`: a Document, or a BadDocument of one line saying what is wrong
with a file it cannot read (conversion.read turns any other error of a library's into one
line too). `read` never changes `data`; `write` returns new bytes.
"""

from __future__ import annotations

import importlib
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Protocol

from translator.errors import UserError
from translator.plugins import Registry

FORMATS = Registry("translator.formats", "--format", "document format")


@dataclass(frozen=True)
class Run:
    """Part of a unit: words to translate, with the formatting around them (`mark`: the
    format's own key for it, None for the unit's plain text), or, where `kept`, something
    written back as it stands (inline code, a placeholder such as %s, an image, a tag);
    `text` is then what the translation carries in its place."""

    text: str
    mark: Hashable = None
    kept: bool = False


Unit = list[Run]


class Document(Protocol):
    units: list[Unit]

    def write(self, translated: list[Unit]) -> bytes:
        """The file with each unit replaced by its translation (same order and count)."""
        ...


class Format(Protocol):
    media_type: str  # what a download of it is served as
    extra: str  # pip install "translator[<extra>]" adds its library

    @classmethod
    def read(cls, data: bytes, retranslate: bool = False) -> Document: ...


class BadDocument(UserError):
    """A file its format cannot read: one line, exit 2 on the CLI, 400 on the server."""


def one_line(exc: BaseException) -> str:
    """A library's exception as one short line: what a BadDocument says it was."""
    text = " ".join(str(exc).split())[:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def plain(text: str) -> Unit:
    """A unit of plain text."""
    return [Run(text)]


def text_of(unit: Unit) -> str:
    """A unit's text as written."""
    return "".join(run.text for run in unit)


def library(module: str, extra: str, suffix: str) -> ModuleType:
    """The library a format reads with; missing, one line naming the pip install."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise UserError(
            f'reading {suffix} files needs the "{extra}" extra: pip install "translator[{extra}]"'
        ) from None


def format_name(path: Path | str, given: str | None = None) -> str:
    """The format `given` (--format) or the file's extension names, checked; a name no
    format has is one line listing those there are."""
    name = (given or Path(path).suffix.lstrip(".")).lower()
    if not name:
        raise UserError(f"{path}: no extension to choose a format by; give --format")
    FORMATS.get(name)
    return name


BOM = b"\xef\xbb\xbf"


def decoded(data: bytes, what: str) -> str:
    """A text file's characters (UTF-8, a BOM allowed); BadDocument where it is not UTF-8."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise BadDocument(f"{what} is not valid UTF-8 (line {line})") from None


def encoded(text: str, like: bytes) -> bytes:
    """`text` as UTF-8, with a BOM where the file it came from (`like`) had one."""
    return (BOM if like.startswith(BOM) else b"") + text.encode("utf-8")
