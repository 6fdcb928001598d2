"""Markdown (.md), read with markdown-it-py (CommonMark, with GFM tables and ~~strikethrough~~).

One unit a paragraph (in a list item or block quote too), heading (ATX or setext) and table
cell. Inside it, **strong**, *emphasis* and ~~strikethrough~~ are marks (their delimiters as
written; `_`/`__` become `*`/`**` where Chinese beside them would stop an underscore from
working), a link is a mark whose `](target "title")` is written back as it stands (a `[text]`
or `[text][]` reference link becomes `[译文][text]`, so it still finds its definition); kept
as written: `code`, images, inline HTML, <autolinks>, bare URLs and hard line breaks (with the
next line's `> ` or indentation). A block's lines are joined: its translation is written on
its first line, after its list marker, `> ` or `#`s, which are kept; its translation's
Markdown characters are escaped.

Byte for byte: code blocks (fenced and indented), HTML blocks, front matter (--- at the top),
link reference definitions, thematic breaks, blank lines, line endings, the table's pipes and
delimiter row, and a block whose text markdown-it does not read as its source lines have it
(one with a NUL character, say): that one is not translated.
"""

from __future__ import annotations

import re
import unicodedata
from array import array
from dataclasses import dataclass
from typing import Any

from translator.documents.document import Run, Unit, decoded, encoded, library

_TRIM = "\t\n\x0b\x0c\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
_TRIM += "\u200a\u2028\u2029\u202f\u205f\u3000"  # markdown-it's mdTrim
_BREAK = re.compile(r"\r\n?|\n")
_URL = re.compile(r"\b(?:https?://|www\.)[^\s<>()\[\]]*[^\s<>()\[\].,;:!?'\"*_~]")
_SPECIAL = re.compile(
    r"[\\`*\[\]<]|(?<![^\W_])_|_(?![^\W_])|~(?=~)|(?<=~)~|&(?=#?[0-9A-Za-z]{1,32};)"
)  # an underscore between two letters or digits makes no emphasis
_LINE_START = re.compile(r"[#>+=|-]|\d{1,9}(?=[.)])")
_WORDY = re.compile(r"\w")
# (inline rule, its function in markdown_it.rules_inline, the token whose source it records)
_RECORDED = (
    ("backticks", "backtick", "code_inline"),
    ("image", "image", "image"),
    ("link", "link", "link_open"),
    ("autolink", "autolink", "link_open"),
    ("html_inline", "html_inline", "html_inline"),
    ("newline", "newline", "hardbreak"),
    ("escape", "escape", "hardbreak"),
)
_PAIRED = {"strong_open": "strong", "em_open": "em", "s_open": "s"}


@dataclass
class _Block:
    start: int  # where its content stands in the file
    end: int
    table: bool  # a table cell: `|` is escaped in it


@dataclass
class MarkdownDocument:
    units: list[Unit]
    blocks: list[_Block]
    text: str
    data: bytes

    def write(self, translated: list[Unit]) -> bytes:
        out, at = [], 0
        for block, unit, source in zip(self.blocks, translated, self.units, strict=True):
            as_written = self.text[block.start : block.end]
            new = as_written if unit == source else _written(unit, block.table)
            out += [self.text[at : block.start], new if new.strip() else as_written]
            at = block.end
        out.append(self.text[at:])
        return encoded("".join(out), like=self.data)


class MarkdownFormat:
    media_type = "text/markdown; charset=utf-8"
    extra = "markdown"

    @classmethod
    def read(cls, data: bytes, retranslate: bool = False) -> MarkdownDocument:
        text = decoded(data, "the Markdown file")
        mdit = library("markdown_it", "markdown", ".md")
        rules = library("markdown_it.rules_inline", "markdown", ".md")
        lines = [(0, len(text))]
        if "\r" in text or "\n" in text:
            cuts = [(m.start(), m.end()) for m in _BREAK.finditer(text)]
            starts = [0] + [end for _, end in cuts]
            lines = list(zip(starts, [start for start, _ in cuts] + [len(text)], strict=True))
        tokens = _parser(mdit, rules).parse(_parsed_text(text, lines))  # lenient (conversion)
        units, blocks = [], []
        for unit, block in _blocks(tokens, text, lines):
            units.append(unit)
            blocks.append(block)
        return MarkdownDocument(units, blocks, text, data)


