"""Protected spans: the parts of a sentence a translation must carry over character for
character, and the placeholders that carry them through a model trained with
`data.placeholders` (docs/translating.md#text-as-users-type-it: the kinds, and how a model
learns to copy them).
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

MAX_PLACEHOLDERS = 8  # a sentence's spans beyond the eighth are left as written
PLACEHOLDERS = tuple(f"⦅{n}⦆" for n in range(1, MAX_PLACEHOLDERS + 1))
_PLACEHOLDER = re.compile(r"⦅(\d+)⦆")
_ALNUM = re.compile(r"[A-Za-z0-9]")
_FREE_DIGIT = re.compile(r"[0-9](?![0-9]*⦆)")
_FINAL_MARKS = ".?!。？！…\"'”’)）"

_EMOJI = (
    "[\U0001f000-\U0001faff\u2600-\u27bf\u2b00-\u2bff]"  # pictographs, symbols, dingbats
    "[\ufe0f\u200d\U0001f3fb-\U0001f3ff\U0001f000-\U0001faff\u2600-\u27bf]*"  # joined
)
_PATTERNS = {
    "placeholder": r"⦅\d+⦆",  # already in the text (a masked train split being distilled)
    "url": r"\b(?:https?://|www\.)[^\s<>\"]*[^\s<>\".,;:!?)\]'’”]",
    "email": r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b",
    "handle": r"(?<![\w@])@\w{2,}",
    "code": r"\b[A-Z]{1,4}-?\d{2,}(?:-\d+)*\b",
    "number": r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.])\d+\.\d+(?![\w])"
    r"|(?<![\w./-])\d+(?:[-/]\d+)+(?![\w])|(?<![\w.,])\d{4,}(?![\w])",
    "emoji": _EMOJI,
    "name": r"\b[a-z]+[A-Z][A-Za-z]*\b|\b[A-Z][a-z]+[A-Z][A-Za-z]*\b",
}
_OTHERS = re.compile(
    "|".join(f"(?P<{kind}>{p})" for kind, p in _PATTERNS.items() if kind != "email")
)
_EMAIL = re.compile(_PATTERNS["email"])
# a run of [\w.+-] that an @ and a domain follow: the only place an e-mail address ends
_EMAIL_RUN = re.compile(r"(?<![\w.+-])[\w.+-]+(?=@[\w-]+(?:\.[\w-]+)+\b)")
_BOUNDARY = re.compile(r"\b")
_BEFORE_EMAIL = ("placeholder", "url")  # the kinds _PATTERNS tries before an address


class _Spans:
    """_PATTERNS as one alternation (the first kind that matches at a place wins), as its
    `finditer` and `search` give it, in time linear in the text. re's own search of the
    alternation is not: the e-mail pattern's `\\b` starts an attempt at every word inside a
    run of [\\w.+-] ("a+a+a+…": 100,000 characters took a minute), and each scans to the
    run's end for an @. An address matches at a word boundary of a run exactly where an @
    and a domain follow that run (`_EMAIL_RUN`, one pass): it is tried once, at the first
    such boundary, against the first match of the other kinds."""

    def finditer(self, text: str) -> Iterator[re.Match]:
        if "@" not in text:
            yield from _OTHERS.finditer(text)
            return
        runs = (m.span() for m in _EMAIL_RUN.finditer(text))
        run, at = next(runs, None), -1  # at: the first word boundary of `run` from pos
        other = _OTHERS.search(text)
        pos = 0
        while True:
            while run is not None and at < pos:
                found = _BOUNDARY.search(text, max(pos, run[0]), run[1])
                if found and found.start() < run[1]:
                    at = found.start()
                else:
                    run, at = next(runs, None), -1
            if other is not None and other.start() < pos:
                other = _OTHERS.search(text, pos)
            if run is not None and (
                other is None
                or at < other.start()
                or (at == other.start() and other.lastgroup not in _BEFORE_EMAIL)
            ):
                match = _EMAIL.match(text, at)  # it matches there (the docstring's why)
            else:
                match = other
            if match is None:
                return
            yield match
            pos = match.end()

    def search(self, text: str) -> re.Match | None:
        return next(self.finditer(text), None)


_SPAN = _Spans()


@dataclass(frozen=True)
class Unmasked:
    text: str
    lost: list[str]  # spans whose placeholder the output did not have
    extra: int  # placeholders in the output that the source did not have (dropped)
    appended: list[str] = field(default_factory=list)  # lost spans put at the end (append)


def find(text: str) -> list[str]:
    """The protected spans of `text`, left to right (the first kind that matches wins)."""
    return [m.group(0) for m in _SPAN.finditer(text)]


def ranges(text: str) -> list[tuple[int, int]]:
    """Where the protected spans of `text` stand: (start, end) of each, left to right."""
    return [m.span() for m in _SPAN.finditer(text)]


def overlapping(ranges: Sequence[tuple[int, int]]) -> Callable[[int, int], bool]:
    """A test of whether (start, end) overlaps one of `ranges`, in O(log n) a test: a look
    at every range for each of a sentence's matches would take time quadratic in its length."""
    ordered = sorted(ranges)
    starts = [s for s, _ in ordered]
    reach = list(itertools.accumulate((e for _, e in ordered), max))  # the furthest end yet

    def overlaps(start: int, end: int) -> bool:
        before = bisect.bisect_left(starts, end)  # the ranges that start before `end`
        return before > 0 and reach[before - 1] > start

    return overlaps


