"""Names a model does not know: a Latin-script word written with a capital (Linux, Python,
Wikipedia, or all in capitals, NASA) whose lower-case form never occurs in the English it was
trained on. Such a word has no translation the model could have learnt, and a small model
writes another word in its place ("Do you use Wikipedia at work?" → 你用叉子用吗？, "a fork");
decode.keep_names carries it through verbatim instead (inference/text.py), as a
placeholder where the model has them, else as a glossary term that keeps its English.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import chain

from translator.data.spans import overlapping

_WORD = re.compile(r"[A-Za-z]+")
# a capitalised word of two letters or more, not inside a longer word (Linux's: Linux)
_NAME = re.compile(r"(?<![\w'’-])[A-Z][A-Za-z]+(?![\w-])")
MOST_WORDS = 1_000_000  # a checkpoint keeps at most this many, the most frequent
# a model trained on fewer words (the bundled sample's 394) has not seen most of English: an
# unseen capitalised word there is more often a word (Which, Congratulations) than a name
FEWEST_WORDS = 2_000
# English endings: a word that is a seen word plus one of them is a word, not a name
# (Shortly: short + ly; Arrangements: arrange + ments; Complaining: complain + ing)
_ENDINGS = (
    "s", "es", "ed", "d", "ing", "ly", "ily", "er", "ers", "est", "ment", "ments", "ness",
    "ful", "less", "able", "ible", "al", "ally", "ity", "ion", "ions", "ive", "ous", "ish",
)  # fmt: skip


def words_of(text: str) -> list[str]:
    """The lower-case words (runs of ASCII letters) of `text`."""
    return _WORD.findall(text.lower())


def count(lines: Iterable[str]) -> Counter[str]:
    """The lower-case words (runs of ASCII letters) of `lines`, with how often each occurs."""
    return Counter(chain.from_iterable(_WORD.findall(line.lower()) for line in lines))


def write_counts(counts: Counter[str], path) -> None:
    """`words.en` of a prepared directory: `word<TAB>count` a line, most frequent first."""
    path.write_text("".join(f"{w}\t{n}\n" for w, n in counts.most_common()), encoding="ascii")


def read_counts(path) -> Counter[str]:
    lines = path.read_text(encoding="ascii").splitlines()
    return Counter({word: int(n) for word, _, n in (line.partition("\t") for line in lines)})


def words_blob(counts: Counter[str]) -> bytes:
    """The words a model saw, as a checkpoint carries them: the MOST_WORDS most frequent."""
    words = sorted(word for word, _ in counts.most_common(MOST_WORDS))
    return zlib.compress("\n".join(words).encode("ascii"), 6)


def listed(blob: bytes | None) -> list[str]:
    """The words of a `words_blob` (none for a model that carries none: trained before the
    words were kept, or imported)."""
    return zlib.decompress(blob).decode("ascii").split("\n") if blob else []


def known(words: Sequence[str]) -> frozenset[str] | None:
    """The words a model saw, to tell names by; None where it carries none or fewer than
    FEWEST_WORDS, for which no word is taken for a name."""
    return frozenset(words) if len(words) >= FEWEST_WORDS else None


def unknown(
    text: str, words: frozenset[str], exclude: Sequence[tuple[int, int]] = ()
) -> list[tuple[int, int]]:
    """(start, end) of each capitalised word of `text` not `seen` among `words`, left to
    right, none overlapping an `exclude` range."""
    overlaps = overlapping(exclude)
    return [
        m.span()
        for m in _NAME.finditer(text)
        if not (seen(m.group(0).lower(), words) or overlaps(*m.span()))
    ]


def seen(word: str, words: frozenset[str]) -> bool:
    """Whether `word` (lower case) is among `words`, or one of them with an ending of
    _ENDINGS (a final e dropped before it, or a final y made i: arrange → arranging,
    happy → happily)."""
    if word in words:
        return True
    stems = [word[: -len(ending)] for ending in _ENDINGS if word.endswith(ending)]
    return any(
        stem in words or stem + "e" in words or (stem.endswith("i") and stem[:-1] + "y" in words)
        for stem in stems
        if len(stem) >= 3
    )
