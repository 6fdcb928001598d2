"""Input case made ordinary before translating (`decode.recase`, on by default): a line in
ALL CAPS, in Title Case or all in lower case is rewritten in the case the model was trained
on, as a Moses truecaser would, and any other line is left exactly as written.

    "WHERE IS TOM'S CAT?" · "Where Is Tom's Cat?" · "where is tom's cat?"
      → "Where is Tom's cat?"

Each word is lower-cased, then written as the source vocabulary writes it (`cased_forms`:
it is built from the training text, so it knows the frequent names), the first of each
sentence capitalised. A token holding a digit, "@", "/", "_" or an inner dot (URLs, codes,
5.99) is kept as written, and so is a word with an inner capital (GitHub) unless the whole
line is upper case.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_TOKEN = re.compile(r"\S+")
_PLAIN = re.compile(r"""^([("'“‘\[]*)([A-Za-z]+(?:['’][A-Za-z]+)*)([.,!?;:)"'”’\]…]*)$""")
_HEAD = re.compile(r"([A-Za-z]+)(?:(['’])(.*))?$")
_SENTENCE_END = re.compile(r"[.!?…]['\"”’)]*$")


def cased_forms(pieces: Iterable[str]) -> dict[str, str]:
    """lower-case word → its written form: each whole-word piece with a capital whose
    lower-case form is no piece ("▁Tom" without "▁tom"; not "▁The", beside "▁the")."""
    words = {p[1:] for p in pieces if p.startswith("▁") and p[1:].isascii() and p[1:].isalpha()}
    return {w.lower(): w for w in sorted(words) if not w.islower() and w.lower() not in words}


def case_kind(text: str) -> str | None:
    """ "upper", "title" or "lower" where the line's case says nothing about its words (all
    capitals, four in five plain words capitalised, or no capital), else None."""
    words = [m.group(2) for t in _TOKEN.findall(text) if (m := _PLAIN.match(t))]
    letters = "".join(c for w in words for c in w if c.isalpha())
    if not letters:
        return None
    if letters.islower():
        return "lower"
    if len(words) < 2:
        return None
    upper = sum(c.isupper() for c in letters)
    if upper == len(letters) and len(letters) > 3:
        return "upper"
    plain = [w for w in words if len(w) > 1 and not any(c.isupper() for c in w[1:])]
    capitalised = sum(w[0].isupper() for w in plain)
    if capitalised >= 3 and capitalised >= 0.8 * len(plain):  # "of", "a" may stay lower
        return "title"
    return None


class Recaser:
    """The rewrite described above, for one source tokenizer's vocabulary."""

    def __init__(self, forms: dict[str, str]):
        self.forms = forms

    @classmethod
    def from_pieces(cls, pieces: Iterable[str]) -> Recaser:
        return cls(cased_forms(pieces))

    def __call__(self, text: str) -> str:
        kind = case_kind(text)
        if kind is None:
            return text
        out, start = [], True
        for token in text.split(" "):
            if match := _PLAIN.match(token):
                before, word, after = match.groups()
                token = before + self.word(word, start, kind) + after
            out.append(token)
            start = bool(_SENTENCE_END.search(token)) if token else start
        return " ".join(out)

    def word(self, word: str, first: bool, kind: str) -> str:
        """One plain word in its usual form ("i'm" → "I'm", "TOM'S" → "Tom's")."""
        if kind != "upper" and any(c.isupper() for c in word[1:]):
            return word  # GitHub, iPhone, NASA: written so on purpose
        head, sep, tail = _HEAD.match(word).groups(default="")
        lower = head.lower()
        head = self.forms.get(lower, lower)
        if first:
            head = head[:1].upper() + head[1:]
        return head + sep + tail.lower()
