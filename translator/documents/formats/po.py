"""gettext catalogs (.po, .pot), read with polib: each untranslated entry's msgid (and
msgid_plural) one unit; with `retranslate`, translated and fuzzy entries too; obsolete
entries (#~) and the header never. Placeholders (%s, %(name)d, %1$s, %%, {name}, {0}) with
or without a format flag, HTML-ish tags (<b>, </b>, <a href=…>) and line breaks inside a
msgid are written back as they stand.

A filled entry gets the `fuzzy` flag (a translator reviews it); a plural entry's msgstr[0]
is msgid_plural's translation where Plural-Forms says nplurals=1 (Chinese), else msgstr[0]
msgid's and msgstr[1…] msgid_plural's. Only the entries filled are rewritten (by polib, at
the file's wrap width: 78, or none where the file has longer lines); the rest of the file,
entries translated already included, comes back byte-for-byte. The header gets
"Language: zh_CN" where it has no language, and charset=UTF-8 where it names another
charset. Where the spliced file would not read back as polib's catalog, the whole catalog
is written by polib instead (every entry then wrapped as polib wraps, obsolete entries
last). Not changed: the header's own fuzzy flag and Plural-Forms (a template's
"nplurals=INTEGER" stays: its plural entries then get as many msgstr[n] as they had); a
filled entry is rewrapped by polib, which counts characters where gettext counts columns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from translator.documents.document import (
    BadDocument,
    Run,
    Unit,
    decoded,
    encoded,
    library,
    text_of,
)

_PYTHON = r"%(?:\([^()\n]*\))?[#0+ -]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[hlL]?[diouxXeEfFgGcrsa%]"
_C = r"%(?:\d+\$)?[#0+ '-]*(?:\*|\d+)?(?:\.(?:\*|\d+))?(?:hh|ll|[hlLqjzt])?[diouxXeEfFgGaAcspn%]"
_BRACE = r"\{\{|\}\}|\{[\w.\[\]]*(?:![rsa])?(?::[^{}\n]*)?\}"
_TAG = r"</?[A-Za-z][\w:.-]*(?:\s[^<>]*)?/?>"
# in a c-format or python-format msgid a directive may take a blank as its flag ("% d");
# elsewhere "50% off" stays words
FLAGGED = re.compile("|".join([_TAG, _BRACE, _PYTHON, _C, r"\n"]))
UNFLAGGED = re.compile(
    "|".join([_TAG, _BRACE, _PYTHON.replace(" ", ""), _C.replace(" ", ""), r"\n"])
)
_PERCENT = ("c-format", "python-format")
_NPLURALS = re.compile(r"nplurals\s*=\s*(\d+)")
_STRING_LINE = re.compile(r"\s*(?:#~\s*)?(?:msg\w*(?:\[\d+\])?\s+)?\"")
WRAP = 78  # polib's and (79 columns) gettext's


def runs_of(text: str, flags: list[str]) -> Unit:
    """A msgid as runs: placeholders, tags and line breaks kept as they stand."""
    pattern = FLAGGED if any(f in _PERCENT for f in flags) else UNFLAGGED
    runs, at = [], 0
    for found in pattern.finditer(text):
        if found.start() > at:
            runs.append(Run(text[at : found.start()]))
        runs.append(Run(found.group(), kept=True))
        at = found.end()
    if at < len(text):
        runs.append(Run(text[at:]))
    return runs


def done(entry: Any) -> bool:
    """Whether an entry has a translation already (any msgstr written)."""
    return bool(entry.msgstr or any(entry.msgstr_plural.values()))


def plural_count(catalog: Any, entry: Any) -> int:
    """nplurals of the header's Plural-Forms; without one, the entry's msgstr[n] count."""
    found = _NPLURALS.search(catalog.metadata.get("Plural-Forms", ""))
    return int(found.group(1)) if found else max(len(entry.msgstr_plural), 1)


def slots(catalog: Any, retranslate: bool) -> list[tuple[int, str]]:
    """The texts to translate: (entry index, "msgid" or "msgid_plural")."""
    chosen = []
    for i, entry in enumerate(catalog):
        if entry.obsolete or not entry.msgid or (done(entry) and not retranslate):
            continue
        if not entry.msgid_plural or plural_count(catalog, entry) > 1:
            chosen.append((i, "msgid"))
        if entry.msgid_plural:
            chosen.append((i, "msgid_plural"))
    return chosen


def parsed(polib: Any, text: str) -> Any:
    """The catalog in `text`; BadDocument where polib cannot read it."""
    if "\n" not in text:
        text += "\n"  # polib reads a one-line string that names a file as that file
    try:
        return polib.pofile(text, encoding="utf-8", wrapwidth=WRAP)
    except (OSError, ValueError) as exc:
        reason = " ".join(str(exc).replace("in po file ", "").split())[:200]
        raise BadDocument(f"the .po file cannot be read: {reason}") from None


def fill(catalog: Any, place: list[tuple[int, str]], translated: list[Unit]) -> set[int]:
    """Put the translations into the catalog's entries, marked fuzzy; the indices filled."""
    texts: dict[int, dict[str, str]] = {}
    for (i, field), unit in zip(place, translated, strict=True):
        texts.setdefault(i, {})[field] = text_of(unit)
    for i, fields in texts.items():
        entry = catalog[i]
        if entry.msgid_plural:
            n = plural_count(catalog, entry)
            many = fields["msgid_plural"]
            entry.msgstr_plural = {
                k: fields.get("msgid", many) if k == 0 and n > 1 else many for k in range(n)
            }
        else:
            entry.msgstr = fields["msgid"]
        if "fuzzy" not in entry.flags:
            entry.flags.insert(0, "fuzzy")
    return set(texts)


