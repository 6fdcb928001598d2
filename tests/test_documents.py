"""What every format shares: units translated with their inline markup kept around the
words it covers (inline.py), zip and XML checks before any library unpacks a file
(package.py), the formats found by name, and `translate --input FILE` on documents."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from conftest import assert_one_line_error, run_cli
from documents_common import CJK, fake_translate, translated, zipped

from translator.documents import conversion, inline, package
from translator.documents.document import (
    FORMATS,
    BadDocument,
    Run,
    format_name,
    library,
)
from translator.errors import UserError


def run(units, translate=fake_translate):
    counts = inline.Counts()
    return inline.run(units, translate, counts), counts


def test_a_formatted_word_is_wrapped_around_its_translation_wherever_it_goes():
    order_swapped = lambda request: [  # noqa: E731  the words' order reversed, as Chinese may
        "".join(reversed(text)) for text in fake_translate(request)
    ]
    units = [[Run("Hello "), Run("world", "bold"), Run(" today.")]]
    (out,), counts = run(units, order_swapped)
    bold = [r.text for r in out if r.mark == "bold"]
    assert bold == ["".join(reversed(fake_translate(inline.Request(["world"]))[0]))]
    assert "".join(r.text for r in out if r.mark is None)  # the rest, plain
    assert (counts.units, counts.spans, counts.spans_unplaced) == (1, 1, 0)


def test_the_mark_most_characters_have_is_the_units_own():
    units = [[Run("A long sentence of words", "font"), Run(" here", "italic")]]
    (out,), _ = run(units)
    assert {r.mark for r in out} == {"font", "italic"}
    assert (
        "".join(r.text for r in out if r.mark == "italic")
        == fake_translate(inline.Request(["here"]))[0]
    )


def test_kept_runs_come_back_as_they_were_and_where_the_model_put_them():
    code = Run("%(count)d", None, kept=True)
    image = Run("", ("drawing", 3), kept=True)
    units = [[image, Run("You have "), code, Run(" new messages")]]
    (out,), counts = run(units)
    assert out[0] is image  # at the start, as it was: never sent to the model
    assert code in out and out.index(code) > 1  # where its stand-in came back
    assert counts.kept_moved == 0

    def dropping(request):  # a model that drops every stand-in
        return [t.split(inline._PREFIXES[0])[0] for t in fake_translate(request)]

    (out,), counts = run(units, dropping)
    assert out[-1] == code and counts.kept_moved == 1  # at the end, never lost


def test_a_span_the_first_pass_does_not_place_is_asked_for_as_a_glossary_term():
    calls = []

    def forgetful(request):  # writes a span's words only when the terms ask for them
        calls.append(request)
        out = fake_translate(request)
        if request.terms:
            return out
        return [
            o if t == "world" else o.replace("世界", "")
            for t, o in zip(request.texts, out, strict=True)
        ]

    units = [[Run("Hello "), Run("world", "b"), Run(" today")]]
    (out,), counts = run(units, forgetful)
    assert len(calls) == 2 and calls[1].terms == {"world": "世界"}
    assert [r.text for r in out if r.mark == "b"] == ["世界"] and counts.spans_unplaced == 0

    def never(request):  # writes the span's words alone, never in its sentence
        return ["世界" if text == "world" else "今天。" for text in request.texts]

    # its formatting goes around its sentence's translation (a link keeps its target)
    units = [[Run("Hello "), Run("world", "b"), Run(" today. Goodbye.")]]
    (out,), counts = run(units, never)
    assert [(r.text, r.mark) for r in out] == [("今天", "b"), ("。今天。", None)]
    assert (counts.spans_near, counts.spans_unplaced) == (1, 0)


def test_units_without_words_and_blank_edges_come_back_unchanged():
    blank = [Run("  "), Run("—", "b")]
    edged = [Run("  Hello world  ")]
    (same, out), counts = run([blank, edged])
    assert same == blank and counts.units == 1
    assert out[0].text == "  " and out[-1].text == "  " and CJK.search(out[1].text)


def test_each_distinct_text_is_translated_once():
    seen = []

    def counting(request):
        seen.extend(request.texts)
        return fake_translate(request)

    run([[Run("Hello world")]] * 50 + [[Run("Hello "), Run("world", "b")]] * 50, counting)
    assert sorted(seen) == ["Hello world", "world"]


def test_a_zip_bomb_is_refused_before_anything_is_unpacked(monkeypatch):
    with pytest.raises(BadDocument, match="zip bomb"):
        package.checked_zip(zipped({"word/document.xml": b"\0" * 4_000_000}), "the file")
    monkeypatch.setattr(package, "MAX_UNPACKED", 1000)
    with pytest.raises(BadDocument, match="unpacks to 2,000 bytes"):
        package.checked_zip(zipped({"a": b"x" * 1000, "b": b"y" * 1000}), "the file")
    monkeypatch.setattr(package, "MAX_MEMBERS", 2)
    with pytest.raises(BadDocument, match="3 members"):
        package.checked_zip(zipped({"a": b"", "b": b"", "c": b""}), "the file")


def test_xml_that_declares_entities_and_a_broken_zip_are_refused():
    laughs = b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;">]><l>&b;</l>'
    with pytest.raises(BadDocument, match="entities"):
        package.checked_zip(zipped({"content.xml": laughs}), "the .odt file")
    with pytest.raises(BadDocument, match="entities"):
        package.check_xml(laughs.decode().encode("utf-16-le"), "the file")
    with pytest.raises(BadDocument, match="not a readable zip"):
        package.checked_zip(b"PK\x03\x04 broken", "the .docx file")
    package.checked_zip(zipped({"content.xml": b"<!DOCTYPE html><p>fine</p>"}), "the file")


def test_formats_are_found_by_extension_and_a_missing_library_names_its_extra(monkeypatch):
    assert {"txt", "md", "html", "htm", "srt", "vtt", "docx", "pptx", "odt", "epub", "po"} <= set(
        FORMATS.names()
    ) and {"xliff", "xlf"} <= set(FORMATS.names())
    assert format_name("Report.DOCX") == "docx" and format_name("a.txt", "html") == "html"
    with pytest.raises(UserError, match="no such document format.*docx"):
        format_name("slides.key")
    monkeypatch.setitem(sys.modules, "docx", None)  # as if python-docx were not installed
    with pytest.raises(
        UserError, match=r'needs the "docx" extra: pip install "translator\[docx\]"'
    ):
        library("docx", "docx", ".docx")


def test_text_keeps_blank_lines_line_endings_and_a_bom():
    data = "\ufeffHello world.\r\n\r\nThe cat is here.\n".encode()
    out, counts = translated(data, "txt")
    assert out.startswith(b"\xef\xbb\xbf") and out.count(b"\r\n") == 2 and out.endswith(b"\n")
    assert len(out.splitlines()) == 3 and counts.units == 2
    with pytest.raises(BadDocument, match="not valid UTF-8"):
        translated(b"ok\n\xff\n", "txt")


@pytest.fixture(scope="module")
def config_file(trained, tmp_path_factory) -> Path:
    from conftest import tiny_config, to_toml

    path = tmp_path_factory.mktemp("documents") / "tiny.toml"
    path.write_text(to_toml(tiny_config(trained.parents[2]).to_dict()))
    return path


def test_translate_reads_a_document_by_its_extension_and_never_writes_over_it(
    config_file, tmp_path
):
    page = tmp_path / "page.txt"
    page.write_bytes(b"The cat is here.\n\nTom can see the cat.\n")
    before = page.read_bytes()
    out = tmp_path / "page.zh.txt"
    (tmp_path / "terms.tsv").write_text("cat\t猫咪\n", encoding="utf-8")
    options = ("--format", "txt", "--glossary", tmp_path / "terms.tsv")
    result = run_cli("translate", "-c", config_file, "-i", page, "-o", out, *options, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3 and "猫咪" in lines[0] and lines[1] == "" and "猫咪" in lines[2]
    result = run_cli(
        "translate", "-c", config_file, "-i", page, "--format", "md", "-o", page, cwd=tmp_path
    )
    assert_one_line_error(result, "would overwrite the input")
    assert page.read_bytes() == before


@pytest.mark.parametrize(
    "name, data, fragment",
    [
        ("broken.docx", b"PK\x03\x04 not a zip", "not a readable zip"),
        ("bomb.docx", zipped({"word/document.xml": b"\0" * 4_000_000}), "zip bomb"),
        ("notes.md", b"\xff\xfe", "not valid UTF-8"),
        ("deck.key", b"x", "--format"),
    ],
)
def test_a_file_that_cannot_be_read_is_one_line_and_exit_2(
    config_file, tmp_path, name, data, fragment
):
    path = tmp_path / name
    path.write_bytes(data)
    options = ("--format", "key") if name.endswith(".key") else ()
    out = tmp_path / "out"
    result = run_cli("translate", "-c", config_file, "-i", path, "-o", out, *options, cwd=tmp_path)
    assert_one_line_error(result, fragment)
    assert path.read_bytes() == data


def broken_deflate() -> bytes:
    """A zip whose one member's deflate stream is damaged (its sizes intact)."""
    data = bytearray(zipped({"word/document.xml": b"<w:document>" + b"word " * 2000 + b"</w>"}))
    at = data.index(b"word/document.xml") + len("word/document.xml") + 10
    data[at : at + 20] = b"\xff" * 20
    return bytes(data)


