"""XLIFF 1.2 and 2.0 (.xliff, .xlf): a target written for each source without one, marked
for review; <g>/<pc> around the Chinese of their words, <x/>, <ph> and the like copied;
translated, final and translate="no" units, notes, comments and the declaration kept."""

from __future__ import annotations

import pytest
from documents_common import CJK, translated, word
from lxml import etree

from translator.documents.document import BadDocument
from translator.documents.formats.xliff import XliffFormat

NS1 = "urn:oasis:names:tc:xliff:document:1.2"
NS2 = "urn:oasis:names:tc:xliff:document:2.0"
V1 = f"""<?xml version="1.0" encoding="UTF-8"?>
<!-- exported by a tool -->
<xliff version="1.2" xmlns="{NS1}" xmlns:x="urn:example">
  <file original="app.txt" source-language="en" datatype="plaintext">
    <header><note>A header note</note></header>
    <body>
      <trans-unit id="1" x:origin="menu">
        <source>Hello the <g id="g1">world</g> <x id="x1"/><ph id="p1">&lt;br/&gt;</ph> today</source>
        <note><![CDATA[Say <hello> nicely]]></note>
      </trans-unit>
      <trans-unit id="2"><source>Empty target</source><target/></trans-unit>
      <trans-unit id="3"><source>Done</source><target state="final">完成</target></trans-unit>
      <trans-unit id="4" translate="no"><source>BrandName</source></trans-unit>
      <!-- a comment between units -->
      <trans-unit id="5">
        <source>The last <bpt id="b1">&lt;i&gt;</bpt>one<ept id="b1">&lt;/i&gt;</ept></source>
      </trans-unit>
    </body>
  </file>
</xliff>
""".encode()  # noqa: E501
V2 = f"""<?xml version="1.0" encoding="UTF-8"?>
<xliff version="2.0" xmlns="{NS2}" srcLang="en">
  <file id="f1">
    <unit id="u1">
      <segment>
        <source>A <pc id="1">bold</pc> word<ph id="2"/> and <mrk id="m1" translate="no">Brand</mrk>.</source>
      </segment>
      <ignorable><source> </source></ignorable>
      <segment state="final"><source>Hello</source><target>你好</target></segment>
    </unit>
  </file>
</xliff>
""".encode()  # noqa: E501


def units_of(data: bytes, name: str) -> list:
    return etree.fromstring(data).findall(f".//{{{NS1 if name == 'trans-unit' else NS2}}}{name}")


def xml(element) -> str:
    return etree.tostring(element, encoding="unicode", with_tail=False)


def child(element, name: str):
    return element.find(f"{{{etree.QName(element).namespace}}}{name}")


def test_a_target_after_each_untranslated_source_and_the_rest_kept():
    out, counts = translated(V1, "xliff")
    before, after = units_of(V1, "trans-unit"), units_of(out, "trans-unit")
    assert len(after) == len(before) == 5 and counts.units == 3
    for a, b in zip(before, after, strict=True):
        assert xml(child(a, "source")) == xml(child(b, "source"))
        assert dict(a.attrib) == dict(b.attrib)
    for unit in (after[0], after[1], after[4]):
        target = child(unit, "target")
        assert CJK.search("".join(target.itertext())) and "Hello" not in "".join(target.itertext())
        assert target.get("state") == "needs-review-translation"
        assert target.get("state-qualifier") == "mt-suggestion"
    assert xml(after[2]) == xml(before[2])  # final: as it was
    assert child(after[3], "target") is None  # translate="no"
    assert out.startswith(V1[: V1.index(b"\n  <file")])  # declaration, comment, root tag
    assert b"<note><![CDATA[Say <hello> nicely]]></note>" in out
    assert b"<!-- a comment between units -->" in out and b"<note>A header note</note>" in out
    assert b'target-language="zh-CN"' in out
    # the new target on a line of its own, indented as its source
    assert b"today</source>\n        <target " in out and b"</target>\n        <note>" in out
    assert V1.startswith(b'<?xml version="1.0" encoding="UTF-8"?>\n<!-- exported')


def test_wrappers_come_back_around_the_chinese_and_codes_are_copied():
    out, _ = translated(V1, "xliff")
    first = xml(child(units_of(out, "trans-unit")[0], "target"))
    assert f'<g id="g1">{word("world")}</g><x id="x1"/><ph id="p1">&lt;br/&gt;</ph>' in first
    last = xml(child(units_of(out, "trans-unit")[4], "target"))
    assert '<bpt id="b1">&lt;i&gt;</bpt>' in last and '<ept id="b1">&lt;/i&gt;</ept>' in last


