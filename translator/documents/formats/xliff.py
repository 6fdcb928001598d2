"""XLIFF 1.2 (<trans-unit><source>…</source><target>…</target>) and 2.0 (<unit><segment>
<source/><target/></segment>), read with lxml (entity declarations refused, no entity
resolved, nothing fetched): each source without a target, with an empty one, or (1.2)
with state="needs-translation" is one unit; with `retranslate`, every source, targets in
state translated/final/signed-off (1.2) or reviewed/final (2.0) included. Units marked
translate="no" (on them or a group or file around them) are never translated.

Inline elements that wrap text (<g>, <mrk> in 1.2; <pc>, <mrk> in 2.0) are marks: the
target gets the same elements (attributes as written) around the words' translation. Every
other inline element (<x/>, <bx/>, <ex/>, <ph>…</ph>, <bpt>, <ept>, <it>; <ph/>, <sc/>,
<ec/>, <cp/>, <sm/>, <em/>), a protected <mrk> and a comment are copied into the target as
they stand. The target is written after <source> (1.2: after <seg-source> if there is
one), indented as the source is: 1.2 with state="needs-review-translation" (the text
needs review) and state-qualifier="mt-suggestion" (machine translation), 2.0 with its
segment's state="translated" (2.0's only state for a translation not yet reviewed;
"initial" would say there is none, and subState values are tool-defined). target-language
(1.2, each <file> translated into) or trgLang (2.0) is set to zh-CN where absent.

Everything else comes back as lxml writes it, unchanged: the XML declaration, comments and
DOCTYPE before and after the root element and the root's start tag are copied
byte-for-byte (a file not declared UTF-8 is written whole by lxml, in UTF-8 with its
declaration); comments, CDATA, namespaces and \r\n line endings are kept. Not kept
inside the root: lxml writes attribute values in double quotes, namespace declarations
first in a start tag, character references (&#169;, &apos;) as the characters and
<a></a> as <a/>. A segmented <seg-source> is not translated segment by segment: the
target is one translation of <source>.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

from translator.documents.document import BadDocument, Run, Unit, library
from translator.documents.package import check_xml

WRAPPERS = frozenset({"g", "pc", "mrk"})
ASKED_12 = frozenset({"needs-translation"})  # a 1.2 target state that asks for a translation
LANGUAGE = "zh-CN"
_DECLARATION = re.compile(rb"\s*<\?xml[^>]*?encoding=[\"']([^\"']+)")
_MISC = rb"(?:\s|<!--.*?-->|<\?.*?\?>)*"  # what may stand after the root element
_PROLOG = re.compile(
    rb"(?:\xef\xbb\xbf)?(?:\s|<!--.*?-->|<\?.*?\?>|<!DOCTYPE[^\[>]*(?:\[[^\]]*\])?\s*>)*", re.S
)
_EPILOG = re.compile(_MISC, re.S)
_START = re.compile(rb"<[^\s/>]+((?:\s+[^\s=/>]+\s*=\s*(?:\"[^\"]*\"|'[^']*'))*)\s*>")


def local(element: Any) -> str:
    """An element's name without its namespace ("" for a comment or instruction)."""
    return element.tag.rsplit("}", 1)[-1] if isinstance(element.tag, str) else ""


def child(element: Any, name: str) -> Any:
    return next((c for c in element if local(c) == name), None)


def translatable(element: Any) -> bool:
    """Whether no element around (or at) it says translate="no"."""
    return all(e.get("translate") != "no" for e in element.iterancestors()) and (
        element.get("translate") != "no"
    )


def empty(target: Any) -> bool:
    return target is None or (not (target.text or "").strip() and len(target) == 0)


@dataclass
class Segment:
    """A source to translate: its holder (1.2 trans-unit, 2.0 segment), source, target."""

    holder: Any
    source: Any
    target: Any