def _parser(mdit: Any, rules: Any) -> Any:
    """CommonMark with tables and strikethrough; the inline rules that make the tokens
    written back as they stand record where their source is (token.meta["span"])."""
    md = mdit.MarkdownIt("commonmark").enable(["table", "strikethrough"])
    for name, function, kind in _RECORDED:
        md.inline.ruler.at(name, _recording(getattr(rules, function), kind, name))
    return md


def _recording(rule: Any, kind: str, name: str) -> Any:
    def recorded(state: Any, silent: bool) -> bool:
        start, count = state.pos, len(state.tokens)
        if not rule(state, silent):
            return False
        for token in state.tokens[count:] if not silent else ():
            if token.type == kind:
                while name == "newline" and start > 0 and state.src[start - 1] == " ":
                    start -= 1  # the spaces that make the break
                token.meta["span"] = (start, state.pos)
                if name == "link":
                    token.meta["label"] = state.md.helpers.parseLinkLabel(state, start, True)
                break
        return True

    return recorded


def _parsed_text(text: str, lines: list[tuple[int, int]]) -> str:
    """The text markdown-it reads: its lines, front matter blanked (kept as it stands)."""
    rows = [text[start:end] for start, end in lines]
    if rows and rows[0].rstrip() == "---":
        for k in range(1, len(rows)):
            if rows[k].rstrip() in ("---", "..."):
                rows[: k + 1] = [""] * (k + 1)
                break
    return "\n".join(rows)


def _blocks(tokens: list[Any], text: str, lines: list[tuple[int, int]]):
    """(unit, block) for each paragraph, heading and table cell that has text."""
    row: list[tuple[str, array]] | None = None
    row_line = column = 0
    for i, token in enumerate(tokens):
        if token.type == "tr_open":
            row, row_line, column = None, token.map[0], -1
        column += token.type in ("th_open", "td_open")
        if token.type != "inline" or not token.map or not token.content:
            continue
        parent, offsets = tokens[i - 1], None
        cell = parent.type in ("th_open", "td_open")
        if cell:
            row = _cells(text, *lines[row_line]) if row is None else row
            if column < len(row) and row[column][0] == token.content:
                offsets = row[column][1]
        elif parent.type in ("paragraph_open", "heading_open"):
            atx = parent.type == "heading_open" and parent.markup not in ("=", "-")
            offsets = _offsets(token.content, text, lines[token.map[0] : token.map[1]], atx)
        unit = _runs(token.children or [], offsets, text, token.content) if offsets else None
        if unit:
            yield unit, _Block(offsets[0], offsets[-1], cell)


def _offsets(content: str, text: str, lines: list[tuple[int, int]], atx: bool) -> array | None:
    """Where each character of a block's content (and its end) stands in the file; None
    where its lines are not the ends of the source lines (then it is left as it is)."""
    pieces = content.split("\n")
    if len(pieces) != len(lines):
        return None
    offsets = array("q")
    for k, (piece, (start, end)) in enumerate(zip(pieces, lines, strict=True)):
        core = piece.lstrip(" \t")  # a continuation line's indentation is not its text
        if k == len(lines) - 1:
            end = start + len(_content_end(text[start:end], atx))
        at = end - len(core)
        if at < start or text[at:end] != core:
            return None
        offsets.extend([at] * (len(piece) - len(core)))
        offsets.extend(range(at, end + 1))  # its characters and the line's end
    return offsets


def _content_end(line: str, atx: bool) -> str:
    """A block's last line up to where its content ends (before an ATX closing #s)."""
    line = line.rstrip(_TRIM)
    if atx:
        bare = line.rstrip(" \t").rstrip("#")
        if bare != line.rstrip(" \t") and bare[-1:] in (" ", "\t"):
            line = bare
        line = line.rstrip()
    return line


