"""OpenDocument text (.odt): every paragraph and heading translated (body, tables, lists, text
boxes, footnotes, page headers and footers), spans and links kept around the Chinese of their
words, everything else (pictures, notes' citations, tabs, bookmarks, meta.xml) as it was."""

from __future__ import annotations

import io

import pytest
from documents_common import CJK, members, png, translated, word, zipped
from odf import draw, style, table, text
from odf.opendocument import OpenDocumentText, load

from translator.documents.document import BadDocument
from translator.documents.formats.odt import OdtFormat

XLINK = "http://www.w3.org/1999/xlink"
URL = "https://example.com/cat"


def saved(doc) -> bytes:
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()


def bold_style(doc) -> style.Style:
    bold = style.Style(name="Bold", family="text")
    bold.addElement(style.TextProperties(fontweight="bold"))
    doc.styles.addElement(bold)
    return bold


def sentence(doc, bold) -> text.P:
    """ "The <bold>cat</bold> sat on the <link>mat</link>."."""
    p = text.P(text="The ")
    p.addElement(text.Span(stylename=bold, text="cat"))
    p.addText(" sat on the ")
    p.addElement(text.A(href=URL, type="simple", text="mat"))
    p.addText(".")
    return p


def rich() -> bytes:
    """Headings, paragraphs with a span, a link, spaces, a tab, a line break, a bookmark and a
    footnote, a table, a list, a text box, a picture, a header and a footer."""
    doc = OpenDocumentText()
    bold = bold_style(doc)
    layout = style.PageLayout(name="pm1")
    doc.automaticstyles.addElement(layout)
    master = style.MasterPage(name="Standard", pagelayoutname=layout)
    header, footer = style.Header(), style.Footer()
    header.addElement(text.P(text="The report header"))
    footer.addElement(text.P(text="Page footer"))
    master.addElement(header)
    master.addElement(footer)
    doc.masterstyles.addElement(master)
    doc.text.addElement(text.H(outlinelevel=1, text="A short title"))
    doc.text.addElement(sentence(doc, bold))
    p = text.P()
    p.addElement(text.S(c=4))  # indented by four spaces
    p.addText("Hello world")
    p.addElement(text.Tab())
    p.addText("after a tab")
    p.addElement(text.LineBreak())
    p.addElement(text.BookmarkStart(name="mark1"))
    p.addText("on a new line")
    p.addElement(text.BookmarkEnd(name="mark1"))
    note = text.Note(id="ftn1", noteclass="footnote")
    note.addElement(text.NoteCitation(text="1"))
    body = text.NoteBody()
    body.addElement(text.P(text="A note about the garden"))
    note.addElement(body)
    p.addElement(note)
    doc.text.addElement(p)
    grid = table.Table(name="Grid")
    grid.addElement(table.TableColumn(numbercolumnsrepeated=2))
    row = table.TableRow()
    for words in ("First cell", "Second cell"):
        cell = table.TableCell()
        cell.addElement(text.P(text=words))
        row.addElement(cell)
    grid.addElement(row)
    doc.text.addElement(grid)
    items = text.List()
    for words in ("An apple", "A pear"):
        item = text.ListItem()
        item.addElement(text.P(text=words))
        items.addElement(item)
    doc.text.addElement(items)
    holder = text.P(text="A picture: ")
    frame = draw.Frame(name="pic", anchortype="as-char", width="1cm", height="1cm")
    frame.addElement(draw.Image(href=doc.addPicture("Pictures/dot.png", "image/png", png())))
    holder.addElement(frame)
    box = draw.Frame(name="box", anchortype="paragraph", width="4cm", height="2cm")
    inside = draw.TextBox()
    inside.addElement(text.P(text="Inside the box"))
    box.addElement(inside)
    holder.addElement(box)
    doc.text.addElement(holder)
    doc.text.addElement(text.P(text="* * *"))
    return saved(doc)


def paragraphs(doc) -> list:
    return [
        e
        for top in (doc.body, doc.masterstyles)
        for kind in (text.P, text.H)
        for e in top.getElementsByType(kind)
    ]


def text_of(element) -> str:
    """An element's text, its kept children's too."""
    return "".join(
        node.data if node.nodeType == node.TEXT_NODE else text_of(node)
        for node in element.childNodes
    )


def test_structure_counts_and_everything_but_the_words_are_kept():
    data = rich()
    before = bytes(data)
    out, counts = translated(data, "odt")
    assert data == before
    source, result = load(io.BytesIO(data)), load(io.BytesIO(out))
    old, new = paragraphs(source), paragraphs(result)
    assert len(old) == len(new) == 13
    for a, b in zip(old, new, strict=True):
        if any(c.isalpha() for c in text_of(a)):
            assert CJK.search(text_of(b)), text_of(a)
    assert counts.units == 12  # all but "* * *"
    for kind in (text.Tab, text.LineBreak, text.Note, text.NoteCitation, draw.Frame, draw.Image):
        assert len(source.body.getElementsByType(kind)) == len(result.body.getElementsByType(kind))
    starts = result.body.getElementsByType(text.BookmarkStart)
    assert [b.getAttribute("name") for b in starts] == ["mark1"]
    assert [a.getAttrNS(XLINK, "href") for a in result.body.getElementsByType(text.A)] == [URL]
    assert text_of(result.body.getElementsByType(text.NoteCitation)[0]) == "1"
    spaces = result.body.getElementsByType(text.S)
    assert spaces and spaces[0].getAttribute("c") == "4"  # the indent written as text:s
    headers = result.masterstyles.getElementsByType(style.Header)
    assert CJK.search(text_of(headers[0]))
    assert "* * *" in [text_of(p) for p in new]
    was, now = members(data), members(out)
    assert list(was) == list(now)
    assert [n for n in was if was[n] != now[n]] == ["styles.xml", "content.xml"]


