"""HTML (.html, .htm): the inline content of each block one unit, its inline tags as written
around the Chinese of their words; title, alt and placeholder translated; the doctype,
comments, block tags, other attributes, <script>, <style>, <pre> and <textarea>
byte-for-byte; unclosed and misnested tags kept as written."""

from __future__ import annotations

from collections import Counter
from html.parser import HTMLParser

import pytest
from documents_common import CJK, translated, word

from translator.documents.document import BadDocument
from translator.documents.formats.html import HtmlFormat

SAMPLE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Hello world</title>
<style>p > b { color: red; } /* Hello */</style>
<script>if (a < b && c) { document.write("<p>Hello</p>"); }</script>
</head>
<body>
<!-- Hello comment -->
<h1 class="top">Hello <em>brave</em> world</h1>
<p>Tom &amp; Mary <b>like</b> the <a href="/cats?a=1&amp;b=2" title="Cat page">cat</a>.<br>
Next line with <code>x = 1</code> and <img src="dog.png" alt="A dog"> here.</p>
<ul><li>One <span class="icon"></span>item</li><li>Two <a href="/x"><img src=b.png alt=badge></a>
items</li></ul>
<pre>keep   this
  Hello text</pre>
<table><tr><th>Name</th><td title="The role">Hello &lt;world&gt;</td></tr></table>
<p>Broken <b>bold <i>italic</b> after</i> end
<div>Unclosed <strong>strong
</div>
<form><input type="text" placeholder="Search here" value="Keep this">
<textarea placeholder='Your text'>Keep text</textarea>
<button>Send it</button><select><option>First choice</option></select></form>
Bare text in body
</body>
</html>
"""
BLOCKS = {"p", "h1", "li", "th", "td", "title", "div", "button", "option", "ul", "table", "tr"}
RAW = ("script", "style", "pre", "textarea")
TRANSLATED = ("title", "alt", "placeholder")


class Outline(HTMLParser):
    """What must not change: the block tags and every attribute but those translated (in
    order), the inline tags (how many of each), the text of <script>, <style>, <pre> and
    <textarea>, the comments and the doctype; and the text of the rest."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.blocks: list = []
        self.inline: Counter = Counter()
        self.raw: list[str] = []
        self.text: list[str] = []
        self.attributes: list[str] = []
        self.open: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        kept = tuple((k, v) for k, v in attrs if k not in TRANSLATED)
        self.attributes += [v for k, v in attrs if k in TRANSLATED]
        (self.blocks.append if tag in BLOCKS | set(RAW) else self.inline.update)([(tag, kept)])
        self.open.append(tag)

    def handle_endtag(self, tag):
        (self.blocks.append if tag in BLOCKS | set(RAW) else self.inline.update)(["/" + tag])

    def handle_data(self, data):
        inside = self.open[-1] if self.open else ""
        (self.raw if inside in RAW else self.text).append(data)

    def handle_comment(self, data):
        self.raw.append(data)

    def handle_decl(self, decl):
        self.raw.append(decl)

    def same(self, other: Outline) -> bool:
        return (self.blocks, self.inline, self.raw) == (other.blocks, other.inline, other.raw)


def test_every_block_translated_and_the_markup_kept():
    data = SAMPLE.replace("\n", "\r\n").encode()
    out, counts = translated(data, "html")
    before, after = Outline(data.decode()), Outline(out.decode())
    assert after.same(before)
    text = out.decode()
    assert text.count("\r\n") == text.count("\n")
    assert text.startswith(
        '<!DOCTYPE html>\r\n<html lang="en">\r\n<head>\r\n<meta charset="utf-8">'
    )
    assert "<pre>keep   this\r\n  Hello text</pre>" in text
    assert '<script>if (a < b && c) { document.write("<p>Hello</p>"); }</script>' in text
    assert "<!-- Hello comment -->" in text and 'value="Keep this"' in text
    words = [t for t in after.text if t.strip() and t.strip() not in (".", "x = 1")]
    assert all(CJK.search(t) for t in words) and all(CJK.search(v) for v in after.attributes)
    assert not any(w in "".join(words) for w in ("Hello", "Mary", "Broken", "Bare", "Search"))
    assert counts.units == len(HtmlFormat.read(data).units) == 18


