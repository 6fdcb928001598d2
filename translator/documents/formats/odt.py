"""OpenDocument text (.odt), read and written with odfpy.

Units: every text:p and text:h of the document body (table cells, list items, frames and
text boxes, footnotes, comments, tracked deletions, the table of contents included) and of
the page headers and footers (styles.xml's master pages, odfpy's `doc.masterstyles`), in
document order. Not translated: embedded objects (a chart's titles), the words inside a
kept element that holds no paragraph (a field's shown value, a content control, ruby).

Inline: text in text:span and text:a (its style name, its xlink:href, every attribute) is
marked with the open spans and links around it, nested ones included; they are written back
around the translation of their words. text:s (a run of spaces) is read as its spaces and the
spaces of a translation are written as text:s where ODF would collapse them. Everything else
inside a paragraph (text:tab, text:line-break, draw:frame, text:note, office:annotation,
bookmarks, reference marks, fields, text:soft-page-break, an empty span) is a kept run: the
same element put back, its own paragraphs (a text box's, a note's) translated as units.
A paragraph with nothing to translate is not rewritten.

Written: odfpy serializes content.xml (and styles.xml where a header or footer changed), as
its save does; every other member of the zip (meta.xml, settings.xml, the manifest,
pictures, embedded objects, macros, thumbnails) is copied as it was, in its order, with its
compression. Not kept: the document's digital signature (META-INF/documentsignatures.xml,
which the translation voids); what odfpy's serialization changes in content.xml:
office:version is written as 1.2, the font declarations are styles.xml's, and automatic
styles nothing refers to are dropped.
odfpy's own save is not used for the zip: it drops members its manifest does not list and
embedded objects' pictures, and rewrites meta.xml (its generator), the manifest and objects.
"""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass
from typing import Any
from xml.sax import SAXException, handler

from translator.documents.document import BadDocument, Run, Unit, library
from translator.documents.package import check_xml, checked_zip, repacked

WHAT = "the .odt file"
TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
PARAGRAPHS = {(TEXT, "p"), (TEXT, "h")}
INLINE = {(TEXT, "span"), (TEXT, "a")}
SPACE, TAB, BREAK = (TEXT, "s"), (TEXT, "tab"), (TEXT, "line-break")
ELEMENT, TEXT_NODE = 1, 3  # xml.dom node types, as odfpy's nodes carry them
MAX_DEPTH = 200  # odfpy writes recursively: a document nested deeper is refused
SIGNATURES = "META-INF/documentsignatures.xml"
PARTS = {"content.xml", "styles.xml", "meta.xml", "settings.xml"}  # the XML odfpy parses
_BLANKS = re.compile(r"[ \t\r\n]+")

Identity = tuple  # (qname, attributes): an inline element as a mark holds it


@dataclass
class OdtDocument:
    units: list[Unit]
    paragraphs: list[Any]  # odfpy elements, one a unit
    in_styles: int  # the index of the first unit of styles.xml (headers and footers)
    kept: list[tuple[Any, tuple[Identity, ...]]]  # a kept run's element, the inline around it
    doc: Any
    data: bytes

    def write(self, translated: list[Unit]) -> bytes:
        changed = set()
        for i, (unit, new) in enumerate(zip(self.units, translated, strict=True)):
            if new != unit:
                rewrite(self.paragraphs[i], new, self.kept)
                changed.add("styles.xml" if i >= self.in_styles else "content.xml")
        if not changed:
            return self.data
        parts = {"content.xml": self.doc.contentxml, "styles.xml": self.doc.stylesxml}
        replaced = {name: as_bytes(parts[name]()) for name in changed}
        return repacked(self.data, replaced, left_out=(SIGNATURES,))


class OdtFormat:
    media_type = "application/vnd.oasis.opendocument.text"
    extra = "odt"

    @classmethod
    def read(cls, data: bytes, retranslate: bool = False) -> OdtDocument:
        checked_zip(data, WHAT)
        opendocument = library("odf.opendocument", "odt", ".odt")
        check_parts(data)
        doc = opendocument.load(io.BytesIO(data))  # what odfpy raises: one line (conversion)
        if not doc.body.childNodes:
            raise BadDocument(f"{WHAT} has no document body (content.xml)")
        body = paragraphs(doc.body)
        both = body + paragraphs(doc.masterstyles)
        kept: list[tuple[Any, tuple[Identity, ...]]] = []
        return OdtDocument([unit_of(p, kept) for p in both], both, len(body), kept, doc, data)


def check_parts(data: bytes) -> None:
    """Refuse what odfpy would read wrong (it prints a part it cannot parse and goes on): a
    missing content.xml, an encrypted document, a part (an embedded object's too) that is not
    well-formed XML."""
    from defusedxml.sax import make_parser  # odfpy's own dependency, its parser

    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        names = set(archive.namelist())
        if "content.xml" not in names or "META-INF/manifest.xml" not in names:
            raise BadDocument(f"{WHAT} has no content.xml or manifest: not an OpenDocument file")
        if b"encryption-data" in archive.read("META-INF/manifest.xml"):
            raise BadDocument(f"{WHAT} is password-protected: save it without a password")
        for name in sorted(names):
            if name.rsplit("/", 1)[-1] not in PARTS:
                continue
            part = archive.read(name)
            check_xml(part, f"{WHAT}: {name}")
            parser = make_parser()
            parser.setFeature(handler.feature_namespaces, 1)
            parser.setContentHandler(handler.ContentHandler())
            try:
                parser.parse(io.BytesIO(part))
            except (SAXException, ValueError) as exc:
                raise BadDocument(f"{WHAT}: {name} is not well-formed XML ({exc})") from None


