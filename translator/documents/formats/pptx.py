"""PowerPoint presentations (.pptx), read with python-pptx, rewritten at the XML level of
each paragraph.

Units: every paragraph (a:p) of every slide, in slide order: the text frames of its shapes
and placeholders, of shapes in groups (at any depth), of its tables' cells; and every
paragraph of each slide's notes (the speaker notes are translated too). Slide layouts and
masters, charts, SmartArt and comments are not translated.

A run's mark is its a:rPr (a key of its elements and attributes, the spelling flags err and
dirty aside), so a link (a:hlinkClick, with its r:id) is part of it: translated text goes
back in a run cloned from the first run of its mark. Line breaks (a:br), fields (a:fld: slide
numbers, dates, their text as it was) and anything else in a paragraph are kept runs, those
side by side one; a:pPr and a:endParaRPr stay where they are; empty runs are dropped from a
rewritten paragraph. Shapes, their number and positions, and slides are not touched.

Only the slide and notes parts holding a changed paragraph are serialized again; every other
member of the zip (layouts, masters, media, embedded objects, macros, parts python-pptx does
not know) is copied from the input byte for byte.
"""

from __future__ import annotations

import copy
import io
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from translator.documents.document import BadDocument, Run, Unit, library
from translator.documents.formats.docx import properties_key, xml_text
from translator.documents.package import checked_zip, repacked

_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
_R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
_NOTES = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/notesSlide"
_IGNORED = frozenset({"err", "dirty"})  # spelling-check state, not formatting
_LITERAL = {_A + "br": "\n"}


@dataclass
class Paragraph:
    """One a:p as a unit: its kept groups, and the run each mark's text is cloned from."""

    element: Any
    story: int
    kept: list[list[Any]] = field(default_factory=list)
    templates: dict[Hashable, Any] = field(default_factory=dict)


def read_paragraph(element: Any, story: int) -> tuple[Unit, Paragraph]:
    paragraph = Paragraph(element, story)
    runs: Unit = []
    for child in element:
        if child.tag in (_A + "pPr", _A + "endParaRPr"):
            continue
        last = runs[-1] if runs else None
        if child.tag == _A + "r":
            rpr = child.find(_A + "rPr")
            mark = properties_key(rpr, _IGNORED) if rpr is not None else ()
            text = "".join(t.text or "" for t in child.iterfind(_A + "t"))
            if not text:
                continue
            paragraph.templates.setdefault(mark, child)
            if last is not None and not last.kept and last.mark == mark:
                runs[-1] = Run(last.text + text, mark)
            else:
                runs.append(Run(text, mark))
            continue
        literal = _LITERAL.get(child.tag) or "".join(t.text or "" for t in child.iter(_A + "t"))
        if last is not None and last.kept:
            paragraph.kept[-1].append(child)
            runs[-1] = Run(last.text + literal, last.mark, kept=True)
        else:
            paragraph.kept.append([child])
            runs.append(Run(literal, len(paragraph.kept) - 1, kept=True))
    return runs, paragraph


def text_run(template: Any, text: str) -> Any:
    """An a:r with `template`'s properties holding `text`."""
    r = template.makeelement(template.tag, dict(template.attrib))
    rpr = template.find(_A + "rPr")
    if rpr is not None:
        rpr = copy.deepcopy(rpr)
        rpr.attrib.pop("err", None)  # the English word's spelling flag
        r.append(rpr)
    t = r.makeelement(_A + "t", {})
    t.text = xml_text(text)
    r.append(t)
    return r


def rebuild(paragraph: Paragraph, unit: Unit) -> None:
    """The paragraph's runs replaced by `unit`'s, in its order; kept runs it lacks at its end."""
    elements, placed = [], set()
    for run in unit:
        if run.kept:
            placed.add(run.mark)
            elements += paragraph.kept[run.mark]
        else:
            elements.append(text_run(paragraph.templates[run.mark], run.text))
    for index, group in enumerate(paragraph.kept):
        if index not in placed:
            elements += group
    p = paragraph.element
    front = [child for child in p if child.tag == _A + "pPr"]
    back = [child for child in p if child.tag == _A + "endParaRPr"]
    for child in list(p):
        p.remove(child)
    for child in [*front, *elements, *back]:
        p.append(child)


@dataclass
class PptxDocument:
    units: list[Unit]
    paragraphs: list[Paragraph]
    parts: list[Any]  # the slide and notes parts, python-pptx's
    data: bytes

    def write(self, translated: list[Unit]) -> bytes:
        changed = set()
        for unit, old, paragraph in zip(translated, self.units, self.paragraphs, strict=True):
            if unit != old:
                rebuild(paragraph, unit)
                changed.add(paragraph.story)
        parts = [self.parts[i] for i in sorted(changed)]
        return repacked(self.data, {p.partname.lstrip("/"): p.blob for p in parts})


def stories(presentation: Any) -> list[tuple[Any, Any]]:
    """(part, root element) of each slide in order, each followed by its notes, if any.
    Read through the relationships: python-pptx's `slides` would rename the slide parts."""
    found, seen = [], set()
    listed = presentation.element.find(_P + "sldIdLst")
    for slide_id in listed if listed is not None else []:
        part = presentation.part.related_part(slide_id.get(_R + "id"))
        if part.partname in seen:
            continue
        seen.add(part.partname)
        found.append((part, part.slide.element))
        for rel in part.rels.values():
            if rel.reltype == _NOTES and not rel.is_external:
                notes = rel.target_part
                found.append((notes, notes.notes_slide.element))
    return found


def opened(data: bytes) -> Any:
    pptx = library("pptx", "pptx", ".pptx")
    checked_zip(data, "the .pptx file")
    try:  # any other error of the library's is one line in conversion.read
        return pptx.Presentation(io.BytesIO(data))
    except ValueError as exc:
        if "not a PowerPoint file" in str(exc):
            raise BadDocument("the .pptx file is not a PowerPoint presentation") from None
        raise


class PptxFormat:
    media_type = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
    extra = "pptx"

    @classmethod
    def read(cls, data: bytes, retranslate: bool = False) -> PptxDocument:
        found = stories(opened(data))
        units, paragraphs = [], []
        for index, (_, root) in enumerate(found):
            for element in root.iter(_A + "p"):
                unit, paragraph = read_paragraph(element, index)
                units.append(unit)
                paragraphs.append(paragraph)
        return PptxDocument(units, paragraphs, [part for part, _ in found], data)