def test_units_are_the_inline_content_of_blocks_and_their_attributes():
    units = HtmlFormat.read(SAMPLE.encode()).units
    texts = [" ".join("".join(r.text for r in u if not r.kept).split()) for u in units]
    assert texts == [
        "Hello world",  # <title>
        "Hello brave world",
        "Cat page",  # the title of <a>, before the text it stands in
        "A dog",
        "Tom & Mary like the cat. Next line with and here.",  # and <br>, <code>, <img>
        "One item",
        "badge",
        "Two items",
        "Name",
        "The role",
        "Hello <world>",
        "Broken bold italic after end",
        "Unclosed strong",
        "Search here",
        "Your text",  # not "Keep text": the <textarea> as it stands
        "Send it",
        "First choice",
        "Bare text in body",
    ]
    kept = [r.text for r in units[4] if r.kept]
    assert kept == ["<br>", "<code>x = 1</code>", '<img src="dog.png" alt="A dog">']
    assert {r.mark for r in units[4] if not r.kept} >= {(("<b>", "</b>"),), ()}


def test_inline_tags_come_back_around_the_chinese_of_their_words():
    text = translated(SAMPLE.encode(), "html")[0].decode()
    assert f"<title>{word('hello')}{word('world')}</title>" in text
    assert f'<h1 class="top">{word("hello")}<em>{word("brave")}</em>{word("world")}</h1>' in text
    cat = f'<a href="/cats?a=1&amp;b=2" title="{word("cat")}{word("page")}">{word("cat")}</a>'
    assert f"&amp;{word('mary')}<b>{word('like')}</b>{cat}.<br>" in text
    assert f'<code>x = 1</code>{word("and")}<img src="dog.png" alt="{word("dog")}">' in text
    assert f'<span class="icon"></span>{word("item")}' in text
    assert f'<a href="/x"><img src=b.png alt={word("badge")}></a>' in text
    assert f'<td title="{word("role")}">{word("hello")}&lt;{word("world")}&gt;</td>' in text
    assert f"placeholder='{word('your')}{word('text')}'>Keep text</textarea>" in text


def test_unclosed_and_misnested_tags_stay_as_written():
    text = translated(SAMPLE.encode(), "html")[0].decode()
    broken = f"<p>{word('broken')}<b>{word('bold')}<i>{word('italic')}</b>{word('after')}</i>"
    assert broken in text
    assert f"<div>{word('unclosed')}<strong>{word('strong')}\n</div>" in text
    stray = b"<p>One <b>two</p> three</b> <i>four\n<p>Five</span> six</p>"
    out = translated(stray, "html")[0].decode()
    assert Outline(out).same(Outline(stray.decode())) and out.count("<") == stray.count(b"<")


def test_an_untranslated_document_and_a_block_without_words_as_they_were():
    data = SAMPLE.encode()
    document = HtmlFormat.read(data)
    assert document.write(document.units) == data
    data = b"<p>Hello world</p><p> -- &rarr; </p><p><b>\xf0\x9f\x94\xac</b> 42</p>"
    out = translated(data, "html")[0].decode()
    assert out == "<p>你好世界</p><p> -- &rarr; </p><p><b>\U0001f52c</b> 42</p>"


def test_an_entity_declaration_is_not_expanded():
    data = b'<!DOCTYPE html [<!ENTITY boom "Hello world">]>\n<p>The &boom; cat</p>\n'
    out = translated(data, "html")[0].decode()
    assert out.startswith('<!DOCTYPE html [<!ENTITY boom "Hello world">]>\n<p>')
    assert f"&amp;{word('boom')};" in out and "你好" not in out  # &boom; is text


def test_a_broken_file_is_one_line_saying_so():
    with pytest.raises(BadDocument) as caught:
        HtmlFormat.read(b"<p>Hello</p>\n<p>broken \xff\xfe bytes</p>\n")
    assert "\n" not in str(caught.value) and "not valid UTF-8 (line 2)" in str(caught.value)


def test_a_glossary_term_in_bold_comes_back_bold_with_the_real_model(trained, tmp_path):
    from translator.inference.text import Translator

    src = tmp_path / "in.html"
    src.write_text(
        "<html><body><h1>Cats</h1>\n<p>Tom will buy the <b>cat</b>.</p>\n"
        '<p><a href="/see">I can see.</a></p><pre>the cat</pre></body></html>\n'
    )
    given = src.read_bytes()
    out = tmp_path / "out.html"
    Translator.from_checkpoint(trained, "cpu").translate_file(src, out, glossary={"cat": "猫咪"})
    assert src.read_bytes() == given
    written = out.read_text(encoding="utf-8")
    assert Outline(written).same(Outline(given.decode()))
    assert "<b>猫咪</b>" in written and "<pre>the cat</pre>" in written
