"""Text normalisation, applied alike at `prepare` time and to sentences given to `translate`
(what it changes: docs/data.md#prepare).

A Chinese line is converted to simplified script only where it has a character that exists
in traditional script alone, and then only in those characters: zhconv's `zh-hans` applied
to every line also rewrites text that is already simplified (有什么喝的吗 → 有什幺喝的吗) and
turns 「」 into “” (docs/data.md#traditional--simplified).
"""

from __future__ import annotations

import unicodedata

from zhconv.zhconv import convert as zhconv_convert
from zhconv.zhconv import getdict

CONTROL = r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]"  # C0 and C1 controls but \t \n \r
_FULLWIDTH_ALNUM = {
    code: code - 0xFEE0
    for start, end in ((0xFF10, 0xFF19), (0xFF21, 0xFF3A), (0xFF41, 0xFF5A))
    for code in range(start, end + 1)
}
_FULLWIDTH_ALNUM[0xFEFF] = None  # byte-order mark / zero-width no-break space: removed


def _is_letter(char: str) -> bool:
    return unicodedata.category(char).startswith("L")


def _script_tables() -> tuple[frozenset[str], frozenset[str]]:
    """From zhconv's zh-hans table: the simplified forms (targets of a one-character
    mapping that are not themselves converted), and the traditional characters (letters
    with a one-character mapping to another character)."""
    single = {k: v for k, v in getdict("zh-hans").items() if len(k) == 1 and k != v}
    simplified = frozenset(v for v in single.values() if len(v) == 1) - single.keys()
    return simplified, frozenset(c for c in single if _is_letter(c))


_SIMPLIFIED, _TRADITIONAL = _script_tables()


def has_traditional(text: str) -> bool:
    """Whether the text has a character that exists in traditional script only (a set
    test: 8x faster than one regular expression of the 4,698 characters)."""
    return not _TRADITIONAL.isdisjoint(text)


def to_simplified(text: str) -> str:
    """Traditional → simplified, changing nothing in a line that is already simplified and,
    in a traditional line, only its traditional characters (see the module docstring)."""
    if not has_traditional(text):
        return text
    converted = zhconv_convert(text, "zh-hans")  # every zh-hans entry keeps the length
    return "".join(
        new if new == old or (_is_letter(old) and old not in _SIMPLIFIED) else old
        for old, new in zip(text, converted, strict=True)
    )


def normalize_en(text: str) -> str:
    """Full-width letters and digits made ASCII, byte-order marks dropped, spaces collapsed."""
    return " ".join(text.translate(_FULLWIDTH_ALNUM).split())


def normalize_zh(text: str) -> str:
    return to_simplified(normalize_en(text))
