"""PowerPoint presentations (.pptx): every paragraph of every shape translated (groups,
tables, placeholders) and the speaker notes too, the formatting and links of each word kept
around its Chinese, slides, shapes, positions, fields and media as they were."""

from __future__ import annotations

import io

import pptx
import pytest
from documents_common import CJK, members, png, translated, with_extra_part, word, zipped
from lxml import etree
from pptx.oxml.ns import qn
from pptx.util import Inches

from translator.documents.conversion import read
from translator.documents.document import BadDocument

URL = "https://example.com/cat"
A = "http://schemas.openxmlformats.org/drawingml/2006/main"
FIELD = (
    f'<a:fld xmlns:a="{A}" id="{{B6F15528-21DE-4FAA-801E-634DDDAF4B2B}}" type="slidenum">'
    '<a:rPr lang="en-US"/><a:t>2</a:t></a:fld>'
)


def box(shapes, top: float):
    return shapes.add_textbox(Inches(1), Inches(top), Inches(6), Inches(1)).text_frame


def formatted(frame) -> None:
    p = frame.paragraphs[0]
    for text, style in [("The big ", ""), ("cat", "bold"), (" sat on the ", ""), ("red", "italic"),
                        (" mat, see ", ""), ("this page", "link"), (" now.", "")]:  # fmt: skip
        run = p.add_run()
        run.text = text
        run.font.bold = True if style == "bold" else None
        run.font.italic = True if style == "italic" else None
        if style == "link":
            run.hyperlink.address = URL
    second = frame.add_paragraph()
    second.add_run().text = "First line"
    second.add_line_break()
    second.add_run().text = "second line"
    third = frame.add_paragraph()
    third.add_run().text = "Slide "
    third._p.append(etree.fromstring(FIELD))


def sample() -> bytes:
    prs = pptx.Presentation()
    title = prs.slides.add_slide(prs.slide_layouts[0])
    title.shapes.title.text = "The garden report"
    title.placeholders[1].text = "A short talk"
    slide = prs.slides.add_slide(prs.slide_layouts[6])
    formatted(box(slide.shapes, 0.5))
    group = slide.shapes.add_group_shape()
    box(group.shapes, 2).text = "Inside the group"
    box(group.shapes.add_group_shape().shapes, 2.5).text = "Inside a nested group"
    table = slide.shapes.add_table(2, 2, Inches(1), Inches(3.5), Inches(4), Inches(1)).table
    for i, cell in enumerate(c for row in table.rows for c in row.cells):
        cell.text = f"Cell number {i}"
    slide.shapes.add_picture(io.BytesIO(png()), Inches(7), Inches(5))
    slide.notes_slide.notes_text_frame.text = "Speaker notes about the garden"
    out = io.BytesIO()
    prs.save(out)
    return with_extra_part(out.getvalue(), "ppt/embeddings/x.bin")


def paragraphs(body: bytes) -> list:
    return list(etree.fromstring(body).iter(qn("a:p")))


def text(p) -> str:
    return "".join(t.text or "" for t in p.iter(qn("a:t")))


def canonical(element) -> bytes:
    return etree.tostring(element, method="c14n", exclusive=True)


def shapes(collection) -> list[tuple]:
    """Each shape, those in groups too: (kind, name, left, top, width, height)."""
    found = []
    for shape in collection:
        found.append(
            (shape.shape_type, shape.name, shape.left, shape.top, shape.width, shape.height)
        )
        if shape.shape_type == pptx.enum.shapes.MSO_SHAPE_TYPE.GROUP:
            found += shapes(shape.shapes)
    return found


def test_every_paragraph_and_the_notes_translated_slides_and_shapes_kept():
    data = sample()
    out, counts = translated(data, "pptx")
    before, after = members(data), members(out)
    assert list(before) == list(after)
    stories = [m for m in before if m.startswith(("ppt/slides/slide", "ppt/notesSlides/notes"))]
    assert len(stories) == 3
    for name, body in before.items():  # layouts, masters, media, the orphan part: as they were
        if name not in stories:
            assert after[name] == body, name
    for name in stories:
        old, new = paragraphs(before[name]), paragraphs(after[name])
        assert len(old) == len(new), name
        for p, q in zip(old, new, strict=True):
            if any(c.isalpha() for c in text(p)):
                assert CJK.search(text(q)) and not any("a" <= c <= "z" for c in text(q)), text(q)
    assert counts.units == 12 and counts.kept_moved == 0
    given, result = pptx.Presentation(io.BytesIO(data)), pptx.Presentation(io.BytesIO(out))
    assert len(result.slides) == len(given.slides) == 2
    for old, new in zip(given.slides, result.slides, strict=True):
        assert shapes(new.shapes) == shapes(old.shapes)
    notes = result.slides[1].notes_slide.notes_text_frame.text
    assert notes == word("Speaker") + word("notes") + word("about") + word("garden")
    table = [s for s in result.slides[1].shapes if s.has_table][0].table
    assert table.cell(1, 1).text == word("Cell") + word("number") + "3"