def mask(
    text: str, pattern: re.Pattern | _Spans = _SPAN, extra: Sequence[tuple[int, int, str]] = ()
) -> tuple[str, list[str]]:
    """The text with its first MAX_PLACEHOLDERS spans as ⦅1⦆, ⦅2⦆, …, and those spans.
    `extra`: more spans (start, end, what the placeholder stands for in the output), that
    no match of `pattern` overlaps (a glossary's names)."""
    found = sorted([(m.start(), m.end(), m.group(0)) for m in pattern.finditer(text)] + [*extra])
    spans: list[str] = []
    out, last = [], 0
    for start, end, span in found:
        if len(spans) == MAX_PLACEHOLDERS or start < last:
            continue
        spans.append(span)
        out += [text[last:start], PLACEHOLDERS[len(spans) - 1]]
        last = end
    return "".join(out) + text[last:], spans


def unmask(output: str, spans: list[str], append: bool = False) -> Unmasked:
    """The first ⦅n⦆ of each n in the output replaced by the n-th span; the spans never
    written are `lost`. A placeholder written again and one with no span are dropped and
    counted as `extra`. Two spans written back to back are set apart by a space where
    letters or digits would meet (⦅1⦆⦅2⦆ → "VS-9278 403.76", not "VS-9278403.76"). With
    `append` (decode.span_guard), the lost spans are put at the end (`appended`)."""
    written: set[int] = set()
    extra, last_end, last_span = 0, -1, ""

    def restore(match: re.Match) -> str:
        nonlocal extra, last_end, last_span
        n = int(match.group(1))
        touching = match.start() == last_end
        last_end = match.end()
        if 1 <= n <= len(spans) and n not in written:
            written.add(n)
            span = spans[n - 1]
            glued = touching and _ALNUM.match(last_span[-1:]) and _ALNUM.match(span)
            last_span = span
            return " " + span if glued else span
        extra += 1
        if not touching:
            last_span = ""
        return ""

    text = _PLACEHOLDER.sub(restore, output)
    lost = [span for n, span in enumerate(spans, 1) if n not in written]
    if append and lost:
        return Unmasked(appended(text, lost), [], extra, lost)
    return Unmasked(text, lost, extra)