def paragraphs(top: Any) -> list[Any]:
    """Every text:p and text:h under `top`, in document order (nested ones too)."""
    found: list[Any] = []
    stack = [iter(top.childNodes)]
    while stack:
        for node in stack[-1]:
            if node.nodeType != ELEMENT:
                continue
            if node.qname in PARAGRAPHS:
                found.append(node)
            if node.childNodes:
                if len(stack) >= MAX_DEPTH:
                    raise BadDocument(f"{WHAT} nests elements deeper than {MAX_DEPTH}")
                stack.append(iter(node.childNodes))
                break
        else:
            stack.pop()
    return found


def identity(node: Any) -> Identity:
    return (node.qname, tuple(sorted(node.attributes.items())))


def unit_of(paragraph: Any, kept: list) -> Unit:
    """A paragraph's runs: text marked with the spans and links open around it, a kept run
    for each other element (its index into `kept` its mark)."""
    runs: Unit = []
    after_space = True  # ODF drops a space at a paragraph's start or after another
    stack: list[tuple[Any, tuple[Identity, ...]]] = [(iter(paragraph.childNodes), ())]
    while stack:
        nodes, chain = stack[-1]
        for node in nodes:
            if node.nodeType == TEXT_NODE:
                text = _BLANKS.sub(" ", node.data)
                if after_space:
                    text = text.lstrip(" ")
                if text:
                    runs.append(Run(text, chain))
                    after_space = text.endswith(" ")
            elif node.nodeType != ELEMENT:
                continue
            elif node.qname in INLINE and node.childNodes:
                stack.append((iter(node.childNodes), (*chain, identity(node))))
                break
            elif node.qname == SPACE:
                runs.append(Run(" " * spaces(node), chain))
                after_space = True
            else:
                kept.append((node, chain))
                runs.append(Run(literal(node), len(kept) - 1, kept=True))
                after_space = False
        else:
            stack.pop()
    return merged(runs)


def spaces(node: Any) -> int:
    count = node.attributes.get((TEXT, "c"), "1")
    return max(1, min(int(count), 1000)) if count.isdigit() else 1


def literal(node: Any) -> str:
    """A kept element's text as written: a tab, a line break, a field's shown value; ""
    for the paragraphs inside it (a note's, a frame's), which are units of their own."""
    if node.qname == TAB:
        return "\t"
    if node.qname == BREAK:
        return "\n"
    parts, stack = [], [iter(node.childNodes)]
    while stack:
        for child in stack[-1]:
            if child.nodeType == TEXT_NODE:
                parts.append(child.data)
            elif child.nodeType == ELEMENT and child.qname not in PARAGRAPHS:
                stack.append(iter(child.childNodes))
                break
        else:
            stack.pop()
    return "".join(parts)


def merged(runs: Unit) -> Unit:
    """Adjacent text runs of one mark as one."""
    out: Unit = []
    for run in runs:
        if out and not run.kept and not out[-1].kept and out[-1].mark == run.mark:
            out[-1] = Run(out[-1].text + run.text, run.mark)
        else:
            out.append(run)
    return out


def rewrite(paragraph: Any, runs: Unit, kept: list) -> None:
    """The paragraph's content replaced by `runs`: text inside the spans and links of its
    mark, each kept element put back (inside the spans it was in)."""
    from odf.element import Element

    for child in paragraph.childNodes:
        child.parentNode = child.previousSibling = child.nextSibling = None
    paragraph.childNodes = []
    stack: list[tuple[Any, Identity | None]] = [(paragraph, None)]
    out = Spaces()
    for run in runs:
        node, chain = kept[run.mark] if run.kept else (None, run.mark)
        same = 0
        while same < min(len(chain), len(stack) - 1) and stack[same + 1][1] == chain[same]:
            same += 1
        del stack[same + 1 :]
        for qname, attributes in chain[same:]:
            element = Element(qname=qname, check_grammar=False)
            element.attributes = dict(attributes)
            out.element(stack[-1][0], element)
            stack.append((element, (qname, attributes)))
        if node is not None:
            node.parentNode = node.previousSibling = node.nextSibling = None
            out.element(stack[-1][0], node, inline=False)
        else:
            out.text(stack[-1][0], run.text)


class Spaces:
    """Text written into a paragraph as ODF keeps it: a space where ODF would collapse it (at
    the paragraph's start, after another space, after an element) as text:s, a tab as
    text:tab, a line break as text:line-break."""

    def __init__(self) -> None:
        self.literal = False  # whether a literal space may come next

    def element(self, parent: Any, node: Any, inline: bool = True) -> None:
        parent.appendChild(node)
        self.literal = self.literal and inline  # a span goes on with the text before it

    def text(self, parent: Any, text: str) -> None:
        from odf.element import Element, Text

        for piece in re.split(r"( +|\t|\n)", re.sub(r"[\r\f\v]", " ", text)):
            if not piece:
                continue
            if piece in ("\t", "\n"):
                parent.appendChild(
                    Element(qname=TAB if piece == "\t" else BREAK, check_grammar=False)
                )
                self.literal = False
            elif piece[0] == " ":
                count = len(piece)
                if self.literal:
                    parent.appendChild(Text(" "))
                    count -= 1
                if count:
                    space = Element(qname=SPACE, check_grammar=False)
                    if count > 1:
                        space.attributes[(TEXT, "c")] = str(count)
                    parent.appendChild(space)
                self.literal = False
            else:
                parent.appendChild(Text(piece))
                self.literal = True


def as_bytes(xml: str | bytes) -> bytes:
    return xml.encode("utf-8") if isinstance(xml, str) else xml
