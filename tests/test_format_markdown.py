"""Markdown (.md): each paragraph, heading, list item's and quote's paragraph and table cell
translated in place, its list marker, `> ` and `#`s kept; code blocks, HTML blocks, front
matter, link definitions and the table's pipes byte-for-byte; **strong**, *em* and links
around the Chinese of their words, `code`, images, autolinks and hard breaks as written."""

from __future__ import annotations

from collections import Counter

import markdown_it
import pytest
from documents_common import CJK, translated, word

from translator.documents import conversion
from translator.documents.document import BadDocument
from translator.documents.formats.markdown import MarkdownFormat

FRONT = "---\ntitle: Hello world\ntags: [a, b]\n---\n"
SAMPLE = (
    FRONT
    + """
# Hello *brave* world #

Tom & Mary **like** the [cat](https://example.com/cats?a=1&b=2 "Cats") and `the_code()`
on two lines, see ![a dog](dog.png "Dog") and <https://example.com/x_y>.

> Hello from a **quote**\x20\x20
> with a hard break.

- First *item* here
- Second item with [the docs][docs] link
  1. Nested __strong__ item

```python
print("Hello world")  # not translated
```

    indented code stays

| Name | Role |
|------|:----:|
| Tom \\| Jerry | `cat\\|mouse` |
| Mary | Hello world |

Setext heading
==============

<div class="box">
Raw HTML block stays.
</div>

[docs]: https://example.com/docs "Docs"

***
"""
)
MD = markdown_it.MarkdownIt("commonmark").enable(["table", "strikethrough"])
VERBATIM = ("fence", "code_block", "html_block")


def shape(text: str) -> tuple[Counter, list[str], list]:
    """The blocks markdown-it finds (how many of each kind), the verbatim ones' text, and
    the inline code, link targets and images."""
    tokens = MD.parse(text)
    kinds = Counter(t.type for t in tokens if t.type != "inline")
    verbatim = [t.content for t in tokens if t.type in VERBATIM]
    inline = [
        (c.type, c.content if c.type == "code_inline" else dict(c.attrs))
        for t in tokens
        if t.type == "inline"
        for c in t.children
        if c.type in ("code_inline", "link_open", "image")
    ]
    return kinds, verbatim, inline


def paragraphs(text: str) -> list[str]:
    """The text of each inline block, as markdown-it reads it."""
    return [t.content for t in MD.parse(text) if t.type == "inline"]


def test_every_block_translated_and_the_structure_and_code_kept():
    data = ("\ufeff" + SAMPLE.replace("\n", "\r\n")).encode()
    out, counts = translated(data, "md")
    text = out.decode("utf-8-sig")
    assert out.startswith(b"\xef\xbb\xbf---\r\n") and out.count(b"\n") == out.count(b"\r\n")
    before, after = shape(SAMPLE), shape(text.replace("\r\n", "\n"))
    assert after == before  # as many paragraphs, headings, items, cells; code identical
    assert before[0]["td_open"] == 4 and before[0]["list_item_open"] == 3
    assert text.startswith(FRONT.replace("\n", "\r\n"))  # front matter as it stands
    assert '[docs]: https://example.com/docs "Docs"\r\n\r\n***\r\n' in text
    assert "|------|:----:|\r\n" in text and '<div class="box">\r\n' in text
    for block in paragraphs(text.replace("\r\n", "\n"))[1:]:  # [0]: the front matter
        assert CJK.search(block) or block == "`cat|mouse`", block
    body = text[len(FRONT) + 4 :].split("```")  # code between the fences
    for english in ("Hello", "brave", "Mary", "item", "Nested", "Setext", "Role"):
        assert english not in body[0] + body[2].split("<div")[0]
    assert counts.units == 12  # 13 blocks: `cat|mouse` has no words


def test_formatting_comes_back_around_the_chinese_of_its_words():
    text = translated(SAMPLE.encode(), "md")[0].decode()
    assert f"# {word('hello')}*{word('brave')}*{word('world')} #\n" in text
    assert f'**{word("like")}**[{word("cat")}](https://example.com/cats?a=1&b=2 "Cats")' in text
    assert "`the_code()`" in text and '![a dog](dog.png "Dog")' in text
    assert "<https://example.com/x_y>" in text
    assert f"[{word('docs')}][docs]" in text  # a reference link still finds its definition
    assert f"  1. {word('nested')}**{word('strong')}**" in text  # __ beside Chinese: **
    assert f"| {word('tom')}\\|{word('jerry')} | `cat\\|mouse` |" in text


def test_a_paragraph_is_one_unit_written_on_its_first_line_with_its_prefixes():
    document = MarkdownFormat.read(SAMPLE.encode())
    texts = ["".join(run.text for run in unit) for unit in document.units]
    assert "Tom & Mary like the cat and `the_code()` on two lines, see " in texts[1]
    assert [run.text for run in document.units[2] if run.kept] == ["  \n> "]  # hard break
    text = translated(SAMPLE.encode(), "md")[0].decode()
    lines = text.splitlines()
    quote = lines.index(next(line for line in lines if line.startswith("> ")))
    assert lines[quote].endswith("  ") and lines[quote + 1].startswith("> ")
    assert lines[quote + 2] == ""  # the quote's two lines, the hard break between them
    assert [line[:2] for line in lines if line.startswith(("- ", "  1."))] == ["- ", "- ", "  "]
    setext = lines.index("==============")
    assert CJK.search(lines[setext - 1]) and lines[setext - 2] == ""


def test_markdown_in_a_translation_is_escaped():
    literal = "#1. *not* _em_ [x] <b>a</b> `c` a|b &amp;"

    def translate(request):
        return [literal for _ in request.texts]

    data = b"Hello world.\n\n| h |\n|---|\n| Hello |\n"
    out = conversion.translated(MarkdownFormat.read(data), translate)[0].decode()
    tokens = MD.parse(out)
    assert Counter(t.type for t in tokens)["paragraph_open"] == 1 and shape(out) == shape(
        data.decode()
    )
    for inline in (t for t in tokens if t.type == "inline"):
        assert [c.type for c in inline.children] == ["text"]
        assert inline.children[0].content == literal


def test_a_block_without_words_and_an_untranslated_document_as_they_were():
    data = b"Hello world\n\n- ---\n- ... %\n\n***\n\n|a|\n|-|\n|:)|\n"
    document = MarkdownFormat.read(data)
    assert document.write(document.units) == data
    out = translated(data, "md")[0]  # "a" comes back empty: a block is never emptied
    assert out == data.replace(b"Hello world", "你好世界".encode())


def test_a_broken_file_is_one_line_saying_so():
    with pytest.raises(BadDocument) as caught:
        MarkdownFormat.read(b"# Title\n\nbroken \xff\xfe bytes\n")
    assert "\n" not in str(caught.value) and "not valid UTF-8 (line 3)" in str(caught.value)


def test_a_glossary_term_in_bold_comes_back_bold_with_the_real_model(trained, tmp_path):
    from translator.inference.text import Translator

    src = tmp_path / "in.md"
    src.write_text("# Cats\n\nTom will buy the **cat**.\n\n- I can see.\n\n```\nthe cat\n```\n")
    given = src.read_bytes()
    out = tmp_path / "out.md"
    Translator.from_checkpoint(trained, "cpu").translate_file(src, out, glossary={"cat": "猫咪"})
    assert src.read_bytes() == given
    written = out.read_text(encoding="utf-8")
    assert shape(written) == shape(given.decode())
    assert "**猫咪**" in written and written.endswith("```\nthe cat\n```\n")