def segments(root: Any, retranslate: bool) -> list[Segment]:
    """The sources to translate, in document order."""
    version2 = root.get("version", "").startswith("2")
    found = []
    for holder in root.iter():
        if local(holder) != ("segment" if version2 else "trans-unit"):
            continue
        source, target = child(holder, "source"), child(holder, "target")
        if source is None or not translatable(holder) or empty(source):
            continue
        asked = not version2 and target is not None and target.get("state") in ASKED_12
        if retranslate or empty(target) or asked:
            found.append(Segment(holder, source, target))
    return found


def protected(element: Any) -> bool:
    return element.get("mtype") == "protected" or element.get("translate") == "no"


def runs_of(source: Any) -> tuple[Unit, list[Any]]:
    """A source's runs (marks: tuples of (tag, attributes) of the wrappers around the words;
    a kept run's mark: its index in the list of elements kept and the wrappers around it)
    and the elements kept."""
    runs: Unit = []
    kept: list[Any] = []

    def walk(element: Any, marks: tuple) -> None:
        if element.text:
            runs.append(Run(element.text, marks))
        for inner in element:
            if local(inner) in WRAPPERS and not protected(inner):
                walk(inner, (*marks, (inner.tag, tuple(inner.attrib.items()))))
            else:
                kept.append(inner)
                runs.append(Run("", (len(kept) - 1, marks), kept=True))
            if inner.tail:
                runs.append(Run(inner.tail, marks))

    walk(source, ())
    return runs, kept


def fill(target: Any, runs: Unit, kept: list[Any]) -> None:
    """`target`'s content rebuilt from translated runs: wrappers opened around words as
    their marks say, kept elements copied where they stand, inside the wrappers they were
    inside in the source."""
    for inner in list(target):
        target.remove(inner)
    target.text = None
    open_: list[tuple[Any, tuple]] = [(target, ())]
    for run in runs:
        if run.kept:
            index, marks = run.mark
            element = copy.deepcopy(kept[index])
            element.tail = None
            opened(open_, marks).append(element)
        else:
            add_text(opened(open_, run.mark if isinstance(run.mark, tuple) else ()), run.text)


def opened(open_: list[tuple[Any, tuple]], mark: tuple) -> Any:
    """The element to write into for `mark`: the wrappers open (`open_`, (element, mark))
    closed down to a prefix of `mark`, the rest of `mark` opened."""
    while mark[: len(open_[-1][1])] != open_[-1][1]:
        open_.pop()
    for tag, attributes in mark[len(open_[-1][1]) :]:
        parent, marks = open_[-1]
        inner = parent.makeelement(tag, dict(attributes))
        parent.append(inner)
        open_.append((inner, (*marks, (tag, attributes))))
    return open_[-1][0]


def add_text(element: Any, text: str) -> None:
    if len(element):
        element[-1].tail = (element[-1].tail or "") + text
    else:
        element.text = (element.text or "") + text


def indent_before(element: Any) -> str | None:
    """The blank before `element` (its previous sibling's tail or its parent's text)."""
    before = element.getprevious()
    blank = before.tail if before is not None else element.getparent().text
    return blank if blank is not None and not blank.strip() else None


def target_of(segment: Segment, version2: bool) -> Any:
    """The segment's target, made after its source (1.2: after <seg-source>) if absent."""
    if segment.target is not None:
        return segment.target
    anchor = segment.source
    after = anchor.getnext()
    if not version2 and after is not None and local(after) == "seg-source":
        anchor = after
    tag = segment.source.tag
    target = anchor.makeelement(tag[: len(tag) - len("source")] + "target", {})
    target.tail, blank = anchor.tail, indent_before(anchor)
    anchor.addnext(target)
    if blank is not None:
        anchor.tail = blank
    return target


def mark_written(segment: Segment, target: Any, version2: bool) -> None:
    """Say the target is a machine translation to review (the module docstring says how)."""
    if version2:
        segment.holder.set("state", "translated")
        return
    target.set("state", "needs-review-translation")
    target.set("state-qualifier", "mt-suggestion")
    file = next((e for e in segment.holder.iterancestors() if local(e) == "file"), None)
    if file is not None and not file.get("target-language"):
        file.set("target-language", LANGUAGE)