def _cells(text: str, start: int, end: int) -> list[tuple[str, array]]:
    """A table row's cells as markdown-it splits them (an escaped pipe \\| is one `|` of
    the cell's text): (content, the file offset of each of its characters and its end)."""
    line = text[start:end]
    at = len(line) - len(line.lstrip(" \t>"))  # block quote markers, indentation
    at += len(line[at:]) - len(line[at:].lstrip(_TRIM))
    stop = len(line.rstrip(_TRIM))
    columns: list[tuple[list[str], array]] = [([], array("q"))]
    escaped = False
    for pos in range(at, stop):
        ch, (chars, offsets) = line[pos], columns[-1]
        if ch == "|" and not escaped:
            offsets.append(start + pos)
            columns.append(([], array("q")))
        elif ch == "|":
            chars[-1], offsets[-1] = "|", start + pos  # the backslash dropped
        else:
            chars.append(ch)
            offsets.append(start + pos)
        escaped = ch == "\\"
    columns[-1][1].append(start + stop)
    if columns and not columns[0][0]:
        columns.pop(0)
    if columns and not columns[-1][0]:
        columns.pop()
    cells = []
    for chars, offsets in columns:
        raw = "".join(chars)
        lead = len(raw) - len(raw.lstrip(_TRIM))
        content = raw.strip(_TRIM)
        cells.append((content, offsets[lead : lead + len(content) + 1]))
    return cells


def _runs(children: list[Any], offsets: array, text: str, content: str) -> Unit | None:
    """A block's inline tokens as runs; None where one written back as it stands has no
    recorded source (the block is then left as it is)."""
    runs: Unit = []
    stack: list[tuple[str, ...]] = []
    i = 0
    while i < len(children):
        token = children[i]
        kind, span = token.type, token.meta.get("span")
        if kind == "link_open":
            close = _closing(children, i)
            if token.markup == "autolink" or not _has_text(children[i + 1 : close]):
                if span is None:
                    return None
                runs.append(_kept(text, offsets, span, stack))
                i = close + 1
                continue
            if span is None or token.meta.get("label", -1) < 0:
                return None
            stack.append(_link(text, offsets, span, token.meta["label"], content))
        elif kind in _PAIRED:
            stack.append((_PAIRED[kind], token.markup))
        elif kind.endswith("_close"):
            if stack:
                stack.pop()
        elif kind == "text":
            runs += _text_runs(token.content, tuple(stack))
        elif kind == "softbreak":
            runs.append(Run(" ", tuple(stack)))
        elif span is None:  # code_inline, image, html_inline, hardbreak
            return None
        else:
            runs.append(_kept(text, offsets, span, stack))
        i += 1
    return runs


def _closing(children: list[Any], i: int) -> int:
    depth = 0
    for j in range(i, len(children)):
        depth += children[j].nesting if children[j].type.startswith("link_") else 0
        if depth == 0:
            return j
    return len(children) - 1


def _has_text(tokens: list[Any]) -> bool:
    return any(t.type == "text" and _WORDY.search(t.content) for t in tokens)


def _kept(text: str, offsets: array, span: tuple[int, int], stack: list) -> Run:
    """Something written back as it stands: its source in the file, and the marks around it."""
    return Run(text[offsets[span[0]] : offsets[span[1]]], ("kept", tuple(stack)), kept=True)


def _link(text: str, offsets: array, span: tuple[int, int], label: int, content: str):
    """A link's mark: what follows its text, as written (`](target "title")`, `][ref]`);
    a shortcut or collapsed reference names its label, which the translation no longer is."""
    after = text[offsets[label] : offsets[span[1]]]
    if after in ("]", "][]"):
        after = "][" + " ".join(content[span[0] + 1 : label].split()) + "]"
    return ("link", after)


def _text_runs(text: str, mark: tuple) -> Unit:
    """Text, a bare URL in it kept as written."""
    runs, at = [], 0
    for found in _URL.finditer(text):
        runs += [Run(text[at : found.start()], mark)] if found.start() > at else []
        runs.append(Run(found.group(), ("url", mark), kept=True))
        at = found.end()
    return runs + ([Run(text[at:], mark)] if at < len(text) else [])


def _written(unit: Unit, table: bool) -> str:
    """A unit as Markdown: each mark's delimiters around its runs, kept runs as written."""
    writer = _Writer(table)
    for run in unit:
        writer.add(run)
    writer.close_to(())
    writer.parts.append(_referenced(writer.blank))
    _underscores(writer.parts, writer.pairs)
    written = "".join(writer.parts)
    if written.endswith("#") and not written.endswith("\\#") and unit and not unit[-1].kept:
        written = written[:-1] + "\\#"  # not an ATX heading's closing #
    return written


