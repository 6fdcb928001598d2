"""A file in, its translation out: read by its format (document.py), its units translated
with their markup (inline.py), written back as new bytes. The CLI, the Python API and the
server all come through here."""

from __future__ import annotations

import contextlib
import io
import zipfile
from collections.abc import Callable

from translator.documents import inline
from translator.documents.document import (
    FORMATS,
    BadDocument,
    Document,
    Format,
    Unit,
    one_line,
    text_of,
)
from translator.errors import UserError

_XML = (".xml", ".xhtml", ".html", ".htm", ".ncx", ".opf", ".svg")


MARKUP_PER_CHAR = 50  # with max_chars: a file's markup bytes (unpacked XML) a character at most


def read(data: bytes, name: str, retranslate: bool = False, max_chars: int = 0) -> Document:
    """The document in `data`, read as format `name`; with `max_chars`, a document with more
    characters to translate is refused (BadDocument), and before it is parsed, one whose
    markup (a zip's XML unpacked) exceeds MARKUP_PER_CHAR bytes a character. What a
    format's library raises beyond its own checks is one line too."""
    fmt: Format = FORMATS.get(name)
    if max_chars:
        check_markup(data, max_chars * MARKUP_PER_CHAR)
    try:
        document = fmt.read(data, retranslate)
    except UserError:
        raise
    except Exception as exc:  # a library's error no check of ours foresaw
        raise BadDocument(f"the .{name} file cannot be read: {one_line(exc)}") from None
    if max_chars and (chars := sum(len(text_of(u)) for u in document.units)) > max_chars:
        raise BadDocument(
            f"the document has {chars:,} characters to translate > {max_chars:,} "
            "(serve.max_document_chars): translate it with translator translate --input"
        )
    return document


def translated(
    document: Document, translate: Callable[[inline.Request], list[str]], split: bool = True
) -> tuple[bytes, inline.Counts]:
    """The file of `document` translated by `translate` (sentence by sentence where
    `split`), and what was counted."""
    counts = inline.Counts()
    return written(document, inline.run(document.units, translate, counts, split)), counts


def written(document: Document, translated: list[Unit]) -> bytes:
    """`document` written with its translations; a library's error as one line."""
    try:
        return document.write(translated)
    except UserError:
        raise
    except Exception as exc:
        raise BadDocument(f"the translation could not be written: {one_line(exc)}") from None


def check_markup(data: bytes, budget: int) -> None:
    """Refuse a file whose markup is over `budget` bytes: its own size, or for a zip the
    sizes its XML members declare (a library's tree of it takes many times as much)."""
    size = len(data)
    if data[:2] == b"PK":
        with (
            contextlib.suppress(zipfile.BadZipFile, OSError),
            zipfile.ZipFile(io.BytesIO(data)) as z,
        ):
            size = sum(m.file_size for m in z.infolist() if m.filename.endswith(_XML))
    if size > budget:
        raise BadDocument(
            f"the file has {size:,} bytes of markup, more than this server reads for "
            f"serve.max_document_chars ({budget // MARKUP_PER_CHAR:,} characters)"
        )


def media_type(name: str) -> str:
    """What a file of format `name` is served as."""
    return FORMATS.get(name).media_type
