"""HTML (.html, .htm), read with the standard library's html.parser (no extra), as UTF-8.

One unit the inline content of each block: the text between block-level tags (p, div, h1-h6,
li, td, th, title, option, button, …), the text directly in <body> included. Inline tags
(a, b, strong, em, i, span, u, sup, label, font, …, and any tag it does not know) are marks
written back exactly as written, start tag and end tag; an inline element with no text in it
(<a href=…><img …></a>, an empty <span>), <code>, <kbd>, <samp>, <var>, <img>, <br>, <input>,
inline <svg>/<math>, comments and a stray end tag are kept: written back as they stand, where
the translation puts them. Character references (&amp;) are decoded for translation; the
translation is written escaped (&amp; &lt; &gt;). The title and alt attributes of any element
and placeholder of <input> and <textarea> are units of their own.

Byte for byte: everything outside the units: the doctype, comments between blocks, block
tags and every attribute but those three, <script>, <style>, <pre> and <textarea> with their
contents, the blanks between blocks. Not translated: other attributes (<meta content>,
<input value>, aria-label), and a file that is not UTF-8 is refused (a <meta charset> is not
read). Unclosed or misnested tags are kept as written (nothing is dropped). CPython's
html.parser can take time quadratic in the length of an unclosed tag (gh-135462): the
server bounds the size of what it reads.
"""

from __future__ import annotations

import html
import re
from bisect import bisect_left
from dataclasses import dataclass, field
from html.parser import HTMLParser

from translator.documents.document import Run, Unit, decoded, encoded, plain


def _names(words: str) -> frozenset[str]:
    return frozenset(words.split())


_BLOCK = _names(
    "address article aside base blockquote body button caption center col colgroup dd "
    "details dialog dir div dl dt fieldset figcaption figure footer form frame frameset h1 h2 "
    "h3 h4 h5 h6 head header hgroup hr html legend li link main menu meta nav noscript ol "
    "optgroup option p search section select summary table tbody td template tfoot th thead "
    "title tr ul"
)
_RAW = _names("script style pre textarea xmp listing plaintext noembed noframes")
_KEPT = _names(
    "code kbd samp var svg math img br wbr input iframe object embed video audio canvas "
    "picture source track area map meter progress"
)
_VOID = _names("area base br col embed hr img input link meta param source track wbr")
_FOREIGN = frozenset(("svg", "math"))  # their children are theirs, block names too
_ATTRS = ("title", "alt")
_PLACEHOLDER = ("input", "textarea")
_WORDY = re.compile(r"\w")
_BARE = re.compile(r"[^\s\"'=<>`&]+")
# html.parser's own (CPython 3.11), to find an attribute's value in its tag as written
_TAG_NAME = re.compile(r"([a-zA-Z][^\t\n\r\f />\x00]*)(?:\s|/(?!>))*")
_ATTR = re.compile(
    r"((?<=[\'\"\s/])[^\s/>][^\s/=>]*)(\s*=+\s*"
    r"(\'[^\']*\'|\"[^\"]*\"|(?![\'\"])[^>\s]*))?(?:\s|/(?!>))*"
)


@dataclass
class _Event:
    kind: str  # start, startend, end, data, other
    tag: str
    start: int
    end: int = 0  # where the next event starts: nothing the parser skips is lost
    data: str = ""
    attrs: list = field(default_factory=list)
    tag_length: int = 0


