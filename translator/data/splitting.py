"""English lines into sentences, and Chinese sentences joined back into a line: what
document mode (inference/sentences.py) and documents (documents/inline.py) split and join by.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_LATIN_END, _LATIN_START = re.compile(r"[A-Za-z0-9]$"), re.compile(r"^[A-Za-z0-9]")


def sentences(line: str) -> list[str]:
    """An English line's sentences, in order; blank → none. The splitter is sentencex,
    chosen by measured accuracy (docs/translating.md#documents-and-long-lines)."""
    from sentencex import segment

    return [s.strip() for s in segment("en", line) if s.strip()]


def join(translations: Sequence[str]) -> str:
    """Translations of consecutive sentences as one line: no space between them, except
    between two Latin letters or digits (a name or number at both ends)."""
    text = ""
    for part in translations:
        if not part:
            continue
        if text and _LATIN_END.search(text) and _LATIN_START.search(part):
            text += " "
        text += part
    return text