def appended(text: str, lost: list[str]) -> str:
    """`text` with the `lost` spans at its end, before its final marks ("我付了钱。" →
    "我付了钱555.02。"), set apart by a space where letters or digits would meet."""
    body = text.rstrip(_FINAL_MARKS)
    marks = text[len(body) :]
    for span in lost:
        glued = _ALNUM.match(body[-1:]) and _ALNUM.match(span)
        body += " " + span if glued else span
    return body + marks


def mask_pair(source: str, target: str) -> tuple[str, str] | None:
    """A training pair with placeholders on both sides, where every protected span of the
    source is in the target verbatim; None where the source has none or the target lacks one."""
    masked, spans = mask(source)
    if not spans:
        return None
    for n, span in enumerate(spans, 1):
        at = target.find(span)
        if at < 0:
            return None
        target = target[:at] + PLACEHOLDERS[n - 1] + target[at + len(span) :]
    return masked, target


def has_placeholders(tokenizer) -> bool:
    """Whether a SentencePiece model has every ⦅n⦆ as a piece (trained with data.placeholders)."""
    return all(tokenizer.piece_to_id(p) != tokenizer.unk_id() for p in PLACEHOLDERS)


def mask_lines(english: list[str], chinese: list[str]) -> int:
    """Placeholders put into training pairs in place (`mask_pair`); returns how many pairs
    got them. The patterns run over every line; Python masks only the lines with a span."""
    masked = 0
    for i, source in enumerate(english):
        if _SPAN.search(source) and (pair := mask_pair(source, chinese[i])):
            english[i], chinese[i] = pair
            masked += 1
    return masked


def insert_synthetic(english: list[str], chinese: list[str], rng, share: float) -> int:
    """`share` of the pairs without placeholders given one (or, a third of them, two) at the
    same relative place on both sides, in place; returns how many. The model so learns to
    copy every ⦅n⦆ wherever it stands, beyond the few pairs whose spans are in both sides."""
    chosen = np.flatnonzero(rng.random(len(english)) < share)
    twice = rng.random(len(chosen)) < 1 / 3
    places = rng.random((len(chosen), 2))
    done = 0
    for i, two, where in zip(chosen, twice, places, strict=True):
        if "⦅" in english[i]:
            continue
        at = sorted(where[: 1 + two])
        english[i], chinese[i] = _inserted(english[i], at, " "), _inserted(chinese[i], at)
        done += 1
    return done


def _inserted(text: str, places: list[float], space: str = "") -> str:
    """⦅1⦆, ⦅2⦆, … at relative `places` (ascending) of `text` before its final mark; with
    `space`, at word boundaries, set off by spaces."""
    body = text.rstrip(_FINAL_MARKS)
    mark = text[len(body) :]
    parts = body.split(" ") if space else list(body)
    cuts = [round(at * len(parts)) for at in places]
    out, last = [], 0
    for n, cut in enumerate(cuts):
        out += [*parts[last:cut], PLACEHOLDERS[n]]
        last = cut
    out += parts[last:]
    return (space or "").join(out) + mark


def missing(source: str, output: str) -> list[str]:
    """The source's protected spans that the output does not hold verbatim."""
    return [span for span in find(source) if span not in output]


def has_free_digit(text: str) -> bool:
    """Whether `text` has an ASCII digit outside its placeholders (⦅n⦆)."""
    return _FREE_DIGIT.search(text) is not None


def digit_pieces(tokenizer) -> list[int]:
    """The ids of the pieces that write an ASCII digit (a byte piece of one among them),
    placeholders excepted: what decode.digit_guard keeps out of an output."""
    ids = []
    for i in range(tokenizer.get_piece_size()):
        piece = tokenizer.id_to_piece(i)
        written = chr(int(piece[3:-1], 16)) if tokenizer.is_byte(i) else piece
        special = tokenizer.is_control(i) or tokenizer.is_unknown(i) or piece in PLACEHOLDERS
        if not special and any("0" <= c <= "9" for c in written):
            ids.append(i)
    return ids
