"""WebVTT subtitles (.vtt), read and checked with webvtt-py: each cue one unit, its lines
joined with a space, the translation spliced into the file where the cue's text stood.
The WEBVTT header and its metadata, NOTE, STYLE and REGION blocks, cue identifiers,
timestamps with their settings (align:start position:10%), blank lines, a BOM and the
line endings come back byte-for-byte, and so does a cue without words.

Inline tags <v Speaker>, <c.class>, <i>, <b>, <u>, <ruby>, <rt>, <lang en> are marks;
timestamps inside a cue (<00:01.000>), other tags and a dialogue line's leading dash are
written back as they stand; &amp; &lt; &gt; (and other character references) are read as
their characters and written back escaped. Lines are written as for .srt (srt.py); each
<v Speaker> that follows words starts a line of its own. Not kept: a character reference
other than &amp; &lt; &gt; in translated text is written as its character (&nbsp; as
U+00A0).
"""

from __future__ import annotations

import html
import re

from translator.documents.document import BadDocument, decoded, library
from translator.documents.formats.srt import Markup, SubtitleDocument, read_cue

_LINE = re.compile(r"([^\r\n]*)(\r\n|\r|\n|$)")

VTT = Markup(
    re.compile(r"<(/?)([A-Za-z][A-Za-z0-9]*)(?:\.[^\s<>]*)?(?:[ \t][^<>\r\n]*)?>|<[0-9:.]+>"),
    frozenset({"c", "i", "b", "u", "v", "ruby", "rt", "lang"}),
    unescape=html.unescape,
    escape=lambda text: html.escape(text, quote=False),
    speaker="v",
)


def lines_of(text: str) -> list[tuple[int, int]]:
    """Each line's (start, end) in `text`, its line ending left out; the empty line after a
    final line ending is not one (as webvtt-py splits)."""
    places = []
    for line in _LINE.finditer(text):
        if line.start() == len(text):
            break
        places.append(line.span(1))
    return places


def blocks(lines: list[str]) -> list[list[int]]:
    """The WebVTT blocks as webvtt-py reads them: indices of their lines. A block ends at an
    empty line, or where a line with "-->" cannot be its cue timings."""
    found: list[list[int]] = []
    block: list[int] = []
    header = True
    for i, line in enumerate(lines):
        timings = block and "-->" in line and (header or len(block) > 1 or "-->" in lines[block[0]])
        if block and (not line or timings):
            found.append(block)
            block, header = [], False
        if line:
            block.append(i)
    return found + [block] if block else found


def cue_places(text: str, webvtt) -> list[tuple[int, int]]:
    """Where each cue's text stands in `text`: from the line after its timings to the end
    of its block (an empty span at its end for a cue without text)."""
    places = lines_of(text)
    lines = [text[start:end] for start, end in places]
    found, seen_cue = [], False
    for block in blocks(lines):
        block_lines = [lines[i] for i in block]
        item = webvtt.vtt.parse_item(block_lines, False, seen_cue)
        seen_cue = seen_cue or any("-->" in line for line in block_lines)
        if isinstance(item, webvtt.Caption):
            timings = next(i for i in block if "-->" in lines[i])
            end = places[block[-1]][1]
            found.append((places[timings + 1][0] if timings < block[-1] else end, end))
    return found


class VttFormat:
    media_type = "text/vtt; charset=utf-8"
    extra = "subtitles"

    @classmethod
    def read(cls, data: bytes, retranslate: bool = False) -> SubtitleDocument:
        webvtt = library("webvtt", "subtitles", ".vtt")
        text = decoded(data, "the .vtt file")
        try:
            count = len(webvtt.from_string(text).captions)
            places = cue_places(text, webvtt)
        except webvtt.errors.MalformedFileError:
            raise BadDocument(
                "the .vtt file is not WebVTT: it does not start with WEBVTT"
            ) from None
        except (webvtt.errors.MalformedCaptionError, ValueError) as exc:
            reason = " ".join(str(exc).split())[:200]
            raise BadDocument(f"the .vtt file has a cue that cannot be read ({reason})") from None
        if len(places) != count:
            raise BadDocument(f"the .vtt file's {count} cues could not be found in its text")
        cues = [read_cue(text[start:end], VTT) for start, end in places]
        return SubtitleDocument([c.runs for c in cues], cues, places, text, data, VTT)
