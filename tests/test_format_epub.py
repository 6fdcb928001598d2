"""EPUB books (.epub): each chapter's paragraphs, headings, list items, cells and captions
translated, and the table of contents (nav.xhtml, toc.ncx) with them; bold, italic and links
kept around the Chinese of their words; code, pre, scripts, pictures, CSS and content.opf as
they were."""

from __future__ import annotations

import io
import zipfile

import pytest
from documents_common import CJK, members, png, translated, word, zipped
from ebooklib import epub
from lxml import etree

from translator.documents.document import BadDocument
from translator.documents.formats.epub import EpubFormat

X = "{http://www.w3.org/1999/xhtml}"
NCX = "{http://www.daisy.org/z3986/2005/ncx/}"
URL = "https://example.com/cat"
CHAPTER = f"""<html><head><title>The first chapter</title></head><body>
<h1>The first chapter</h1>
<p>The <b>cat</b> sat on the <a href="{URL}">mat</a>.</p>
<p>Run <code>ls -l</code> in a <i>new <em>shell</em></i>.<br/>Next <img src="dot.png" alt="a"/></p>
<ul><li>An apple<ul><li>A green pear</li></ul></li></ul>
<table><caption>Fruit prices</caption><tr><th>Name</th><td>Price today</td></tr></table>
<figure><img src="dot.png" alt="dot"/><figcaption>A small dot</figcaption></figure>
<div>Loose words in a div</div>
<pre>keep this text</pre>
<script>var greeting = "hello world";</script>
<p><a id="page5"/>* * *</p>
</body></html>"""


def book(*chapters: str, title: str = "The first chapter", name: str = "A small book") -> bytes:
    """A book called `name` of `chapters` (XHTML), the first one's `title` in its table of
    contents, with a stylesheet, a picture, a nav and an NCX."""
    b = epub.EpubBook()
    b.set_identifier("book-1")
    b.set_title(name)
    b.set_language("en")
    css = epub.EpubItem(uid="css", file_name="style.css", media_type="text/css", content=b"p{}")
    b.add_item(css)
    b.add_item(
        epub.EpubImage(uid="dot", file_name="dot.png", media_type="image/png", content=png())
    )
    items = []
    for n, body in enumerate(chapters, 1):
        item = epub.EpubHtml(title=title, file_name=f"ch{n}.xhtml", lang="en")
        item.content = body
        item.add_link(href="style.css", rel="stylesheet", type="text/css")
        b.add_item(item)
        items.append(item)
    b.toc = [epub.Link("ch1.xhtml", title, "ch1")]
    b.add_item(epub.EpubNcx())
    b.add_item(epub.EpubNav())
    b.spine = ["nav", *items]
    out = io.BytesIO()
    epub.write_epub(out, b)
    return out.getvalue()


def xml(data: bytes) -> etree._Element:
    return etree.fromstring(data, etree.XMLParser(resolve_entities=False, no_network=True))


def text(element) -> str:
    return "".join(element.itertext())


def blocks(root) -> list:
    tags = ("p", "h1", "li", "td", "th", "caption", "figcaption", "div", "title")
    return [e for e in root.iter() if isinstance(e.tag, str) and e.tag in {X + t for t in tags}]


def test_structure_counts_and_everything_but_the_words_are_kept():
    data = book(CHAPTER)
    before = bytes(data)
    out, counts = translated(data, "epub")
    assert data == before
    was, now = members(data), members(out)
    assert list(was) == list(now)
    with zipfile.ZipFile(io.BytesIO(out)) as z:
        first = z.infolist()[0]
        assert first.filename == "mimetype" and first.compress_type == zipfile.ZIP_STORED
    changed = [name for name in was if was[name] != now[name]]
    assert changed == ["EPUB/ch1.xhtml", "EPUB/toc.ncx", "EPUB/nav.xhtml"]
    old, new = xml(was["EPUB/ch1.xhtml"]), xml(now["EPUB/ch1.xhtml"])
    assert [e.tag for e in blocks(old)] == [e.tag for e in blocks(new)]
    for a, b in zip(blocks(old), blocks(new), strict=True):
        if any(c.isalpha() for c in a.text or ""):
            assert CJK.search(text(b)), text(a)
    for path in ("code", "pre", "script", "img", "a", "br", "link"):
        kept = path in ("code", "pre", "script")  # their text as well as their attributes
        found = [(e.attrib, kept and e.text) for e in old.iter(X + path)]
        assert found == [(e.attrib, kept and e.text) for e in new.iter(X + path)], path
    assert new.find(f".//{X}p/{X}a[@id='page5']").tail == "* * *"
    assert counts.spans_unplaced == 0 and counts.kept_moved == 0
    ncx = xml(now["EPUB/toc.ncx"])
    label = ncx.find(f"{NCX}navMap/{NCX}navPoint/{NCX}navLabel/{NCX}text").text
    assert ncx.find(f"{NCX}docTitle/{NCX}text").text == "A small book"  # as content.opf
    link = xml(now["EPUB/nav.xhtml"]).find(f".//{X}li/{X}a")
    heading = new.find(f".//{X}h1").text
    assert CJK.search(label) and label == link.text.strip() == heading
    assert link.get("href") == "ch1.xhtml"
    read = epub.read_epub(io.BytesIO(out), {"ignore_ncx": True})
    assert len(list(read.get_items())) == len(list(epub.read_epub(io.BytesIO(data)).get_items()))


