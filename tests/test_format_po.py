"""gettext catalogs (.po): untranslated entries filled and marked fuzzy, their placeholders
and tags as written; entries translated already, obsolete ones and the rest of the file
byte-for-byte; plurals by the header's nplurals; retranslate fills the translated too."""

from __future__ import annotations

import re
import shutil
import subprocess

import polib
import pytest
from documents_common import CJK, translated, word

from translator.documents.document import BadDocument
from translator.documents.formats.po import PoFormat

PLACEHOLDER = re.compile(r"%\(\w+\)[sd]|%\d\$s|%[sd%]|\{\w*\}|</?\w+[^>]*>")
TRANSLATED = polib.POEntry(msgid="Open", msgstr="打开", msgctxt="menu", occurrences=[("a.py", "3")])


def catalog(plural_forms: str = "nplurals=1; plural=0;", language: str = "") -> polib.POFile:
    po = polib.POFile(wrapwidth=78)
    po.header = "Chinese translation of the garden app."
    po.metadata = {"Project-Id-Version": "garden 1.0", "Content-Type": "text/plain; charset=UTF-8"}
    if language:
        po.metadata["Language"] = language
    po.metadata["Plural-Forms"] = plural_forms
    entries = [
        polib.POEntry(msgid="Hello %(name)s, the world is green today", flags=["python-format"],
                      occurrences=[("garden/app.tsx", "10"), ("garden/view.tsx", "22")],
                      comment="Shown at the top"),
        TRANSLATED,
        polib.POEntry(msgid="Open the <b>cat</b> door {0} now", flags=["python-brace-format"]),
        polib.POEntry(msgid="Copied %1$s of %2$s (100%%)", flags=["c-format"]),
        polib.POEntry(msgid="One cat", msgid_plural="%d cats", msgstr_plural={0: ""},
                      flags=["c-format"]),
        polib.POEntry(msgid="Old text", msgstr="旧的", flags=["fuzzy"], previous_msgid="Older"),
        polib.POEntry(msgid="Line one\nLine two", tcomment="Two lines"),
        polib.POEntry(msgid="Gone", msgstr="走了", obsolete=True),
    ]  # fmt: skip
    po.extend(entries)
    return po


def sample(**header) -> bytes:
    return str(catalog(**header)).encode()


def entries(data: bytes) -> list[polib.POEntry]:
    return list(polib.pofile(data.decode()))


def test_untranslated_entries_filled_fuzzy_and_the_rest_kept_byte_for_byte():
    data = sample()
    out, counts = translated(data, "po")
    before, after = entries(data), entries(out)
    assert len(after) == len(before) and counts.units == 5
    for a, b in zip(before, after, strict=True):
        assert (a.msgid, a.msgid_plural, a.msgctxt, a.obsolete) == (
            b.msgid,
            b.msgid_plural,
            b.msgctxt,
            b.obsolete,
        )
        assert (a.occurrences, a.comment, a.tcomment, a.previous_msgid) == (
            b.occurrences,
            b.comment,
            b.tcomment,
            b.previous_msgid,
        )
    filled = [b for a, b in zip(before, after, strict=True) if not (a.msgstr or a.obsolete)]
    for entry in filled:
        assert "fuzzy" in entry.flags and CJK.search(entry.msgstr or entry.msgstr_plural[0])
    for kept in (str(TRANSLATED), str(before[5]), str(before[7])):  # translated, fuzzy, obsolete
        assert kept.encode() in out
    assert out.startswith(b"# Chinese translation of the garden app.\n")
    header = polib.pofile(out.decode()).metadata
    assert header["Language"] == "zh_CN" and header["Project-Id-Version"] == "garden 1.0"
    assert after[6].msgstr.count("\n") == 1  # the line break inside kept where it stood
    assert data == sample()


def test_every_placeholder_and_tag_of_a_msgid_is_in_its_msgstr(tmp_path):
    out, _ = translated(sample(), "po")
    for entry in entries(out):
        if entry.obsolete or not entry.msgid:
            continue
        source = entry.msgid_plural or entry.msgid
        written = entry.msgstr_plural[0] if entry.msgid_plural else entry.msgstr
        assert sorted(PLACEHOLDER.findall(source)) == sorted(PLACEHOLDER.findall(written))
    brace = entries(out)[2].msgstr
    assert f"<b>{word('cat')}</b>" in brace and "{0}" in brace
    if shutil.which("msgfmt"):
        (tmp_path / "out.po").write_bytes(out)
        check = ["msgfmt", "--check-format", "--use-fuzzy", "-o", "/dev/null", "out.po"]
        subprocess.run(check, cwd=tmp_path, check=True, capture_output=True)


