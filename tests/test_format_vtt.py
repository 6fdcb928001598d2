"""WebVTT subtitles (.vtt): every cue translated in place; the header, NOTE, STYLE and REGION
blocks, cue identifiers, timestamps and settings byte-for-byte; <v>, <c.class>, <i>, <b>
around the Chinese of their words, timestamps inside a cue kept, &amp; escaped."""

from __future__ import annotations

import pytest
import webvtt
from documents_common import CJK, translated, word

from translator.documents.document import BadDocument
from translator.documents.formats.vtt import VttFormat


def caption(second: int, text: str, identifier=None, settings=None) -> webvtt.Caption:
    return webvtt.Caption(
        f"00:00:{second:02d}.000", f"00:00:{second + 1:02d}.500", text, identifier, settings
    )


def sample() -> bytes:
    first = caption(1, "<v Roger Bingham>Hello the <c.loud>world</c> &amp; you", "intro",
                    "align:start position:10%")  # fmt: skip
    first.comments = ["A note before the first cue"]
    captions = [
        first,
        caption(3, "Where is the <i>cat</i>?\nIt is <b>under</b> <00:03.500>the table."),
        caption(5, "♪ ♪"),
        caption(7, "<v Anna>Where are you?</v>\n<v Bob>I am here."),
    ]
    vtt = webvtt.WebVTT(
        captions=captions,
        styles=[webvtt.Style("::cue(.loud) { color: red }")],
        header_text="- Test file",
        metadata=["Kind: captions"],
        regions=[webvtt.Region(id="fred", width="40%", lines="3")],
    )
    return vtt.content.encode()


def read(data: bytes) -> webvtt.WebVTT:
    return webvtt.from_string(data.decode("utf-8-sig"))


def test_every_cue_translated_and_the_rest_kept_as_it_was():
    data = sample()
    out, counts = translated(data, "vtt")
    before, after = read(data), read(out)
    assert len(after.captions) == len(before.captions) == 4 and counts.units == 3
    fields = ("identifier", "start", "end", "settings", "comments")
    for a, b in zip(before.captions, after.captions, strict=True):
        assert [getattr(a, f) for f in fields] == [getattr(b, f) for f in fields]
    assert [s.text for s in after.styles] == [s.text for s in before.styles]
    assert (after.header_text, after.metadata) == (before.header_text, before.metadata)
    assert after.captions[2].raw_text == "♪ ♪"
    for c in after.captions[:2] + after.captions[3:]:
        assert CJK.search(c.raw_text) and not any(w in c.raw_text for w in ("Hello", "Where"))
    # everything before the first cue's text, byte for byte
    head = data[: data.index(b"<v Roger")]
    assert out.startswith(head) and b"align:start position:10%\n" in out
    assert b"REGION\nid:fred" in head and b"STYLE\n" in head and b"NOTE A note" in head
    assert data == sample()


def test_tags_come_back_around_the_chinese_of_their_words():
    after = read(translated(sample(), "vtt")[0]).captions
    assert after[0].raw_text.startswith("<v Roger Bingham>")
    assert f"<c.loud>{word('world')}</c>" in after[0].raw_text
    assert "&amp;" in after[0].raw_text  # "&" read as itself, written escaped
    assert f"<i>{word('cat')}</i>" in after[1].raw_text
    assert f"<b>{word('under')}</b>" in after[1].raw_text
    assert "<00:03.500>" in after[1].raw_text


def test_each_speaker_after_the_first_starts_a_line():
    lines = read(translated(sample(), "vtt")[0]).captions[3].lines
    assert len(lines) == 2 and lines[0].startswith("<v Anna>") and lines[0].endswith("</v>")
    assert lines[1].startswith("<v Bob>") and "</v>" not in lines[1]  # left open, as it was


def test_a_unit_is_a_cue_and_the_text_its_characters():
    units = VttFormat.read(sample()).units
    assert len(units) == 4 and units[2] == [units[2][0]]
    assert "".join(r.text for r in units[0]) == "Hello the world & you"
    assert {r.mark for r in units[0]} == {("<v Roger Bingham>",), ("<v Roger Bingham>", "<c.loud>")}
    assert [r.text for r in units[1] if r.kept] == ["<00:03.500>"]


@pytest.mark.parametrize(
    "data",
    [
        b"1\n00:00:01.000 --> 00:00:02.000\nno header\n",
        b"WEBVTT\n\n00:00:01.000 --> 00:00:02.000\n\xff\xfe\n",
    ],
)
def test_a_broken_file_is_one_line_saying_so(data):
    with pytest.raises(BadDocument) as caught:
        VttFormat.read(data)
    assert "\n" not in str(caught.value) and ".vtt" in str(caught.value)


def test_a_glossary_term_in_bold_comes_back_bold_with_the_real_model(trained, tmp_path):
    from translator.inference.text import Translator

    src = tmp_path / "in.vtt"
    vtt = webvtt.WebVTT(captions=[caption(1, "Tom will buy the <b>cat</b>."), caption(3, "I can.")])
    src.write_text(vtt.content, encoding="utf-8")
    given = src.read_bytes()
    out = tmp_path / "out.vtt"
    Translator.from_checkpoint(trained, "cpu").translate_file(src, out, glossary={"cat": "猫咪"})
    assert src.read_bytes() == given
    before, after = read(given).captions, read(out.read_bytes()).captions
    assert [(c.start, c.end) for c in after] == [(c.start, c.end) for c in before]
    assert "<b>猫咪</b>" in after[0].raw_text
