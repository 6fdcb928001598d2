"""Text normalisation, applied alike at `prepare` time and to sentences given to `translate`.

- full-width digits and Latin letters (０-９, Ａ-Ｚ, ａ-ｚ) become ASCII;
- whitespace runs (the ideographic space U+3000 included) become one space, ends stripped;
- the Chinese side is converted from traditional to simplified script (zhconv, zh-hans);
- Chinese punctuation (，。？！：“”…) is left exactly as it is.
"""

from __future__ import annotations

import zhconv

_FULLWIDTH_ALNUM = {
    code: code - 0xFEE0
    for start, end in ((0xFF10, 0xFF19), (0xFF21, 0xFF3A), (0xFF41, 0xFF5A))
    for code in range(start, end + 1)
}


def fullwidth_to_ascii(text: str) -> str:
    return text.translate(_FULLWIDTH_ALNUM)


def collapse_whitespace(text: str) -> str:
    return " ".join(text.split())


def to_simplified(text: str) -> str:
    return zhconv.convert(text, "zh-hans")


def normalize_en(text: str) -> str:
    return collapse_whitespace(fullwidth_to_ascii(text))


def normalize_zh(text: str) -> str:
    return to_simplified(normalize_en(text))