def test_plurals_follow_the_headers_nplurals():
    one = entries(translated(sample(), "po")[0])[4]
    assert list(one.msgstr_plural) == [0] and one.msgstr_plural[0].startswith("%d")
    data = sample(plural_forms="nplurals=2; plural=(n != 1);", language="zh_TW")
    two = entries(translated(data, "po")[0])[4]
    assert list(two.msgstr_plural) == [0, 1] and "%d" not in two.msgstr_plural[0]
    assert two.msgstr_plural[0] == word("one") + word("cat")
    assert two.msgstr_plural[1].startswith("%d")
    assert polib.pofile(translated(data, "po")[0].decode()).metadata["Language"] == "zh_TW"


def test_retranslate_fills_translated_and_fuzzy_entries_but_never_obsolete_ones():
    data = sample()
    assert len(PoFormat.read(data).units) == 5
    assert len(PoFormat.read(data, retranslate=True).units) == 7
    after = entries(translated(data, "po", retranslate=True)[0])
    assert after[1].msgstr == word("open") and "fuzzy" in after[1].flags
    assert after[5].msgstr == word("old") + word("text") and after[5].previous_msgid == "Older"
    assert (after[7].msgstr, after[7].obsolete) == ("走了", True)


def test_units_keep_placeholders_tags_and_line_breaks_as_they_stand():
    units = PoFormat.read(sample()).units
    assert [r.text for r in units[0] if r.kept] == ["%(name)s"]
    assert [r.text for r in units[1] if r.kept] == ["<b>", "</b>", "{0}"]
    assert [r.text for r in units[2] if r.kept] == ["%1$s", "%2$s", "%%"]
    assert [r.text for r in units[4] if r.kept] == ["\n"]
    plain = polib.POFile()
    plain.append(polib.POEntry(msgid="Save 50% off now"))  # no flag: "% o" is words
    assert not any(r.kept for r in PoFormat.read(str(plain).encode()).units[0])


@pytest.mark.parametrize(
    "data", [b"this is not a catalog\n", b"/etc/passwd", b'msgid "x"\n\xff\xfe\n']
)
def test_a_broken_file_is_one_line_saying_so(data):
    with pytest.raises(BadDocument) as caught:
        PoFormat.read(data)
    assert "\n" not in str(caught.value) and ".po" in str(caught.value)


def test_a_glossary_term_inside_tags_comes_back_with_the_real_model(trained, tmp_path):
    from translator.inference.text import Translator

    po = polib.POFile()
    po.metadata = {"Content-Type": "text/plain; charset=UTF-8"}
    po.append(polib.POEntry(msgid="Tom will buy the <b>cat</b>."))
    po.append(TRANSLATED)
    src = tmp_path / "in.po"
    src.write_text(str(po), encoding="utf-8")
    given = src.read_bytes()
    out = tmp_path / "out.po"
    Translator.from_checkpoint(trained, "cpu").translate_file(src, out, glossary={"cat": "猫咪"})
    assert src.read_bytes() == given
    after = entries(out.read_bytes())
    assert len(after) == 2 and str(after[1]) == str(TRANSLATED)
    assert "猫咪" in after[0].msgstr and "fuzzy" in after[0].flags
    assert after[0].msgstr.count("<b>") == after[0].msgstr.count("</b>") == 1


def test_a_file_written_without_wrapping_gets_its_entries_unwrapped():
    po = catalog()
    po.wrapwidth = 0
    long = " ".join(["The garden cat sat on the red mat"] * 8)
    po.append(polib.POEntry(msgid=long, occurrences=[("a.py", "1")]))
    out = translated(str(po).encode(), "po")[0].decode()
    assert f'msgid "{long}"\n' in out and re.search(r'\nmsgstr "[^"\n]{80,}"\n', out)
    po.wrapwidth = 78  # a file wrapped as gettext wraps it: the new msgstr wrapped too
    out = translated(str(po).encode(), "po")[0].decode()
    assert 'msgid ""\n"The garden' in out and not re.search(r'\nmsgstr "[^"\n]{80,}"\n', out)


def test_a_file_without_a_header_keeps_its_comments_and_gets_no_header():
    data = b'\n# A comment\n#. For translators\nmsgid "Hello world"\nmsgstr ""\n\n'
    data += b'msgid "Bye"\nmsgstr "x"'  # no line ending at its end
    out = translated(data, "po")[0]
    assert out == data.replace(b'msgid "Hello', b'#, fuzzy\nmsgid "Hello').replace(
        b'msgstr ""', 'msgstr "你好世界"'.encode()
    )


def test_a_splice_that_does_not_read_back_is_written_whole_by_polib(monkeypatch):
    from translator.documents.formats import po

    monkeypatch.setattr(po, "splice", lambda text, *rest: text)  # as if nothing were filled
    after = entries(translated(sample(), "po")[0])
    assert len(after) == 8 and CJK.search(after[0].msgstr) and after[1].msgstr == "打开"
