"""SubRip subtitles (.srt), read and checked with the `srt` library: each cue one unit, its
lines joined with a space. The translation is spliced into the file where the cue's text
stood, so cue numbers, timestamps, what follows a timestamp (positions, a player's own
text), blank lines, a BOM and the line endings (\\r\\n) come back byte-for-byte, and so
does a cue without words.

Inline tags <i> <b> <u> <s> <font color=…> are marks (the tags open around a word, as
written); {\\an8}-style tags and other tags are written back as they stand, inside the tags
they stood in, and so is a dialogue line's leading dash ("- ", "-"). A translated cue is
one line, or as many lines as the cue had, broken after a punctuation mark near each
equal share of its text (none near: fewer lines); each dialogue dash starts a line. Not
kept: the cue's own line breaks elsewhere; closing tags are written as </name> for the
name as opened (</I> for <I>); a tag the cue left open stays open.

The subtitle machinery here (tags → runs → tags) also serves WebVTT (vtt.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from translator.documents.document import BadDocument, Run, Unit, decoded, encoded, library

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_DASH = re.compile(r"(?:-|[\u2013\u2014](?= )) *(?=[^\s\d-])")  # "- Hello": a speaker's line
_BREAK_AFTER = frozenset("，。！？；：、…,;:!?")
DASH = "dash"  # the mark of a dialogue dash run
KEPT = "kept"  # (KEPT, tags open around it): any other run written back as it stands
BREAK = "break"  # a line break the writer puts in
MAX_DEPTH = 16  # tags open at once; one opened deeper is kept as it stands (hostile input)


@dataclass(frozen=True)
class Markup:
    """How a subtitle format writes inline markup: `token` finds a tag (group 1: "/" for a
    closing one, group 2: its name) or a kept token (no name); `wrapping` names the tags
    whose text is formatted (marks); `speaker`, a tag that starts a speaker's line."""

    token: re.Pattern
    wrapping: frozenset[str]
    unescape: Callable[[str], str] = str
    escape: Callable[[str], str] = str
    speaker: str = ""


SRT = Markup(
    re.compile(r"<(/?)([A-Za-z][A-Za-z0-9]*)\b[^<>\r\n]*>|\{\\[^{}\r\n]*\}"),
    frozenset({"i", "b", "u", "s", "font"}),
)


@dataclass
class Cue:
    """A cue's text as read: its runs, its line count, the tags it left open."""

    runs: Unit
    lines: int
    unclosed: frozenset[str] = field(default_factory=frozenset)


def tag_name(tag: str) -> str:
    """The name of an opening tag as written: "font" for <font color=red>, "c" for <c.x>."""
    return re.match(r"<([A-Za-z][A-Za-z0-9]*)", tag).group(1)


def read_cue(text: str, markup: Markup) -> Cue:
    """A cue's text as runs: words marked by the tags open around them (a tuple of the
    opening tags as written), kept tokens as they stand, a space where a line broke."""
    lines = _LINE_BREAK.split(text)
    runs: Unit = []
    stack: list[str] = []
    for n, line in enumerate(lines):
        if n:
            runs.append(Run(" ", tuple(stack)))
        if dash := _DASH.match(line):
            runs.append(Run(dash.group(), DASH, kept=True))
        at = dash.end() if dash else 0
        for token in markup.token.finditer(line, at):
            if token.start() > at:
                runs.append(Run(markup.unescape(line[at : token.start()]), tuple(stack)))
            at = token.end()
            if not take_tag(token, stack, markup):
                runs.append(Run(token.group(), (KEPT, tuple(stack)), kept=True))
        if at < len(line):
            runs.append(Run(markup.unescape(line[at:]), tuple(stack)))
    return Cue([r for r in runs if r.text], len(lines), frozenset(stack))


def take_tag(token: re.Match, stack: list[str], markup: Markup) -> bool:
    """Open or close a formatting tag on `stack`; False for a token kept as it stands (a tag
    of no formatting, a closing tag of none open, a tag opened MAX_DEPTH deep)."""
    name = (token.group(2) or "").lower()
    if name not in markup.wrapping:
        return False
    if not token.group(1):
        if len(stack) >= MAX_DEPTH:
            return False
        stack.append(token.group())
        return True
    for depth in range(len(stack) - 1, -1, -1):
        if tag_name(stack[depth]).lower() == name:
            del stack[depth:]
            return True
    return False


def write_cue(runs: Unit, cue: Cue, markup: Markup, newline: str) -> str:
    """A translated cue's text: tags opened and closed around each run's words, kept runs
    as they stood, its lines broken as the module docstring says."""
    if cue.lines > 1 and not any(r.mark == DASH for r in runs[1:]) and speakers(runs, markup) < 2:
        runs = broken(runs, cue.lines)
    if markup.speaker:
        runs = with_speaker(runs, markup)
    out: list[str] = []
    stack: tuple[str, ...] = ()
    words = False  # whether a line holds words yet: a dash or speaker then starts another
    for run in runs:
        if run.kept and isinstance(run.mark, tuple):  # inside the tags it stood in
            out.append(retagged(stack, run.mark[1], markup, words))
            stack = run.mark[1]
        if run.kept:
            out.append("\n" if run.mark == BREAK or (run.mark == DASH and words) else "")
            out.append("" if run.mark == BREAK else run.text)
            words = words or run.mark == DASH
            continue
        mark = run.mark if isinstance(run.mark, tuple) else ()
        out.append(retagged(stack, mark, markup, words))
        stack = mark
        out.append(markup.escape(" ".join(run.text.splitlines())))
        words = words or bool(run.text.strip())
    out.append(retagged(stack, (), markup, words, cue.unclosed))
    text = re.sub(r"[ \t\n]*\n[ \t\n]*", "\n", "".join(out)).strip("\n")  # no blank line
    return text.replace("\n", newline)


