"""Word documents (.docx), read with python-docx, rewritten at the XML level of each paragraph.

Units: every paragraph (w:p) of the body (tables and nested tables, content controls, text
boxes: the w:txbxContent of a drawing and of its VML fallback alike), of every header and
footer part (first-page and even-page ones too), and of the footnotes and endnotes.

A run's mark is its w:rPr (a key of its elements and attributes) and the containers it
stands in (a w:hyperlink, with its r:id or w:anchor; w:ins, w:smartTag, w:sdt, w:customXml,
w:dir, w:bdo): translated text goes back in a run cloned from the first run of its mark,
inside (a clone of) its containers. Kept as they stand, each a kept run at its place:
drawings, pictures, objects, breaks, tabs, symbols, footnote and comment references,
bookmarks, comment ranges, deleted text (w:del), math, simple fields, and each complex field
(fldChar begin … end, within one paragraph) whole, its displayed result untranslated. Kept
things side by side make one kept run. Dropped from a rewritten paragraph: w:proofErr
(spelling marks), w:lastRenderedPageBreak (a layout cache), w:softHyphen (a hyphenation
hint) and empty runs. Not translated: comments, charts, SmartArt, fields' results.

Only the parts holding a changed paragraph are serialized again; every other member of the
zip (styles, numbering, images, embeddings, macros, custom XML, parts python-docx does not
know, even ones no relationship names) is copied from the input byte for byte.
"""

from __future__ import annotations

import copy
import io
import re
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from translator.documents.document import BadDocument, Run, Unit, library
from translator.documents.package import checked_zip, repacked

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
_XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"
_RELS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/"
_STORIES = ("header", "footer", "footnotes", "endnotes")  # parts translated beside the body
_CONTAINERS = {_W + n for n in ("hyperlink", "ins", "moveTo", "smartTag", "customXml", "dir")}
_CONTAINERS |= {_W + "bdo", _W + "sdt"}
_DROPPED = {_W + n for n in ("proofErr", "lastRenderedPageBreak", "softHyphen")}
_LITERAL = {_W + "tab": "\t", _W + "br": "\n", _W + "cr": "\n"}
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: str) -> str:
    """`text` without the characters XML 1.0 cannot hold."""
    return _NOT_XML.sub("", text)


def properties_key(element: Any, ignored: frozenset[str] = frozenset()) -> tuple:
    """Run properties (w:rPr, a:rPr) as a hashable key: equal where they are written alike
    (the attributes in `ignored` aside), as their serialization would be, only smaller."""
    attributes = tuple(sorted(i for i in element.attrib.items() if i[0] not in ignored))
    text = (element.text or "").strip()
    children = tuple(properties_key(child) for child in element if isinstance(child.tag, str))
    return (element.tag, attributes, text, children)


def is_props(element: Any) -> bool:
    """A properties child (w:pPr, w:smartTagPr, w:sdtPr…): left where it stands."""
    return isinstance(element.tag, str) and element.tag.endswith("Pr")


def slot_of(container: Any) -> Any:
    """Where a container's runs stand: a content control's w:sdtContent, else itself."""
    if container.tag == _W + "sdt":
        content = container.find(_W + "sdtContent")
        if content is None:
            content = container.makeelement(_W + "sdtContent", {})
            container.append(content)
        return content
    return container


def clear(slot: Any) -> None:
    for child in list(slot):
        if not is_props(child):
            slot.remove(child)


@dataclass
class Paragraph:
    """One w:p as a unit: its kept groups (path, items), the run each mark's text is cloned
    from, and its containers (a path is the indexes of the containers a run stands in)."""

    element: Any
    story: int
    kept: list[tuple[tuple[int, ...], list[Any]]] = field(default_factory=list)
    templates: dict[Hashable, Any] = field(default_factory=dict)
    containers: list[Any] = field(default_factory=list)