def test_xliff_2_segments_get_targets_and_state_translated():
    out, counts = translated(V2, "xlf")
    segments = units_of(out, "segment")
    assert len(segments) == 2 and counts.units == 1
    target = child(segments[0], "target")
    assert segments[0].get("state") == "translated"
    written = xml(target)
    assert f'<pc id="1">{word("bold")}</pc>' in written and '<ph id="2"/>' in written
    assert '<mrk id="m1" translate="no">Brand</mrk>' in written  # protected: as written
    assert child(segments[1], "target").text == "你好" and segments[1].get("state") == "final"
    assert (
        b'<xliff version="2.0" xmlns="' + NS2.encode() + b'" srcLang="en" trgLang="zh-CN">' in out
    )
    assert b"<ignorable><source> </source></ignorable>" in out


def test_a_file_in_another_encoding_is_written_in_utf8():
    data = V1.replace(b'encoding="UTF-8"', b'encoding="ISO-8859-1"')
    out, _ = translated(data, "xliff")
    assert out.startswith(b"<?xml version='1.0' encoding='UTF-8'?>\n<!-- exported by a tool -->")
    target = child(units_of(out, "trans-unit")[1], "target")
    assert target.text == word("empty") + word("target")


def test_crlf_line_endings_are_kept():
    out, _ = translated(V1.replace(b"\n", b"\r\n"), "xliff")
    assert out.count(b"\n") == out.count(b"\r\n") == V1.count(b"\n") + 2  # 2 targets on new lines
    assert CJK.search(out.decode())


def test_retranslate_translates_final_targets_too():
    assert len(XliffFormat.read(V1).units) == 3
    assert len(XliffFormat.read(V1, retranslate=True).units) == 4  # never translate="no"
    asked = V1.replace(b'state="final"', b'state="needs-translation"')
    assert len(XliffFormat.read(asked).units) == 4  # a target that asks for a translation
    out, _ = translated(V2, "xlf", retranslate=True)
    final = units_of(out, "segment")[1]
    assert child(final, "target").text == word("hello") and final.get("state") == "translated"


def test_units_are_sources_with_marks_for_wrappers_and_kept_codes():
    (unit, *_) = XliffFormat.read(V1).units
    assert "".join(r.text for r in unit if not r.kept) == "Hello the world  today"
    assert len([r for r in unit if r.kept]) == 2
    assert {r.mark for r in unit if not r.kept} == {(), ((f"{{{NS1}}}g", (("id", "g1"),)),)}


BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE xliff [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;">]>
<xliff version="1.2"><file><body><trans-unit id="1"><source>&lol2;</source></trans-unit>
</body></file></xliff>"""


@pytest.mark.parametrize(
    "data",
    [
        b"<xliff version='1.2'><file><body>",
        b"<html><body>not XLIFF</body></html>",
        b"not XML at all",
        BILLION_LAUGHS,
    ],
)
def test_broken_files_and_entity_declarations_are_refused_in_one_line(data):
    with pytest.raises(BadDocument) as caught:
        XliffFormat.read(data)
    assert "\n" not in str(caught.value) and ".xliff" in str(caught.value)


def test_a_glossary_term_in_a_g_element_comes_back_inside_it_with_the_real_model(trained, tmp_path):
    from translator.inference.text import Translator

    src = tmp_path / "in.xlf"
    src.write_bytes(
        f'<?xml version="1.0" encoding="UTF-8"?>\n<xliff version="1.2" xmlns="{NS1}">'
        '<file original="a" source-language="en" datatype="plaintext"><body>\n'
        '<trans-unit id="1"><source>Tom will buy the <g id="1">cat</g>.</source></trans-unit>\n'
        '<trans-unit id="2"><source>I can.</source><target state="final">我能。</target>'
        "</trans-unit>\n</body></file></xliff>\n".encode()
    )
    given = src.read_bytes()
    out = tmp_path / "out.xlf"
    Translator.from_checkpoint(trained, "cpu").translate_file(src, out, glossary={"cat": "猫咪"})
    assert src.read_bytes() == given
    after = units_of(out.read_bytes(), "trans-unit")
    assert len(after) == 2 and child(after[1], "target").text == "我能。"
    g = child(child(after[0], "target"), "g")
    assert g.get("id") == "1" and g.text == "猫咪"