def test_a_damaged_or_encrypted_zip_is_one_line_never_a_library_error():
    with pytest.raises(BadDocument, match="not a readable zip"):
        package.checked_zip(broken_deflate(), "the .docx file")
    encrypted = bytearray(zipped({"content.xml": b"<x/>"}))
    for header in (b"PK\x03\x04", b"PK\x01\x02"):  # the encrypted flag, local and central
        at = encrypted.index(header) + (6 if header == b"PK\x03\x04" else 8)
        encrypted[at] |= 1
    with pytest.raises(BadDocument, match="not a readable zip"):
        package.checked_zip(bytes(encrypted), "the .odt file")


def test_what_a_library_raises_unforeseen_is_one_line(monkeypatch):
    class Fragile:  # a format whose library fails in a way no check foresaw
        @classmethod
        def read(cls, data, retranslate=False):
            raise KeyError("word/document.xml")

    monkeypatch.setattr(FORMATS, "_added", {"fragile": Fragile})
    with pytest.raises(BadDocument, match="the .fragile file cannot be read: KeyError"):
        conversion.read(b"x", "fragile")


def test_a_server_refuses_markup_far_beyond_the_characters_it_translates():
    page = b"<p>" + b"<i>x</i>" * 10_000 + b"</p>"
    with pytest.raises(BadDocument, match="bytes of markup"):
        conversion.read(page, "html", max_chars=1000)
    assert conversion.read(page, "html").units  # the CLI reads any size