def test_only_content_xml_is_rewritten_when_headers_and_footers_have_no_words():
    doc = OpenDocumentText()
    doc.text.addElement(text.P(text="Hello world"))
    data = saved(doc)
    out, _ = translated(data, "odt")
    was, now = members(data), members(out)
    assert [n for n in was if was[n] != now[n]] == ["content.xml"]
    assert text_of(load(io.BytesIO(out)).text.getElementsByType(text.P)[0]) == "你好世界"


def test_a_bold_word_and_a_link_come_back_around_their_chinese():
    doc = OpenDocumentText()
    doc.text.addElement(sentence(doc, bold_style(doc)))
    out, counts = translated(saved(doc), "odt")
    result = load(io.BytesIO(out))
    (p,) = result.text.getElementsByType(text.P)
    (span,) = p.getElementsByType(text.Span)
    (link,) = p.getElementsByType(text.A)
    assert span.getAttribute("stylename") == "Bold" and text_of(span) == word("cat")
    assert link.getAttrNS(XLINK, "href") == URL and text_of(link) == word("mat")
    assert word("sat") in text_of(p) and counts.spans == 2 and counts.spans_unplaced == 0


def test_nested_span_in_a_link_is_kept_nested():
    doc = OpenDocumentText()
    bold = bold_style(doc)
    p = text.P(text="Read the ")
    link = text.A(href=URL, type="simple", text="big ")
    link.addElement(text.Span(stylename=bold, text="manual"))
    p.addElement(link)
    p.addText(" today.")
    doc.text.addElement(p)
    out, _ = translated(saved(doc), "odt")
    (link,) = load(io.BytesIO(out)).text.getElementsByType(text.A)
    (span,) = link.getElementsByType(text.Span)
    assert text_of(span) == word("manual") and text_of(link) == word("big") + word("manual")


def test_an_unchanged_document_comes_back_as_its_bytes():
    doc = OpenDocumentText()
    doc.text.addElement(text.P(text="42"))
    data = saved(doc)
    assert translated(data, "odt")[0] == data


def test_members_odfpy_would_drop_are_kept_and_a_signature_is_left_out():
    files = members(rich())
    files["Configurations2/accelerator/current.xml"] = b"<x/>"  # not in the manifest
    files["Object 1/Pictures/chart.png"] = png()  # an embedded object's picture
    files["META-INF/documentsignatures.xml"] = b"<signatures/>"
    out = members(translated(zipped(files), "odt")[0])
    assert "META-INF/documentsignatures.xml" not in out
    for name in ("Configurations2/accelerator/current.xml", "Object 1/Pictures/chart.png"):
        assert out[name] == files[name]


def changed(name: str, change) -> bytes:
    """rich() with its member `name` changed by `change`."""
    parts = members(rich())
    parts[name] = change(parts[name])
    return zipped(parts)


def sealed(manifest: bytes) -> bytes:
    """A manifest saying content.xml is encrypted."""
    entry = b'manifest:full-path="content.xml" manifest:media-type="text/xml"'
    encryption = b'><manifest:encryption-data manifest:checksum="x"/></manifest:file-entry>'
    return manifest.replace(entry + b"/>", entry + encryption)


def deep() -> bytes:
    """A paragraph of 300 nested spans."""
    doc = OpenDocumentText()
    p = outer = text.P()
    for _ in range(300):
        inner = text.Span(text="x")
        outer.addElement(inner)
        outer = inner
    doc.text.addElement(p)
    return saved(doc)


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda: b"not a zip at all", "not a readable zip"),
        (lambda: zipped({"mimetype": b"x", "word/document.xml": b"<w/>"}), "no content.xml"),
        (lambda: changed("content.xml", lambda xml: xml[:-40]), "not well-formed"),
        (lambda: changed("META-INF/manifest.xml", sealed), "password-protected"),
        (deep, "nests elements deeper"),
    ],
)
def test_a_broken_file_is_one_line(make, says):
    with pytest.raises(BadDocument, match=says) as caught:
        OdtFormat.read(make())
    assert "\n" not in str(caught.value)


def test_a_zip_bomb_and_an_entity_declaration_are_refused():
    parts = members(rich())
    bomb = dict(parts, **{"Pictures/zeros.png": bytes(4 * 2**20)})
    with pytest.raises(BadDocument, match="zip bomb"):
        OdtFormat.read(zipped(bomb))
    laughs = b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]>'
    entity = dict(parts, **{"content.xml": laughs + parts["content.xml"].split(b"?>", 1)[1]})
    with pytest.raises(BadDocument, match="entities"):
        OdtFormat.read(zipped(entity))


def test_a_glossary_term_in_a_bold_span_comes_back_bold_with_the_real_model(trained, tmp_path):
    from translator.inference.text import Translator

    doc = OpenDocumentText()
    bold = bold_style(doc)
    p = text.P(text="The ")
    p.addElement(text.Span(stylename=bold, text="cat"))
    p.addText(" is here.")
    doc.text.addElement(p)
    doc.text.addElement(text.P(text="Tom will buy the book."))
    src = tmp_path / "in.odt"
    src.write_bytes(saved(doc))
    given = src.read_bytes()
    out = tmp_path / "out.odt"
    Translator.from_checkpoint(trained, "cpu").translate_file(src, out, glossary={"cat": "猫咪"})
    assert src.read_bytes() == given
    result = load(str(out))
    ps = result.text.getElementsByType(text.P)
    assert len(ps) == 2
    assert [text_of(s) for s in ps[0].getElementsByType(text.Span)] == ["猫咪"]