class _Writer:
    """Runs written one after another, the blanks at a run's ends outside its delimiters."""

    def __init__(self, table: bool):
        self.table = table
        self.parts: list[str] = []
        self.pairs: list[list[int]] = []  # where each mark's opening and closing are in parts
        self.waiting: list[int] = []  # the index in `pairs` of each mark open
        self.opened: tuple = ()
        self.blank = ""  # written before what comes next
        self.line_start = True

    def add(self, run: Run) -> None:
        if not run.kept and not run.text.strip():
            self.close_to(run.mark)
            self.blank += _one_line(run.text)
            return
        marks = run.mark[1] if run.kept else run.mark
        body = run.text if run.kept else _one_line(run.text)
        core = body if run.kept else body.strip()
        self.close_to(marks)
        blank = self.blank + body[: len(body) - len(body.lstrip())] * (not run.kept)
        self.parts.append(blank if self.parts else _referenced(blank))
        for mark in marks[len(self.opened) :]:
            self.waiting.append(len(self.pairs))
            self.pairs.append([len(self.parts)])
            self.parts.append("[" if mark[0] == "link" else mark[1])
        self.opened = marks
        if not run.kept or run.mark[0] == "url":
            core = _escaped(core, self.table, self.line_start and not run.kept)
        self.parts.append(core)
        self.blank = "" if run.kept else body[len(body.rstrip()) :]
        self.line_start = run.kept and _breaks(core)

    def close_to(self, marks: tuple) -> None:
        """The marks open but not in `marks` closed."""
        same = 0
        while same < min(len(self.opened), len(marks)) and self.opened[same] == marks[same]:
            same += 1
        for mark in reversed(self.opened[same:]):
            self.pairs[self.waiting.pop()].append(len(self.parts))
            self.parts.append(mark[1])
        self.opened = self.opened[:same]


def _one_line(text: str) -> str:
    return text.replace("\r\n", " ").replace("\r", " ").replace("\n", " ")


def _referenced(blank: str) -> str:
    """Blanks at a block's ends, those markdown-it would trim (a no-break space) as
    character references."""
    return "".join(c if c in " \t" else f"&#x{ord(c):X};" for c in blank)


def _breaks(kept: str) -> bool:
    """Whether a kept run ends a line (a hard break and the next line's prefix)."""
    return "\n" in kept and not kept[kept.rindex("\n") + 1 :].strip(" \t>")


def _escaped(text: str, table: bool, line_start: bool) -> str:
    """Text with the characters Markdown would read as markup escaped."""
    text = _SPECIAL.sub(lambda m: "\\" + m.group(), text)
    if table:
        text = text.replace("|", "\\|")
    found = _LINE_START.match(text) if line_start else None
    if found:
        at = found.end() - (found.group()[0] not in "0123456789")
        text = text[:at] + "\\" + text[at:]
    return text


_TAGS = {"**": "strong", "__": "strong", "*": "em", "_": "em", "~~": "del"}


def _underscores(parts: list[str], pairs: list[list[int]]) -> None:
    """Delimiters CommonMark would not read as emphasis beside Chinese: `_`/`__` as `*`/`**`
    where a word character stands outside them, and any pair as HTML (`<strong>`, `<em>`,
    `<del>`) where punctuation inside meets a word character outside (`**《三体》**这本书`
    would show its asterisks)."""
    ends = [0]
    for part in parts:
        ends.append(ends[-1] + len(part))
    joined = "".join(parts)
    for opening, closing in pairs:
        if parts[opening] not in _TAGS:
            continue
        before = joined[ends[opening] - 1 : ends[opening]]
        after = joined[ends[closing + 1] : ends[closing + 1] + 1]
        first = joined[ends[opening + 1] : ends[opening + 1] + 1]
        last = joined[ends[closing] - 1 : ends[closing]]
        if (_punctuation(first) and _WORDY.match(before)) or (
            _punctuation(last) and _WORDY.match(after)
        ):
            tag = _TAGS[parts[opening]]
            parts[opening], parts[closing] = f"<{tag}>", f"</{tag}>"
        elif parts[opening] in ("_", "__") and (_WORDY.match(before) or _WORDY.match(after)):
            parts[opening] = parts[closing] = "*" * len(parts[opening])


def _punctuation(char: str) -> bool:
    """Whether CommonMark counts `char` as punctuation (Unicode P* and S*)."""
    return bool(char) and unicodedata.category(char)[0] in "PS"