def parsed(etree: Any, data: bytes) -> Any:
    """The root element of `data`, an XLIFF document; BadDocument otherwise."""
    check_xml(data, "the .xliff file")
    parser = etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        remove_blank_text=False,
        huge_tree=False,
        strip_cdata=False,
        load_dtd=False,
    )
    try:
        root = etree.fromstring(data, parser)
    except (etree.XMLSyntaxError, ValueError) as exc:
        reason = " ".join(str(exc).split())[:200]
        raise BadDocument(f"the .xliff file is not well-formed XML: {reason}") from None
    if local(root) != "xliff":
        raise BadDocument(f"the .xliff file is not XLIFF: its root is <{local(root) or '?'}>")
    return root


def serialized(etree: Any, root: Any, data: bytes, added: bytes = b"") -> bytes:
    """The document: in UTF-8, what stands before and after the root element and its start
    tag (with `added` attributes) as they were in `data`, the rest of the root as lxml
    writes it; otherwise all of it as lxml writes it."""
    body = etree.tostring(root, encoding="UTF-8", xml_declaration=False, with_tail=False)
    if b"\r\n" in data and data.count(b"\n") == data.count(b"\r\n"):
        body = body.replace(b"\n", b"\r\n")  # the parser read each \r\n as \n
    declared = _DECLARATION.match(data)
    if declared and declared.group(1).lower().replace(b"-", b"") != b"utf8":
        return etree.tostring(root.getroottree(), encoding="UTF-8", xml_declaration=True)
    name = ((f"{root.prefix}:" if root.prefix else "") + local(root)).encode()
    prolog = _PROLOG.match(data)
    end = data.rfind(b"</" + name)
    close = data.find(b">", end) + 1 if end >= 0 else 0
    if (
        data[prolog.end() : prolog.end() + len(name) + 1] == b"<" + name
        and close
        and _EPILOG.fullmatch(data, close)
    ):
        return data[: prolog.end()] + start_tag(data, prolog.end(), body, added) + data[close:]
    return etree.tostring(root.getroottree(), encoding="UTF-8", xml_declaration=True)


def start_tag(data: bytes, at: int, body: bytes, added: bytes) -> bytes:
    """`body` (the root as lxml writes it) with the root's start tag as written at `at` in
    `data` (lxml writes namespace declarations first), `added` attributes at its end."""
    old, new = _START.match(data, at), _START.match(body)
    if not old or not new:
        return body
    return data[at : old.end(1)] + added + data[old.end(1) : old.end()] + body[new.end() :]


@dataclass
class XliffDocument:
    units: list[Unit]
    data: bytes
    retranslate: bool
    etree: Any

    def write(self, translated: list[Unit]) -> bytes:
        if not self.units:
            return self.data
        root = parsed(self.etree, self.data)
        version2 = root.get("version", "").startswith("2")
        found = segments(root, self.retranslate)
        for segment, runs in zip(found, translated, strict=True):
            _, kept = runs_of(segment.source)
            target = target_of(segment, version2)
            fill(target, runs, kept)
            mark_written(segment, target, version2)
        added = b""
        if version2 and not root.get("trgLang"):
            root.set("trgLang", LANGUAGE)
            added = f' trgLang="{LANGUAGE}"'.encode()
        return serialized(self.etree, root, self.data, added)


class XliffFormat:
    media_type = "application/xliff+xml"
    extra = "xliff"

    @classmethod
    def read(cls, data: bytes, retranslate: bool = False) -> XliffDocument:
        etree = library("lxml.etree", "xliff", ".xliff")
        root = parsed(etree, data)
        units = [runs_of(segment.source)[0] for segment in segments(root, retranslate)]
        return XliffDocument(units, data, retranslate, etree)