@dataclass
class PoDocument:
    units: list[Unit]
    place: list[tuple[int, str]]
    text: str
    data: bytes
    polib: Any

    def write(self, translated: list[Unit]) -> bytes:
        if not self.place:
            return self.data
        catalog = parsed(self.polib, self.text)
        wrap = WRAP if all(len(line) <= WRAP + 1 for line in string_lines(self.text)) else 0
        catalog.wrapwidth = wrap
        filled = fill(catalog, self.place, translated)
        before = self.text.splitlines()[: start_of(catalog[0], self.text.splitlines())]
        header = header_changes(catalog) if any(s.startswith('msgid ""') for s in before) else {}
        spliced = splice(self.text, catalog, filled, header, wrap)
        if not same_catalog(parsed(self.polib, spliced), catalog):
            spliced = str(catalog)
        return encoded(spliced, like=self.data)


def string_lines(text: str) -> list[str]:
    """The lines of a catalog that hold strings (msgid, msgstr, continuations)."""
    return [line for line in text.splitlines() if _STRING_LINE.match(line)]


def header_changes(catalog: Any) -> dict[str, str]:
    """Header fields to set (also in `catalog.metadata`): Language where it has none, a
    UTF-8 charset where it names another."""
    changes = {}
    if not catalog.metadata.get("Language", "").strip():
        changes["Language"] = "zh_CN"
    kind = catalog.metadata.get("Content-Type", "")
    charset = re.search(r"charset=([^\s;]+)", kind)
    if charset and charset.group(1).lower().replace("-", "") != "utf8":
        changes["Content-Type"] = kind.replace(charset.group(0), "charset=UTF-8")
    catalog.metadata.update(changes)
    return changes


def splice(text: str, catalog: Any, filled: set[int], header: dict[str, str], wrap: int) -> str:
    """`text` with the filled entries written by polib where they stood, and the header's
    changed fields; every other line as it was."""
    lines = text.splitlines(keepends=True)
    newline = "\r\n" if text.count("\r\n") * 2 > text.count("\n") else "\n"
    starts = [start_of(entry, lines) for entry in catalog] + [len(lines)]
    out = header_lines(lines[: starts[0]], header, newline)
    for i in range(len(catalog)):
        block = lines[starts[i] : starts[i + 1]]
        blank = len(block)
        while blank and not block[blank - 1].strip():
            blank -= 1
        if i in filled:
            written = catalog[i].__unicode__(wrap).replace("\n", newline)
            ends = block[blank - 1].endswith(("\n", "\r")) if blank else True
            out.append(written if ends else written.rstrip("\r\n"))
        else:
            out.extend(block[:blank])
        out.extend(block[blank:])
    return "".join(out)


def start_of(entry: Any, lines: list[str]) -> int:
    """The index of an entry's first line (polib numbers lines from 1; the first entry of a
    file without a header has 0: it starts after the blank and "# " lines polib reads as
    the file's header comment)."""
    if entry.linenum:
        return entry.linenum - 1
    for i, line in enumerate(lines):
        first = line.split()[0] if line.strip() else "#"
        if first != "#" and not first.startswith("##"):
            return i
    return 0


def header_lines(lines: list[str], header: dict[str, str], newline: str) -> list[str]:
    """The lines before the first entry, with the header fields in `header` set (a field
    the header has replaced on its line, another added after its last string line)."""
    lines = list(lines)
    strings = [i for i, line in enumerate(lines) if line.lstrip().startswith('"')]
    for name, value in header.items():
        field = f'"{name}: {value}\\n"{newline}'
        have = [i for i in strings if lines[i].lstrip().startswith(f'"{name}:')]
        if have:
            lines[have[0]] = field
        else:
            last = (
                strings[-1]
                if strings
                else next(i for i, line in enumerate(lines) if line.startswith("msgstr"))
            )
            lines.insert(last + 1, field)
            strings = [i + (i > last) for i in strings] + [last + 1]
    return lines


def same_catalog(written: Any, catalog: Any) -> bool:
    """Whether a written catalog reads back as `catalog` (header and entries)."""
    if (written.header, written.metadata) != (catalog.header, catalog.metadata):
        return False
    if len(written) != len(catalog):
        return False
    return all(str(a) == str(b) for a, b in zip(written, catalog, strict=True))


class PoFormat:
    media_type = "text/x-gettext-translation; charset=utf-8"
    extra = "po"

    @classmethod
    def read(cls, data: bytes, retranslate: bool = False) -> PoDocument:
        polib = library("polib", "po", ".po")
        text = decoded(data, "the .po file")
        catalog = parsed(polib, text)
        place = slots(catalog, retranslate)
        units = [runs_of(getattr(catalog[i], field), catalog[i].flags) for i, field in place]
        return PoDocument(units, place, text, data, polib)