class _Reader:
    """A paragraph's children in order as runs: text with its mark, the rest kept."""

    def __init__(self, paragraph: Paragraph, depth: int = 0):
        self.paragraph = paragraph
        self.runs: Unit = []
        self.depth = depth  # complex fields open (one may span paragraphs: a TOC)

    def children(self, slot: Any, path: tuple[int, ...]) -> None:
        for child in slot:
            if is_props(child) or (child.tag in _DROPPED and self.depth == 0):
                continue
            if child.tag == _W + "r":
                self.run(child, path)
            elif child.tag in _CONTAINERS and self.depth == 0:
                self.paragraph.containers.append(child)
                self.children(slot_of(child), (*path, len(self.paragraph.containers) - 1))
            else:
                self.keep(path, child, "")

    def run(self, r: Any, path: tuple[int, ...]) -> None:
        parts = [(child, self.literal(child)) for child in r if not is_props(child)]
        if all(text is None for _, text in parts):
            return  # an empty run, or one holding only what is dropped
        if all(text is None or text[0] == "kept" for _, text in parts):
            self.keep(path, r, "".join(text[1] for _, text in parts if text))
            return
        rpr = r.find(_W + "rPr")
        mark = (properties_key(rpr) if rpr is not None else (), path)
        for child, text in parts:
            if text and text[0] == "text":
                self.text(text[1], mark, r)
            elif text:
                self.keep(path, (r, child), text[1])

    def literal(self, child: Any) -> tuple[str, str] | None:
        """("text", words), ("kept", its literal text), or None where it is dropped."""
        if child.tag == _W + "fldChar":
            kind = child.get(_W + "fldCharType")
            self.depth = self.depth + 1 if kind == "begin" else self.depth
            self.depth = max(self.depth - 1, 0) if kind == "end" else self.depth
            return ("kept", "")
        if self.depth:
            return ("kept", (child.text or "") if child.tag == _W + "t" else "")
        if child.tag in _DROPPED:
            return None
        if child.tag == _W + "t":
            return ("text", child.text or "")
        return ("kept", _LITERAL.get(child.tag) or "")

    def text(self, text: str, mark: Hashable, r: Any) -> None:
        if not text:
            return
        self.paragraph.templates.setdefault(mark, r)
        last = self.runs[-1] if self.runs else None
        if last is not None and not last.kept and last.mark == mark:
            self.runs[-1] = Run(last.text + text, mark)
        else:
            self.runs.append(Run(text, mark))

    def keep(self, path: tuple[int, ...], item: Any, literal: str) -> None:
        """`item` (an element, or (run, child) for a child of a run holding text too) joins
        the kept run just before it where nothing stands between them."""
        kept = self.paragraph.kept
        last = self.runs[-1] if self.runs else None
        if last is not None and last.kept and kept[-1][0] == path:
            kept[-1][1].append(item)
            self.runs[-1] = Run(last.text + literal, last.mark, kept=True)
        else:
            kept.append((path, [item]))
            self.runs.append(Run(literal, len(kept) - 1, kept=True))


def read_paragraph(element: Any, story: int, depth: int = 0) -> tuple[Unit, Paragraph, int]:
    """A paragraph's unit, and the complex fields still open at its end (`depth`: those open
    at its start)."""
    paragraph = Paragraph(element, story)
    reader = _Reader(paragraph, depth)
    reader.children(element, ())
    return reader.runs, paragraph, reader.depth


def text_run(template: Any, text: str) -> Any:
    """A w:r with `template`'s properties holding `text`."""
    r = template.makeelement(template.tag, dict(template.attrib))
    rpr = template.find(_W + "rPr")
    if rpr is not None:
        r.append(copy.deepcopy(rpr))
    t = r.makeelement(_W + "t", {_XML_SPACE: "preserve"})
    t.text = xml_text(text)
    r.append(t)
    return r


def kept_element(item: Any) -> Any:
    """A kept item as the element to insert: itself, or its run's child in a run like it."""
    if not isinstance(item, tuple):
        return item
    template, child = item
    r = template.makeelement(template.tag, dict(template.attrib))
    rpr = template.find(_W + "rPr")
    if rpr is not None:
        r.append(copy.deepcopy(rpr))
    r.append(child)
    return r