def speaker(mark: object, markup: Markup) -> str | None:
    """The speaker tag of a words run's mark."""
    tags = mark if isinstance(mark, tuple) else ()
    return next((t for t in tags if tag_name(t).lower() == markup.speaker), None)


def with_speaker(runs: Unit, markup: Markup) -> Unit:
    """Punctuation the translation put after a speaker's words (a sentence's "." or "?"
    outside its span) said by that speaker, not by another."""
    out: Unit = []
    for run in runs:
        before = out[-1] if out and not out[-1].kept else None
        if (
            before
            and not run.kept
            and not re.search(r"\w", run.text)
            and speaker(before.mark, markup) != speaker(run.mark, markup)
        ):
            run = Run(run.text, before.mark)
        out.append(run)
    return out


def speakers(runs: Unit, markup: Markup) -> int:
    """How many speaker tags the runs' marks hold."""
    tags = {t for r in runs if not r.kept and isinstance(r.mark, tuple) for t in r.mark}
    return sum(1 for t in tags if markup.speaker and tag_name(t).lower() == markup.speaker)


def retagged(
    stack: tuple[str, ...],
    mark: tuple[str, ...],
    markup: Markup,
    started: bool,
    unclosed: frozenset[str] = frozenset(),
) -> str:
    """The tags that close what `stack` has open beyond `mark` and open the rest of `mark`
    (a speaker's tag after the cue's start on a line of its own)."""
    common = 0
    while common < min(len(stack), len(mark)) and stack[common] == mark[common]:
        common += 1
    closing = [f"</{tag_name(t)}>" for t in reversed(stack[common:]) if t not in unclosed]
    opening = []
    for tag in mark[common:]:
        if markup.speaker and tag_name(tag).lower() == markup.speaker and started:
            opening.append("\n")
        opening.append(tag)
    return "".join(closing + opening)


def broken(runs: Unit, lines: int) -> Unit:
    """`runs` with a line break after the punctuation mark nearest each 1/lines share of
    its words' characters (within a quarter share of it), where there is one."""
    text = "".join(r.text for r in runs if not r.kept)
    share = len(text) / lines
    marks = [i + 1 for i, ch in enumerate(text[:-1]) if ch in _BREAK_AFTER]
    cuts = []
    for k in range(1, lines):
        near = min(marks, key=lambda m: abs(m - k * share), default=None)
        if near is not None and abs(near - k * share) <= share / 4 and near not in cuts:
            cuts.append(near)
    out: Unit = []
    seen = 0
    for run in runs:
        if run.kept:
            out.append(run)
            continue
        start = 0
        for cut in sorted(c - seen for c in cuts if seen < c <= seen + len(run.text)):
            out += [Run(run.text[start:cut], run.mark), Run("", BREAK, kept=True)]
            start = cut
        out.append(Run(run.text[start:], run.mark))
        seen += len(run.text)
    return [r for r in out if r.text or r.kept]


@dataclass
class SubtitleDocument:
    """A subtitle file: each cue's text where it stands in `text` (start, end), spliced."""

    units: list[Unit]
    cues: list[Cue]
    places: list[tuple[int, int]]
    text: str
    data: bytes
    markup: Markup

    def write(self, translated: list[Unit]) -> bytes:
        newline = "\r\n" if "\r\n" in self.text else "\n"
        parts, at = [], 0
        for unit, cue, (start, end) in zip(translated, self.cues, self.places, strict=True):
            parts.append(self.text[at:start])
            same = unit == cue.runs
            parts.append(
                self.text[start:end] if same else write_cue(unit, cue, self.markup, newline)
            )
            at = end
        parts.append(self.text[at:])
        return encoded("".join(parts), like=self.data)


class SrtFormat:
    media_type = "application/x-subrip; charset=utf-8"
    extra = "subtitles"

    @classmethod
    def read(cls, data: bytes, retranslate: bool = False) -> SubtitleDocument:
        srt = library("srt", "subtitles", ".srt")
        text = decoded(data, "the .srt file")
        try:
            count = sum(1 for _ in srt.parse(text))
        except srt.SRTParseError as exc:
            rest = text[exc.expected_start :]
            line = text[: len(text) - len(rest.lstrip())].count("\n") + 1
            raise BadDocument(
                f"the .srt file is not SubRip: no cue can start at line {line}"
            ) from None
        except ValueError as exc:
            reason = " ".join(str(exc).split())[:200]
            raise BadDocument(
                f"the .srt file has a timestamp that cannot be read: {reason}"
            ) from None
        places = [m.span(5) for m in srt.SRT_REGEX.finditer(text)]
        if len(places) != count:
            raise BadDocument(f"the .srt file's {count} cues could not be found in its text")
        cues = [read_cue(text[start:end], SRT) for start, end in places]
        return SubtitleDocument([c.runs for c in cues], cues, places, text, data, SRT)
