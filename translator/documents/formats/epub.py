"""EPUB (.epub): ebooklib reads the book and names its XHTML documents (ITEM_DOCUMENT, the
EPUB 3 navigation document among them) and its NCX; each is parsed here with lxml.

Units: in each XHTML document, the inline content of its blocks: p, h1-h6, li, td, th, dt,
dd, figcaption, caption and title always, and any other block (div, blockquote, section,
body, …) whose own text is not blank; a block inside another is a unit of its own and a
kept run of the outer one. In the NCX, each navPoint's label (the table of contents'
titles, translated as the headings and the navigation document's titles are); its docTitle
and docAuthor are left as the package metadata (content.opf) is: untranslated.

Inline: text inside b, i, em, strong, a, span, sub, sup, u, small, … is marked with the
(tag, attributes) of each one open around it and written back inside the same elements.
Kept runs (put back as they stand): code, kbd, samp, var, img, br, svg, math, ruby, an empty
inline element (an anchor <a id=…/>), comments, a nested block. Not entered: script, style,
pre, and elements in other namespaces (SVG, MathML, epub:switch).

Written: only the XHTML and NCX members with a translated unit are serialized again by
lxml (each's XML declaration, doctype, namespaces and attributes kept; a document that is
not well-formed XML, read with lxml.html, is written back as well-formed XHTML); every other
member (content.opf, CSS, fonts, images, scripts, META-INF) is copied as it was, in its
order, with its compression. ebooklib's write_epub is not used: it rebuilds every chapter
from a template (dropping its <head>: title, stylesheet links), rewrites content.opf and
the navigation, and cannot write most books it read back.
"""

from __future__ import annotations

import io
import posixpath
import re
import zipfile
from dataclasses import dataclass
from html.entities import name2codepoint
from typing import Any

from translator.documents.document import BadDocument, Run, Unit, library, one_line
from translator.documents.package import check_xml, checked_zip, repacked

WHAT = "the .epub file"
XHTML = "http://www.w3.org/1999/xhtml"
NCX = "http://www.daisy.org/z3986/2005/ncx/"
ENCRYPTION = "META-INF/encryption.xml"  # DRM lists the members it encrypts here
HEADINGS = {f"h{n}" for n in range(1, 7)}
ALWAYS = {"p", "li", "td", "th", "dt", "dd", "figcaption", "caption", "title"} | HEADINGS
INLINE = {"a", "abbr", "b", "bdi", "bdo", "big", "cite", "data", "del", "dfn", "em", "font"}
INLINE |= {"i", "ins", "label", "mark", "q", "s", "small", "span", "strike", "strong"}
INLINE |= {"sub", "sup", "time", "tt", "u"}
SKIPPED = {"script", "style", "pre", "code", "kbd", "samp", "var", "img", "br", "wbr", "hr"}
SKIPPED |= {"svg", "math", "ruby", "input", "button", "select", "textarea", "object", "embed"}
SKIPPED |= {"iframe", "video", "audio", "canvas", "picture", "map", "noscript", "template"}
SKIPPED |= {"meta", "link", "base"}
SKIP, INLINE_KIND, BLOCK = "skip", "inline", "block"
_NAMED = re.compile(rb"&([A-Za-z][A-Za-z0-9]{1,31});")

Chain = tuple  # the (tag, attributes) of each inline element open around a text


@dataclass
class Member:
    name: str
    raw: bytes
    tree: Any  # lxml ElementTree
    xml: bool  # parsed as XML (else lxml.html: written back as XHTML)


@dataclass
class EpubDocument:
    units: list[Unit]
    blocks: list[tuple[int, Any]]  # (member index, element) of each unit
    members: list[Member]
    kept: list[tuple[Any, Chain]]  # a kept run's element, the inline elements around it
    data: bytes

    def write(self, translated: list[Unit]) -> bytes:
        changed: set[int] = set()
        for (member, block), unit, new in zip(self.blocks, self.units, translated, strict=True):
            if new != unit:
                rebuild(block, new, self.kept)
                changed.add(member)
        if not changed:
            return self.data
        replaced = {self.members[i].name: serialized(self.members[i]) for i in changed}
        return repacked(self.data, replaced)