def test_a_bold_word_and_a_link_come_back_around_their_chinese():
    data = book(
        f'<html><body><p>The <b>cat</b> sat on the <a href="{URL}">mat</a>.</p></body></html>'
    )
    out, counts = translated(data, "epub")
    (p,) = xml(members(out)["EPUB/ch1.xhtml"]).iter(X + "p")
    assert [(e.tag, e.text) for e in p] == [(X + "b", word("cat")), (X + "a", word("mat"))]
    assert p[1].get("href") == URL and word("sat") in text(p)
    assert counts.spans == 2 and counts.spans_unplaced == 0


def test_nested_inline_elements_come_back_nested():
    body = '<html><body><p>Open a <i>new <em class="x">shell</em></i> now.</p></body></html>'
    out, _ = translated(book(body), "epub")
    (p,) = xml(members(out)["EPUB/ch1.xhtml"]).iter(X + "p")
    (italic,) = p.iter(X + "i")
    (em,) = italic.iter(X + "em")
    assert em.get("class") == "x" and em.text == word("shell")
    assert text(italic) == word("new") + word("shell")


def test_a_chapter_that_is_not_well_formed_xml_is_read_as_html_and_written_as_xhtml():
    files = members(book("<html><body><p>Hello</p></body></html>"))
    files["EPUB/ch1.xhtml"] = (
        b'<html xmlns="http://www.w3.org/1999/xhtml"><head><title>Hi</title></head><body>'
        b"<p>Hello&nbsp;world<br></p><p>Today</body></html>"
    )
    out, _ = translated(zipped(files), "epub")
    root = xml(members(out)["EPUB/ch1.xhtml"])  # well-formed now
    assert [text(p) for p in root.iter(X + "p")] == ["你好世界", "今天"]
    assert len(list(root.iter(X + "br"))) == 1 and root.find(f"{X}head/{X}title").text == word("Hi")


def test_html_entities_are_read_as_xml_and_svg_and_cdata_are_kept():
    files = members(book("<html><body><p>Hello</p></body></html>"))
    svg = b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 1 1"><title>Dot</title></svg>'
    files["EPUB/ch1.xhtml"] = (
        b'<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html>\n'
        b'<html xmlns="http://www.w3.org/1999/xhtml"><head><script><![CDATA[if (a < b) {}]]>'
        b"</script></head><body><p>Hello&nbsp;world &copy; &amp; &#169;</p>"
        + svg
        + b"</body></html>"
    )
    out, _ = translated(zipped(files), "epub")
    written = members(out)["EPUB/ch1.xhtml"]
    assert written.startswith(b"<?xml version='1.0' encoding='utf-8'?>\n<!DOCTYPE html>")
    assert svg in written and b"<![CDATA[if (a < b) {}]]>" in written
    (p,) = xml(written).iter(X + "p")
    assert p.text == "你好世界©&©"


def test_an_unchanged_book_comes_back_as_its_bytes():
    data = book("<html><body><p>* * *</p></body></html>", title="§", name="—")
    assert translated(data, "epub")[0] == data


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda: b"not a zip at all", "not a readable zip"),
        (lambda: zipped({"mimetype": b"application/epub+zip"}), "cannot be read as an EPUB"),
        (
            lambda: zipped(dict(members(book("<p>x</p>")), **{"EPUB/content.opf": b"<x/>"})),
            "cannot be read as an EPUB",
        ),
    ],
)
def test_a_broken_file_is_one_line(make, says):
    with pytest.raises(BadDocument, match=says) as caught:
        EpubFormat.read(make())
    assert "\n" not in str(caught.value)


def test_a_zip_bomb_and_an_entity_declaration_are_refused():
    files = members(book(CHAPTER))
    with pytest.raises(BadDocument, match="zip bomb"):
        EpubFormat.read(zipped(dict(files, **{"EPUB/zeros.png": bytes(4 * 2**20)})))
    laughs = b'<?xml version="1.0"?><!DOCTYPE html [<!ENTITY a "aaaa">]>'
    chapter = laughs + files["EPUB/ch1.xhtml"].split(b"?>", 1)[1]
    with pytest.raises(BadDocument, match="entities"):
        EpubFormat.read(zipped(dict(files, **{"EPUB/ch1.xhtml": chapter})))


def test_a_drm_encrypted_chapter_is_refused():
    files = members(book(CHAPTER))
    sealed = b'<encryption><CipherReference URI="EPUB/ch1.xhtml"/></encryption>'
    files["META-INF/encryption.xml"] = sealed
    with pytest.raises(BadDocument, match="encrypted"):
        EpubFormat.read(zipped(files))


def test_a_glossary_term_in_bold_comes_back_bold_with_the_real_model(trained, tmp_path):
    from translator.inference.text import Translator

    src = tmp_path / "in.epub"
    body = "<html><body><p>The <b>cat</b> is here.</p><p>Tom will buy the book.</p></body></html>"
    src.write_bytes(book(body))
    given = src.read_bytes()
    out = tmp_path / "out.epub"
    Translator.from_checkpoint(trained, "cpu").translate_file(src, out, glossary={"cat": "猫咪"})
    assert src.read_bytes() == given
    root = xml(members(out.read_bytes())["EPUB/ch1.xhtml"])
    ps = list(root.iter(X + "p"))
    assert len(ps) == 2
    assert [b.text for b in ps[0].iter(X + "b")] == ["猫咪"]
