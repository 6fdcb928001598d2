"""A file in, its translation out: read by its format (document.py), its units translated
with their markup (inline.py), written back as new bytes. The CLI, the Python API and the
server all come through here."""

from __future__ import annotations

from collections.abc import Callable

from translator.documents import inline
from translator.documents.document import FORMATS, BadDocument, Document, Format, text_of


def read(data: bytes, name: str, retranslate: bool = False, max_chars: int = 0) -> Document:
    """The document in `data`, read as format `name`; with `max_chars`, a document with more
    characters to translate is refused (BadDocument)."""
    fmt: Format = FORMATS.get(name)
    document = fmt.read(data, retranslate)
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
    return document.write(inline.run(document.units, translate, counts, split)), counts


def media_type(name: str) -> str:
    """What a file of format `name` is served as."""
    return FORMATS.get(name).media_type