def test_spans_differing_only_in_case_ask_for_one_term():
    calls = []

    def forgetful(request):
        calls.append(request)
        return [
            t if request.terms or " " not in s else ""
            for s, t in zip(request.texts, fake_translate(request), strict=True)
        ]

    units = [[Run("Press "), Run("Save", "b"), Run(" now.")], [Run("Then "), Run("SAVE", "i")]]
    run(units, forgetful)
    assert len(calls) == 2 and len(calls[1].terms) == 1


def test_many_kept_runs_and_a_stand_in_written_twice_leave_no_stand_in_in_the_text():
    kept = [Run(f"<x{i}/>", i, kept=True) for i in range(120)]
    unit = [r for i in range(120) for r in (Run(f"word{i} "), kept[i])] + [Run("end")]
    (out,), counts = run([unit])
    assert sorted(r.mark for r in out if r.kept) == list(range(120))  # each once
    assert not any(inline._PREFIXES[0] in r.text for r in out if not r.kept)

    def twice(request):  # writes every stand-in twice
        return [re.sub(r"(QZ-\d+)", r"\1 \1", t) for t in fake_translate(request)]

    (out,), counts = run([[Run("Type "), Run("%s", "ph", kept=True), Run(" here.")]], twice)
    assert sum(r.kept for r in out) == 1 and not any("QZ" in r.text for r in out)


def test_every_link_of_a_long_paragraph_keeps_its_target():
    links = "".join(f'Read <a href="/p{i}">page {i}</a> now. ' for i in range(100))
    out, counts = translated(f"<p>{links}</p>".encode(), "html")
    assert all(f'href="/p{i}"' in out.decode() for i in range(100))
    assert counts.spans == 100 and counts.spans_unplaced == 0


def test_markdown_emphasis_beside_chinese_punctuation_stays_emphasis():
    from markdown_it import MarkdownIt

    from translator.documents.formats.markdown import MarkdownFormat

    document = MarkdownFormat.read(b"I read **The Book** today.\n")
    base, mark = document.units[0][0].mark, document.units[0][1].mark
    written = document.write([[Run("我今天读了", base), Run("《书》", mark), Run("。", base)]])
    assert "<strong>《书》</strong>" in MarkdownIt().render(written.decode())


def test_a_span_placed_by_its_characters_comes_before_one_that_takes_its_sentence():
    def model(request):  # "apparently" alone reads nothing like it does in its sentence
        alone = {"apparently": "一个高兴趣", "done that": "把那件事"}
        return [alone.get(t, "汤姆已经完成了那件事。") for t in request.texts]

    unit = [Run("Tom has "), Run("apparently", "b"), Run(" "), Run("done that", "i"), Run(".")]
    (out,), counts = run([unit], model)
    assert [r.text for r in out if r.mark == "i"] == ["那件事"]  # near its words
    assert [r.text for r in out if r.mark == "b"] == ["汤姆已经完成了"]  # its sentence's rest
    assert (counts.spans_near, counts.spans_unplaced) == (2, 0)


def test_a_unit_of_thousands_of_sentences_and_spans_costs_its_length():
    """A unit's sentences joined with their places known in one pass, and spans over sentence
    boundaries given to each sentence they cover (scripts/bench_documents.py times it)."""
    from translator.data.splitting import join
    from translator.documents.inline import joined

    parts = [f"句子{i}。" if i % 3 else f"Tom{i}" for i in range(3000)]
    text, ranges = joined(parts)
    assert text == join(parts) and all(
        text[a:b] == p for (a, b), p in zip(ranges, parts, strict=True)
    )
    unit = []
    for i in range(300):
        unit += [Run(f"Word{i} is here. "), Run(f"Then bold{i}. Next{i}", ("b", i % 2))]
    (out,), counts = run([unit])
    assert counts.spans == 600 and counts.spans_unplaced == 0  # each span, a part a sentence
