"""Text normalisation, applied alike at `prepare` time and to sentences given to `translate`.

- byte-order marks (U+FEFF) anywhere are removed: concatenated files leave them mid-file;
- full-width digits and Latin letters (０-９, Ａ-Ｚ, ａ-ｚ) become ASCII;
- whitespace runs (the ideographic space U+3000 included) become one space, ends stripped;
- a Chinese line that contains a traditional character is converted to simplified script
  with zhconv (`zh-hans`); a line that is already simplified is left exactly as written;
- punctuation (，。？！：“”「」…) is never changed.

Why not plain `zhconv.convert(line, "zh-hans")` on every line: its phrase table also
rewrites text that is already simplified (有什么喝的吗 → 有什幺喝的吗, 那么正式 → 那幺正式, from
entries such as 么喝 → 幺喝) and turns 「」 into “”. So only lines with a character that
exists in traditional script alone are converted, and in them only traditional characters
may change: a simplified form (么, the simplified form of 麼) and punctuation are kept.
`zh-cn` is not used: it also localises vocabulary (姊姊 → 姐姐, 咖哩 → 咖喱, 公尺 → 米), which
changes what a translator wrote, not its script. docs/data.md compares the candidates.
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


def fullwidth_to_ascii(text: str) -> str:
    return text.translate(_FULLWIDTH_ALNUM)


def collapse_whitespace(text: str) -> str:
    return " ".join(text.split())


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
    return collapse_whitespace(fullwidth_to_ascii(text))


def normalize_zh(text: str) -> str:
    return to_simplified(normalize_en(text))