class _Events(HTMLParser):
    """The document as events, each with where it starts in the text."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.lines = [0] + [m.end() for m in re.finditer("\n", text)]
        self.events: list[_Event] = []
        self.feed(text)
        self.close()
        for event, after in zip(self.events, self.events[1:], strict=False):
            event.end = after.start
        if self.events:
            self.events[-1].end = len(text)
        if not all(_placed(event, text) for event in self.events):
            raise ValueError("html.parser told a place its markup does not stand at")

    def _at(self) -> int:
        line, column = self.getpos()
        return self.lines[line - 1] + column

    def _tag(self, kind: str, tag: str, attrs: list) -> None:
        length = len(self.get_starttag_text() or "")
        self.events.append(_Event(kind, tag, self._at(), attrs=attrs, tag_length=length))

    def handle_starttag(self, tag, attrs):
        self._tag("start", tag, attrs)

    def handle_startendtag(self, tag, attrs):
        self._tag("startend", tag, attrs)

    def handle_endtag(self, tag):
        self.events.append(_Event("end", tag, self._at()))

    def handle_data(self, data):
        self.events.append(_Event("data", "", self._at(), data=data))

    def handle_comment(self, data):
        self.events.append(_Event("other", "", self._at()))

    handle_decl = handle_pi = unknown_decl = handle_comment


def _placed(event: _Event, text: str) -> bool:
    """Whether an event stands where html.parser says (markup where markup is)."""
    if event.end < event.start:
        return False
    if event.kind in ("start", "startend"):
        return text.startswith("<", event.start) and event.tag_length <= event.end - event.start
    return event.kind == "data" or text.startswith("<", event.start)


@dataclass
class _Piece:
    kind: str  # text, open, close, kept
    start: int
    end: int
    tag: str = ""
    data: str = ""


@dataclass
class _Slot:
    """Where a unit goes: text from `start` to `end`, or an attribute's value (quotes and
    all) from `start` to `end` in the tag from `tag` to `tag_end`."""

    start: int
    end: int
    tag: int = -1
    tag_end: int = -1


@dataclass
class HtmlDocument:
    units: list[Unit]
    slots: list[_Slot]
    text: str
    data: bytes

    def write(self, translated: list[Unit]) -> bytes:
        retagged = self._retagged(translated)
        starts = sorted(retagged)
        by_text = {self.text[at : retagged[at][0]]: retagged[at][1] for at in reversed(starts)}
        out, at = [], 0
        for slot, unit, source in zip(self.slots, translated, self.units, strict=True):
            if slot.tag >= 0:
                continue
            out.append(self._source(at, slot.start, retagged, starts))
            if unit == source:
                out.append(self._source(slot.start, slot.end, retagged, starts))
            else:
                out.append(self._written(unit, by_text, retagged, starts))
            at = slot.end
        out.append(self._source(at, len(self.text), retagged, starts))
        return encoded("".join(out), like=self.data)

    def _retagged(self, translated: list[Unit]) -> dict[int, tuple[int, str]]:
        """Each tag with a translated attribute: where it starts → (its end, its new text)."""
        values: dict[int, list[tuple[_Slot, str]]] = {}
        for slot, unit, source in zip(self.slots, translated, self.units, strict=True):
            if slot.tag >= 0 and unit != source:
                value = _quoted("".join(r.text for r in unit), self.text[slot.start])
                values.setdefault(slot.tag, []).append((slot, value))
        retagged = {}
        for tag, changes in values.items():
            tag_end, pieces, at = changes[0][0].tag_end, [], tag
            for slot, value in changes:
                pieces += [self.text[at : slot.start], value]
                at = slot.end
            retagged[tag] = (tag_end, "".join(pieces) + self.text[at:tag_end])
        return retagged

    def _source(self, start: int, end: int, retagged: dict, starts: list[int]) -> str:
        """The text from `start` to `end` as written, its tags' attributes translated."""
        out, at = [], start
        for i in range(bisect_left(starts, start), len(starts)):
            if starts[i] >= end:
                break
            tag_end, new = retagged[starts[i]]
            if tag_end <= end:
                out += [self.text[at : starts[i]], new]
                at = tag_end
        out.append(self.text[at:end])
        return "".join(out)

    def _written(self, unit: Unit, by_text: dict, retagged: dict, starts: list[int]) -> str:
        """A unit's runs in their inline tags (opened and closed as the marks change)."""
        parts: list[str] = []
        opened: tuple = ()
        for run in [*unit, None]:
            marks = () if run is None else run.mark[3] if run.kept else run.mark
            same = 0
            while same < min(len(opened), len(marks)) and opened[same] == marks[same]:
                same += 1
            parts += [end for _, end in reversed(opened[same:])]
            parts += [by_text.get(start, start) for start, _ in marks[same:]]
            opened = marks
            if run is not None and run.kept:
                parts.append(self._source(run.mark[1], run.mark[2], retagged, starts))
            elif run is not None:
                parts.append(html.escape(run.text, quote=False))
        return "".join(parts)