def test_a_bold_italic_and_linked_word_keep_their_formatting_around_its_chinese():
    out, counts = translated(sample(), "pptx")
    assert counts.spans_unplaced == 0
    frame = pptx.Presentation(io.BytesIO(out)).slides[1].shapes[0].text_frame
    runs = frame.paragraphs[0].runs
    assert [r.text for r in runs if r.font.bold] == [word("cat")]
    assert [r.text for r in runs if r.font.italic] == [word("red")]
    assert [(r.text, r.hyperlink.address) for r in runs if r.hyperlink.address] == [
        (word("this") + word("page"), URL)
    ]


def test_line_breaks_and_fields_are_kept():
    out, _ = translated(sample(), "pptx")
    frame = pptx.Presentation(io.BytesIO(out)).slides[1].shapes[0].text_frame
    second, third = frame.paragraphs[1]._p, frame.paragraphs[2]._p
    assert [etree.QName(c).localname for c in second] == ["r", "br", "r"]
    assert text(second) == word("First") + word("line") + word("second") + word("line")
    field = third.find(qn("a:fld"))
    assert canonical(field) == canonical(etree.fromstring(FIELD))
    assert text(third) == word("Slide") + " 2"  # its blank kept, the field as it was


def test_a_presentation_without_words_is_left_byte_for_byte():
    prs = pptx.Presentation()
    prs.slides.add_slide(prs.slide_layouts[6]).shapes.add_textbox(0, 0, 10, 10).text = "— * —"
    stream = io.BytesIO()
    prs.save(stream)
    data = stream.getvalue()
    out, counts = translated(data, "pptx")
    assert counts.units == 0 and members(out) == members(data)


def empty() -> dict[str, bytes]:
    stream = io.BytesIO()
    pptx.Presentation().save(stream)
    return members(stream.getvalue())


def docx_bytes() -> bytes:
    import docx

    stream = io.BytesIO()
    docx.Document().save(stream)
    return stream.getvalue()


def changed(name: str, body: bytes) -> bytes:
    return zipped({**empty(), name: body})


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (lambda: b"PK\x03\x04 truncated", "not a readable zip"),
        (lambda: zipped({"a.txt": b"hello"}), "cannot be read"),
        (docx_bytes, "not a PowerPoint presentation"),
        (lambda: changed("ppt/presentation.xml", b"<p:presentation>"), "cannot be read"),
        (lambda: changed("ppt/media/zeros.bin", bytes(4 * 2**20)), "zip bomb"),
        (lambda: changed("ppt/x.xml", b'<!DOCTYPE x [<!ENTITY a "b">]><x/>'), "entities"),
    ],
)
def test_a_broken_or_hostile_file_is_one_line(data, fragment):
    with pytest.raises(BadDocument) as error:
        read(data(), "pptx")  # as every way in reads it
    assert fragment in str(error.value) and "\n" not in str(error.value)


def test_a_glossary_term_in_a_link_comes_back_linked_with_the_real_model(trained, tmp_path):
    from translator.inference.text import Translator

    prs = pptx.Presentation()
    frame = box(prs.slides.add_slide(prs.slide_layouts[6]).shapes, 1)
    for part in ("The ", "cat", " is here."):
        run = frame.paragraphs[0].add_run()
        run.text = part
        if part == "cat":
            run.font.bold = True
            run.hyperlink.address = URL
    frame.add_paragraph().add_run().text = "Tom will buy the book."
    src, out = tmp_path / "in.pptx", tmp_path / "out.pptx"
    prs.save(str(src))
    given = src.read_bytes()
    Translator.from_checkpoint(trained, "cpu").translate_file(src, out, glossary={"cat": "猫咪"})
    assert src.read_bytes() == given
    result = pptx.Presentation(str(out))
    assert len(result.slides) == 1 and len(result.slides[0].shapes) == 1
    paragraphs = result.slides[0].shapes[0].text_frame.paragraphs
    assert len(paragraphs) == 2
    linked = [(r.text, r.font.bold) for r in paragraphs[0].runs if r.hyperlink.address == URL]
    assert linked == [("猫咪", True)]