def rebuild(paragraph: Paragraph, unit: Unit) -> None:
    """The paragraph's runs replaced by `unit`'s, in its order; kept runs it lacks at its end."""
    sequence: list[tuple[tuple[int, ...], Any]] = []
    placed = set()
    for run in unit:
        if run.kept:
            placed.add(run.mark)
            path, items = paragraph.kept[run.mark]
            sequence += [(path, kept_element(item)) for item in items]
        else:
            sequence.append((run.mark[1], text_run(paragraph.templates[run.mark], run.text)))
    for index, (path, items) in enumerate(paragraph.kept):
        if index not in placed:
            sequence += [(path, kept_element(item)) for item in items]
    clear(paragraph.element)
    for container in paragraph.containers:
        clear(slot_of(container))
    blanks = [copy.deepcopy(container) for container in paragraph.containers]
    place(paragraph.element, sequence, 0, paragraph.containers, blanks)


def place(parent: Any, sequence: list, depth: int, containers: list, blanks: list) -> None:
    """Append each element of `sequence` to `parent`, those in a container inside it: the
    original the first time, a clone of it (emptied) after."""
    i = 0
    while i < len(sequence):
        path, element = sequence[i]
        if len(path) <= depth:
            parent.append(element)
            i += 1
            continue
        j = i + 1
        while j < len(sequence) and sequence[j][0][depth : depth + 1] == path[depth : depth + 1]:
            j += 1
        index = path[depth]
        container = containers[index]
        if container.getparent() is not None:  # placed already: a clone of it
            container = copy.deepcopy(blanks[index])
        parent.append(container)
        place(slot_of(container), sequence[i:j], depth + 1, containers, blanks)
        i = j


@dataclass
class Story:
    """A part whose paragraphs are units: its zip member, its XML, how it is written."""

    member: str
    root: Any
    part: Any
    generic: bool  # a part python-docx keeps as bytes: parsed and serialized here

    def blob(self) -> bytes:
        if not self.generic:
            return self.part.blob
        from lxml import etree

        return etree.tostring(self.root, xml_declaration=True, encoding="UTF-8", standalone=True)


@dataclass
class DocxDocument:
    units: list[Unit]
    paragraphs: list[Paragraph]
    stories: list[Story]
    data: bytes

    def write(self, translated: list[Unit]) -> bytes:
        changed = set()
        for unit, old, paragraph in zip(translated, self.units, self.paragraphs, strict=True):
            if unit != old:
                rebuild(paragraph, unit)
                changed.add(paragraph.story)
        return repacked(
            self.data, {self.stories[i].member: self.stories[i].blob() for i in changed}
        )


def stories(document: Any) -> list[Story]:
    """The body's part, then each header, footer, footnotes and endnotes part it relates."""
    from lxml import etree

    main = document.part
    found = [Story(main.partname.lstrip("/"), main.element, main, False)]
    seen = {main.partname}
    parser = etree.XMLParser(resolve_entities=False, no_network=True, remove_blank_text=False)
    for rel in main.rels.values():
        if rel.is_external or rel.reltype.removeprefix(_RELS) not in _STORIES:
            continue
        part = rel.target_part
        if part.partname in seen:
            continue
        seen.add(part.partname)
        element = getattr(part, "element", None)
        generic = element is None  # python-docx keeps footnotes and endnotes as bytes
        if generic:
            element = etree.fromstring(part.blob, parser)
        found.append(Story(part.partname.lstrip("/"), element, part, generic))
    return found


def opened(data: bytes) -> Any:
    docx = library("docx", "docx", ".docx")
    checked_zip(data, "the .docx file")
    try:  # any other error of the library's is one line in conversion.read
        return docx.Document(io.BytesIO(data))
    except ValueError as exc:
        if "not a Word file" in str(exc):
            raise BadDocument("the .docx file is not a Word document") from None
        raise


class DocxFormat:
    media_type = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    extra = "docx"

    @classmethod
    def read(cls, data: bytes, retranslate: bool = False) -> DocxDocument:
        found = stories(opened(data))
        units, paragraphs = [], []
        for index, story in enumerate(found):
            depth = 0  # a field's result over several paragraphs (a TOC) stays as it is
            for element in story.root.iter(_W + "p"):
                unit, paragraph, depth = read_paragraph(element, index, depth)
                units.append(unit)
                paragraphs.append(paragraph)
        return DocxDocument(units, paragraphs, found, data)