class HtmlFormat:
    media_type = "text/html; charset=utf-8"
    extra = ""

    @classmethod
    def read(cls, data: bytes, retranslate: bool = False) -> HtmlDocument:
        text = decoded(data, "the HTML file")
        events = _Events(text).events  # lenient: a bug of its own is one line (conversion)
        reader = _Reader(text)
        for event in events:
            reader.take(event)
        reader.finish()
        return HtmlDocument(reader.units, reader.slots, text, data)


class _Reader:
    """Events into units: a block's inline pieces gathered until the next block tag."""

    def __init__(self, text: str):
        self.text = text
        self.units: list[Unit] = []
        self.slots: list[_Slot] = []
        self.pieces: list[_Piece] = []
        self.raw: list | None = None  # [tag, depth] inside <script>, <pre>, …
        self.kept: list | None = None  # [tag, depth, start] inside <code>, <svg>, …

    def take(self, event: _Event) -> None:
        kind, tag = event.kind, event.tag
        if kind in ("start", "startend"):
            self._attributes(event)
        if self.raw is not None:
            self._in_raw(event)
        elif self.kept is not None and self._in_kept(event):
            pass
        elif kind == "data":
            source = self.text[event.start : event.end]
            text = html.unescape(source) == event.data  # else something it skipped is in it
            self._piece("text" if text else "kept", event, data=event.data)
        elif kind == "other" or (kind == "startend" and tag not in _BLOCK | _RAW):
            self._piece("kept", event)
        elif tag in _BLOCK or tag in _RAW:
            self.flush()
            if tag in _RAW and kind == "start":
                self.raw = [tag, 1]
        elif tag in _KEPT and kind == "start" and tag not in _VOID:
            self.kept = [tag, 1, event.start]
        elif tag in _KEPT:
            self._piece("kept", event)
        else:
            self._piece("open" if kind == "start" else "close", event, tag)

    def finish(self) -> None:
        if self.kept is not None:
            self.pieces.append(_Piece("kept", self.kept[2], len(self.text)))
        self.flush()

    def _piece(self, kind: str, event: _Event, tag: str = "", data: str = "") -> None:
        self.pieces.append(_Piece(kind, event.start, event.end, tag, data))

    def _in_raw(self, event: _Event) -> None:
        if event.tag == self.raw[0] and event.kind in ("start", "end"):
            self.raw[1] += 1 if event.kind == "start" else -1
            if self.raw[1] == 0:
                self.raw = None

    def _in_kept(self, event: _Event) -> bool:
        """Whether an event inside a kept element is its (a block tag ends it but in an
        <svg> or <math>)."""
        tag, depth, start = self.kept
        if event.tag == tag and event.kind in ("start", "end"):
            self.kept[1] = depth + (1 if event.kind == "start" else -1)
            if self.kept[1] == 0:
                self.pieces.append(_Piece("kept", start, event.end))
                self.kept = None
            return True
        if tag in _FOREIGN or event.kind in ("data", "other") or event.tag not in _BLOCK | _RAW:
            return True
        self.pieces.append(_Piece("kept", start, event.start))
        self.kept = None
        return False

    def flush(self) -> None:
        """The pieces gathered as a unit, where they hold text."""
        pieces, self.pieces = self.pieces, []
        if any(p.kind == "text" and p.data.strip() for p in pieces):
            self.units.append(_runs(pieces, self.text))
            self.slots.append(_Slot(pieces[0].start, pieces[-1].end))

    def _attributes(self, event: _Event) -> None:
        """The title, alt and placeholder attributes of a tag, each a unit."""
        tag_text = self.text[event.start : event.start + event.tag_length]
        for name, value, start, end in _values(tag_text, event.attrs):
            wanted = name in _ATTRS or (name == "placeholder" and event.tag in _PLACEHOLDER)
            if wanted and value.strip():
                self.units.append(plain(value))
                at = event.start
                self.slots.append(_Slot(at + start, at + end, at, event.end))


