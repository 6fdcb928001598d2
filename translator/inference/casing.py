"""Input case made ordinary before translating (`decode.recase`, on by default): a line in
ALL CAPS, in Title Case or all in lower case is rewritten in the case the model was trained
on, as a Moses truecaser would, and any other line is left exactly as written.

    "WHERE IS TOM'S CAT?" · "Where Is Tom's Cat?" · "where is tom's cat?"
      → "Where is Tom's cat?"

Each word is lower-cased, then given the form the source tokenizer knows it in: a
capitalised word-initial piece ("▁Tom", "▁I", "▁TV") whose lower-case form is not a piece is
how that word is written (the tokenizer's vocabulary is built from the training text, so
it knows the frequent names), and the first word of each sentence is capitalised. Only
plain words are touched: a token holding a digit, "@", "/", "_" or a dot inside (URLs,
e-mail addresses, handles, codes, 5.99) is kept as written, and so is a word with a capital
inside (GitHub, iPhone) unless the whole line is upper case.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_TOKEN = re.compile(r"\S+")
_PLAIN = re.compile(r"""^([("'“‘\[]*)([A-Za-z]+(?:['’][A-Za-z]+)*)([.,!?;:)"'”’\]…]*)$""")
_HEAD = re.compile(r"([A-Za-z]+)(?:(['’])(.*))?$")
_SENTENCE_END = re.compile(r"[.!?…]['\"”’)]*$")


def cased_forms(pieces: Iterable[str]) -> dict[str, str]:
    """lower-case word → its written form, from a SentencePiece vocabulary: each
    word-initial piece that is a whole word with a capital, where the lower-case form is not
    a piece itself ("▁Tom" without "▁tom": Tom; "▁The" beside "▁the": not kept)."""
    words = {p[1:] for p in pieces if p.startswith("▁") and p[1:].isascii() and p[1:].isalpha()}
    return {w.lower(): w for w in sorted(words) if not w.islower() and w.lower() not in words}


def case_kind(text: str) -> str | None:
    """ "upper", "title" or "lower" where the line's case says nothing about its words, else
    None. Upper: every letter of two or more plain words (four letters at least); title:
    four in five plain words of two letters or more capitalised, three at least (words
    with a capital inside, iPhone, not counted); lower: no capital at all."""
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
            match = _PLAIN.match(token)
            if match:
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