class EpubFormat:
    media_type = "application/epub+zip"
    extra = "epub"

    @classmethod
    def read(cls, data: bytes, retranslate: bool = False) -> EpubDocument:
        checked_zip(data, WHAT)
        members = [m for m in map(parsed, documents(data)) if m is not None]
        units, blocks, kept = [], [], []
        for index, member in enumerate(members):
            for block, runs in units_of(member, kept):
                units.append(runs)
                blocks.append((index, block))
        return EpubDocument(units, blocks, members, kept, data)


def documents(data: bytes) -> list[tuple[str, bytes]]:
    """The book's XHTML documents and NCX as ebooklib finds them: (zip member, bytes)."""
    ebooklib = library("ebooklib", "epub", ".epub")
    epub = library("ebooklib.epub", "epub", ".epub")
    try:
        reader = epub.EpubReader(io.BytesIO(data), {"ignore_ncx": True})
        book = reader.load()
    except Exception as exc:  # ebooklib raises whatever a missing or broken part raises
        raise BadDocument(f"{WHAT} cannot be read as an EPUB book: {one_line(exc)}") from None
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        names = set(archive.namelist())
        sealed = archive.read(ENCRYPTION) if ENCRYPTION in names else b""
        found: dict[str, bytes] = {}
        for item in book.get_items():
            if item.get_type() != ebooklib.ITEM_DOCUMENT and not isinstance(item, epub.EpubNcx):
                continue
            name = posixpath.normpath(posixpath.join(reader.opf_dir, item.file_name))
            if name in names and name not in found:
                if name.encode() in sealed:
                    raise BadDocument(f"{WHAT} is encrypted (DRM): {name} cannot be read")
                found[name] = archive.read(name)
    return list(found.items())


def parsed(named: tuple[str, bytes]) -> Member | None:
    """A member parsed as XML (HTML's named entities, such as &nbsp;, read as the characters
    they name), else, not well-formed, as HTML; None where neither can."""
    from lxml import etree, html

    name, raw = named
    check_xml(raw, f"{WHAT}: {name}")
    for text in (raw, _NAMED.sub(numbered, raw)):
        parser = etree.XMLParser(
            resolve_entities=False, no_network=True, load_dtd=False, strip_cdata=False
        )
        try:
            return Member(name, raw, etree.fromstring(text, parser).getroottree(), True)
        except etree.XMLSyntaxError:
            continue
    if name.lower().endswith(".ncx"):
        return None
    try:
        root = html.document_fromstring(raw, parser=html.HTMLParser(no_network=True))
    except (etree.ParserError, ValueError):
        return None  # left as it is
    return Member(name, raw, root.getroottree(), False)


def numbered(match: re.Match) -> bytes:
    """An HTML named character reference as a numbered one (XML knows only five names)."""
    point = name2codepoint.get(match.group(1).decode("ascii"))
    return f"&#{point};".encode("ascii") if point else match.group(0)


def units_of(member: Member, kept: list) -> list[tuple[Any, Unit]]:
    """A member's units: (block, runs) for each NCX label, or for each block of an XHTML
    document that is always a unit or has text of its own."""
    root = member.tree.getroot()
    if member.name.lower().endswith(".ncx"):
        return [(label, content(label, kept)) for label in ncx_labels(root)]
    found = []
    for block in candidates(root):
        before = len(kept)
        runs = content(block, kept)
        if local(block) in ALWAYS or has_text(runs):
            found.append((block, runs))
        else:
            del kept[before:]  # not a unit: nothing of it kept
    return found


def local(element: Any) -> str:
    tag = element.tag
    return tag[tag.find("}") + 1 :].lower() if isinstance(tag, str) else ""


def kind(element: Any) -> str:
    tag = element.tag
    if not isinstance(tag, str) or (tag.startswith("{") and not tag.startswith(f"{{{XHTML}}}")):
        return SKIP  # a comment, a processing instruction, SVG, MathML, epub:switch
    name = local(element)
    return SKIP if name in SKIPPED else INLINE_KIND if name in INLINE else BLOCK