def _quoted(value: str, first: str) -> str:
    """An attribute's new value as written: in the quotes it had; without, where it needs
    none."""
    if first not in "\"'" and _BARE.fullmatch(value):
        return value
    quote = first if first in "\"'" else '"'
    return quote + html.escape(value) + quote


def _values(tag_text: str, attrs: list) -> list[tuple[str, str, int, int]]:
    """(name, value, where its value starts and ends in the tag, quotes and all) of each
    attribute with a value, found as html.parser finds them; none where what is found is
    not what the parser gave."""
    found = _TAG_NAME.match(tag_text, 1)
    at, out = found.end() if found else len(tag_text), []
    for name, value in attrs:
        match = _ATTR.match(tag_text, at)
        if not match or match.group(1).lower() != name:
            return []
        at = match.end()
        raw = match.group(3)
        if raw is None or value is None:
            continue
        inner = raw[1:-1] if raw[:1] in ("'", '"') and raw[-1:] == raw[:1] else raw
        if html.unescape(inner) != value:
            return []
        out.append((name, value, match.start(3), match.end(3)))
    return out


def _runs(pieces: list[_Piece], text: str) -> Unit:
    """A unit's pieces as runs: the text in each inline element that holds words marked
    with its tags as written; an element without (🔬, an icon), whole, and anything else
    kept."""
    ends, closes, stray = _elements(pieces, text)
    runs: Unit = []
    stack: list[int] = []  # the open elements (their start pieces)
    marks: dict[int, tuple[str, str]] = {}
    i = 0
    while i < len(pieces):
        piece = pieces[i]
        mark = tuple(marks[e] for e in stack)
        if piece.kind == "open" and i in ends and ends[i][1]:
            stack.append(i)
            marks[i] = (text[piece.start : piece.end], ends[i][2])
        elif piece.kind == "open" and i in ends:  # no text in it: kept whole
            end = pieces[ends[i][0] - 1].end
            runs.append(Run(text[piece.start : end], ("kept", piece.start, end, mark), True))
            i = ends[i][0]
            continue
        elif piece.kind == "close" and i not in stray:
            if closes[i] in stack:
                del stack[stack.index(closes[i]) :]
        elif piece.kind == "text":
            runs.append(Run(piece.data, mark))
        else:
            source = text[piece.start : piece.end]
            runs.append(Run(source, ("kept", piece.start, piece.end, mark), True))
        i += 1
    return runs


_DEEPEST = 32  # inline elements open at once; a start tag deeper is kept as it stands


def _elements(pieces: list[_Piece], text: str):
    """Each inline element's start piece → (the piece after it ends, whether it holds words,
    its end tag as written: "" where it is not closed by its own); each end tag's piece →
    its element's start piece; the end tags that close none (kept as they stand)."""
    ends: dict[int, tuple[int, bool, str]] = {}
    closes: dict[int, int] = {}
    stray: set[int] = set()
    stack: list[tuple[int, int]] = []  # (start piece, how many texts before it)
    texts = 0
    for i, piece in enumerate(pieces):
        if piece.kind == "open" and len(stack) >= _DEEPEST:
            piece.kind = "kept"
        elif piece.kind == "open":
            stack.append((i, texts))
        elif piece.kind == "text" and _WORDY.search(piece.data):
            texts += 1
        elif piece.kind == "close":
            tags = [pieces[start].tag for start, _ in stack]
            at = len(tags) - 1 - tags[::-1].index(piece.tag) if piece.tag in tags else -1
            if at < 0:
                stray.add(i)
                continue
            for start, before in stack[at + 1 :]:
                ends[start] = (i, texts > before, "")
            start, before = stack[at]
            ends[start] = (i + 1, texts > before, text[piece.start : piece.end])
            closes[i] = start
            del stack[at:]
    for start, before in stack:
        ends[start] = (len(pieces), texts > before, "")
    return ends, closes, stray
