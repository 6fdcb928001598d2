"""Word documents (.docx): every paragraph translated (body, tables, nested tables, text
boxes, headers and footers, footnotes), the formatting of each word kept around its Chinese,
everything else (pictures, fields, links, embedded parts) as it was."""

from __future__ import annotations

import io

import docx
import pytest
from documents_common import CJK, members, png, translated, with_extra_part, word, zipped
from docx.opc.constants import RELATIONSHIP_TYPE as RT
from docx.opc.packuri import PackURI
from docx.opc.part import Part
from docx.oxml import parse_xml
from docx.oxml.ns import nsdecls, qn

from translator.documents.conversion import read
from translator.documents.document import BadDocument

W_P = qn("w:p")
URL = "https://example.com/cat"
FIELD = (
    f'<w:r {nsdecls("w")}><w:fldChar w:fldCharType="begin"/></w:r>',
    f'<w:r {nsdecls("w")}><w:instrText xml:space="preserve"> PAGE </w:instrText></w:r>',
    f'<w:r {nsdecls("w")}><w:fldChar w:fldCharType="separate"/></w:r>',
    f"<w:r {nsdecls('w')}><w:t>1</w:t></w:r>",
    f'<w:r {nsdecls("w")}><w:fldChar w:fldCharType="end"/></w:r>',
)
TEXT_BOX = (
    f'<w:r {nsdecls("w")} xmlns:v="urn:schemas-microsoft-com:vml"><w:pict>'
    '<v:shape id="box" style="width:90pt;height:40pt">'
    "<v:textbox><w:txbxContent><w:p><w:r><w:t>Inside the box</w:t></w:r></w:p>"
    "</w:txbxContent></v:textbox></v:shape></w:pict></w:r>"
)
FOOTNOTES = (
    f"<w:footnotes {nsdecls('w')}>"
    '<w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:footnote>'
    '<w:footnote w:id="1"><w:p><w:r><w:footnoteRef/></w:r><w:r><w:t xml:space="preserve">'
    " A note about the garden.</w:t></w:r></w:p></w:footnote></w:footnotes>"
).encode()


def hyperlink(document, text: str) -> object:
    rid = document.part.relate_to(URL, RT.HYPERLINK, is_external=True)
    return parse_xml(
        f'<w:hyperlink {nsdecls("w", "r")} r:id="{rid}"><w:r><w:rPr><w:u w:val="single"/>'
        f"</w:rPr><w:t>{text}</w:t></w:r></w:hyperlink>"
    )


def saved(document) -> bytes:
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def sample() -> bytes:
    d = docx.Document()
    d.add_heading("The garden report", level=1)
    p = d.add_paragraph("The big ")
    p.add_run("cat").bold = True
    p.add_run(" sat on the ")
    p.add_run("red").italic = True
    p.add_run(" mat, see ")
    p._p.append(hyperlink(d, "this page"))
    p.add_run(" now.")
    d.add_paragraph().add_run("Name:\tvalue\nsecond line")  # a tab and a break in one run
    d.add_paragraph().add_run().add_picture(io.BytesIO(png()))
    box = d.add_paragraph("A box follows")
    box._p.append(parse_xml(TEXT_BOX))
    table = d.add_table(rows=2, cols=2)
    for i, cell in enumerate(table._cells):
        cell.text = f"Cell number {i}"
    table.cell(1, 1).add_table(rows=1, cols=2).cell(0, 1).text = "A nested cell"
    note = d.add_paragraph("The garden is green")
    note._p.append(parse_xml(f'<w:r {nsdecls("w")}><w:footnoteReference w:id="1"/></w:r>'))
    section = d.sections[0]
    section.different_first_page_header_footer = True
    d.settings.odd_and_even_pages_header_footer = True
    section.header.paragraphs[0].text = "The default header"
    section.first_page_header.paragraphs[0].text = "The first page header"
    section.even_page_header.paragraphs[0].text = "The even page header"
    footer = section.footer.paragraphs[0]
    footer.text = "Page "
    for run in FIELD:
        footer._p.append(parse_xml(run))
    notes = Part(PackURI("/word/footnotes.xml"), docx.opc.constants.CONTENT_TYPE.WML_FOOTNOTES,
                 FOOTNOTES, d.part.package)  # fmt: skip
    d.part.relate_to(notes, RT.FOOTNOTES)
    return with_extra_part(saved(d), "word/embeddings/x.bin")


def paragraphs(data: bytes, member: str) -> list:
    return list(parse_xml(members(data)[member]).iter(W_P))


def text(p) -> str:
    return "".join(t.text or "" for t in p.iter(qn("w:t")))