def candidates(root: Any) -> list[Any]:
    """The blocks of a document, in document order (a block inside another after it)."""
    found, stack = [], [root]
    while stack:
        element = stack.pop()
        what = kind(element)
        if what == SKIP:
            continue
        if what == BLOCK:
            found.append(element)
        stack.extend(reversed(element))
    return found


def ncx_labels(root: Any) -> list[Any]:
    """The NCX's table of contents titles: each navPoint's navLabel/text."""
    path = f"{{{NCX}}}navMap//{{{NCX}}}navPoint/{{{NCX}}}navLabel/{{{NCX}}}text"
    return root.findall(path) if root.tag == f"{{{NCX}}}ncx" else []


def has_text(runs: Unit) -> bool:
    return any(not run.kept and run.text.strip() for run in runs)


def content(block: Any, kept: list) -> Unit:
    """A block's runs: its text marked with the inline elements open around it, a kept run
    (its index into `kept` its mark) for each other element, comment and nested block."""
    runs: Unit = []
    add(runs, block.text, ())
    stack: list[tuple[Any, Chain, tuple[str | None, Chain] | None]] = [(iter(block), (), None)]
    while stack:
        children, chain, after = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            if after:
                add(runs, *after)
            continue
        if kind(child) == INLINE_KIND and (child.text or len(child)):
            mark = (*chain, (child.tag, tuple(child.attrib.items())))
            add(runs, child.text, mark)
            stack.append((iter(child), mark, (child.tail, chain)))
            continue
        kept.append((child, chain))
        runs.append(Run(literal(child), len(kept) - 1, kept=True))
        add(runs, child.tail, chain)
    return runs


def add(runs: Unit, text: str | None, mark: Chain) -> None:
    """`text` at the end of `runs`: with the last run where it has the same mark."""
    if not text:
        return
    if runs and not runs[-1].kept and runs[-1].mark == mark:
        runs[-1] = Run(runs[-1].text + text, mark)
    else:
        runs.append(Run(text, mark))


def literal(element: Any) -> str:
    """A kept element's text as written (code's, a line break's); "" for a nested block,
    whose text is a unit of its own."""
    if local(element) == "br":
        return "\n"
    if kind(element) == SKIP and isinstance(element.tag, str):
        return "".join(element.itertext())
    return ""


def rebuild(block: Any, runs: Unit, kept: list) -> None:
    """The block's content replaced by `runs`: text inside the inline elements of its mark,
    each kept element put back (inside the inline elements it was in)."""
    block.text = None
    del block[:]
    stack: list[tuple[Any, Any]] = [(block, None)]
    for run in runs:
        node, chain = kept[run.mark] if run.kept else (None, run.mark)
        same = 0
        while same < min(len(chain), len(stack) - 1) and stack[same + 1][1] == chain[same]:
            same += 1
        del stack[same + 1 :]
        for tag, attributes in chain[same:]:
            element = block.makeelement(tag, dict(attributes))
            stack[-1][0].append(element)
            stack.append((element, (tag, attributes)))
        parent = stack[-1][0]
        if node is not None:
            node.tail = None
            parent.append(node)
        elif run.text and len(parent):
            parent[-1].tail = (parent[-1].tail or "") + run.text
        elif run.text:
            parent.text = (parent.text or "") + run.text


def serialized(member: Member) -> bytes:
    """A member's tree as XML: its encoding, XML declaration and doctype as they were."""
    from lxml import etree

    if member.xml:
        encoding = member.tree.docinfo.encoding or "utf-8"
        declared = member.raw.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"<?xml")
        utf8 = encoding.lower().replace("-", "") == "utf8"
        return etree.tostring(member.tree, encoding=encoding, xml_declaration=declared or not utf8)
    head = member.raw[:2048].lower()
    doctype = member.tree.docinfo.doctype if b"<!doctype" in head else None
    root = member.tree.getroot()
    return etree.tostring(root, encoding="utf-8", xml_declaration=True, doctype=doctype or None)