def test_every_paragraph_translated_and_the_rest_kept_as_it_was():
    data = sample()
    out, counts = translated(data, "docx")
    before, after = members(data), members(out)
    assert list(before) == list(after)
    stories = [m for m in before if m.startswith(("word/header", "word/footer"))]
    stories += ["word/document.xml", "word/footnotes.xml"]
    for name, body in before.items():  # styles, images, rels, the orphan part: byte for byte
        if name not in stories:
            assert after[name] == body, name
    assert after["word/embeddings/x.bin"] == bytes(range(256)) * 4
    for member in stories:
        old, new = paragraphs(data, member), paragraphs(out, member)
        assert len(old) == len(new), member
        for p, q in zip(old, new, strict=True):
            if any(c.isalpha() for c in text(p)):
                assert CJK.search(text(q)) and not any("a" <= c <= "z" for c in text(q)), text(q)
    assert counts.units > 15 and counts.kept_moved == 0
    result = docx.Document(io.BytesIO(out))
    assert len(result.tables[0].cell(1, 1).tables[0].rows[0].cells) == 2
    assert CJK.search(result.tables[0].cell(1, 1).tables[0].cell(0, 1).text)
    assert len(result.inline_shapes) == 1  # the picture, its rId and image part unchanged
    body = members(out)["word/document.xml"]
    assert body.count(b"<w:tab/>") == 1 and body.count(b"<w:br/>") == 1
    assert b'<w:footnoteReference w:id="1"/>' in body and b'v:shape id="box"' in body


def test_a_field_is_kept_whole_and_a_header_per_kind_translated():
    out, _ = translated(sample(), "docx")
    section = docx.Document(io.BytesIO(out)).sections[0]
    for header in (section.header, section.first_page_header, section.even_page_header):
        assert CJK.search(header.paragraphs[0].text) and "header" not in header.paragraphs[0].text
    footer = section.footer.paragraphs[0]._p
    assert [t.text for t in footer.iter(qn("w:instrText"))] == [" PAGE "]
    kinds = [f.get(qn("w:fldCharType")) for f in footer.iter(qn("w:fldChar"))]
    assert kinds == ["begin", "separate", "end"]
    assert text(footer) == word("Page") + " 1"  # its blank kept, the field's result as it was


def test_a_bold_italic_and_linked_word_keep_their_formatting_around_its_chinese():
    out, counts = translated(sample(), "docx")
    assert counts.spans_unplaced == 0
    result = docx.Document(io.BytesIO(out))
    p = result.paragraphs[1]
    assert [r.text for r in p.runs if r.bold] == [word("cat")]
    assert [r.text for r in p.runs if r.italic] == [word("red")]
    links = p._p.findall(qn("w:hyperlink"))
    assert len(links) == 1 and text(links[0]) == word("this") + word("page")
    assert result.part.rels[links[0].get(qn("r:id"))].target_ref == URL
    assert links[0].find(qn("w:r")).find(qn("w:rPr")).find(qn("w:u")) is not None
    assert "".join(r.text for r in p.runs).endswith(".")


def test_text_boxes_and_footnotes_are_translated_their_references_kept():
    data = sample()
    out, _ = translated(data, "docx")
    box = [p for p in paragraphs(out, "word/document.xml") if p.getparent().tag.endswith("Content")]
    assert [text(p) for p in box] == [word("Inside") + word("box")]
    notes = paragraphs(out, "word/footnotes.xml")
    assert text(notes[1]) == " " + word("note") + word("about") + word("garden") + "."
    assert notes[1].find(qn("w:r")).find(qn("w:footnoteRef")) is not None
    assert notes[0].find(qn("w:r")).find(qn("w:separator")) is not None


def test_a_paragraph_without_words_is_left_byte_for_byte():
    d = docx.Document()
    d.add_paragraph("— * —")
    d.add_paragraph("")
    data = saved(d)
    out, counts = translated(data, "docx")
    assert counts.units == 0 and members(out) == members(data)


def pptx_bytes() -> bytes:
    import pptx

    out = io.BytesIO()
    pptx.Presentation().save(out)
    return out.getvalue()


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"plain words, not a zip", "not a readable zip"),
        (zipped({"a.txt": b"hello"}), "cannot be read"),
        (lambda: pptx_bytes(), "not a Word document"),
        (lambda: broken_body(), "cannot be read"),
        (lambda: with_member("word/zeros.bin", bytes(4 * 2**20)), "zip bomb"),
        (lambda: with_member("word/evil.xml", b'<!DOCTYPE x [<!ENTITY a "b">]><x/>'), "entities"),
    ],
)
def test_a_broken_or_hostile_file_is_one_line(data, fragment):
    with pytest.raises(BadDocument) as error:
        read(data() if callable(data) else data, "docx")  # as every way in reads it
    assert fragment in str(error.value) and "\n" not in str(error.value)


def broken_body() -> bytes:
    files = members(saved(docx.Document()))
    files["word/document.xml"] = b"<w:document><w:body><w:p>"
    return zipped(files)


def with_member(name: str, body: bytes) -> bytes:
    files = members(saved(docx.Document()))
    files[name] = body
    return zipped(files)


def test_a_glossary_term_in_bold_comes_back_bold_with_the_real_model(trained, tmp_path):
    from translator.inference.text import Translator

    d = docx.Document()
    p = d.add_paragraph("The ")
    p.add_run("cat").bold = True
    p.add_run(" is here.")
    d.add_paragraph("Tom will buy the book.")
    src = tmp_path / "in.docx"
    src.write_bytes(saved(d))
    given = src.read_bytes()
    out = tmp_path / "out.docx"
    Translator.from_checkpoint(trained, "cpu").translate_file(src, out, glossary={"cat": "猫咪"})
    assert src.read_bytes() == given
    result = docx.Document(str(out))
    assert len(result.paragraphs) == 2
    assert [r.text for r in result.paragraphs[0].runs if r.bold] == ["猫咪"]
