"""SubRip subtitles (.srt): every cue translated in place, its number, timestamps and what
follows them byte-for-byte, <b>/<i>/<font> around the Chinese of their words, {\\an8} and
dialogue dashes kept, line endings and a BOM kept."""

from __future__ import annotations

from datetime import timedelta

import pytest
import srt
from documents_common import CJK, translated, word

from translator.documents.document import BadDocument
from translator.documents.formats.srt import SrtFormat


def cue(index: int, text: str, proprietary: str = "") -> srt.Subtitle:
    start = timedelta(seconds=2 * index, milliseconds=250)
    return srt.Subtitle(index, start, start + timedelta(seconds=1.5), text, proprietary)


CUES = [
    cue(1, "{\\an8}Hello the <b>world</b>!", "X1:100 X2:200 Y1:10 Y2:20"),
    cue(2, "- Where is the <i>cat</i>?\n- Under the table."),
    cue(3, "♪ ♪"),
    cue(4, 'The <font color="#ff0000">red</font> light means\nyou stop, and the green go.'),
    cue(5, "One two three four,\nfive six seven eight."),
]


def sample(newline: str = "\n", bom: bool = False) -> bytes:
    text = srt.compose(CUES, reindex=False).replace("\n", newline)
    return (b"\xef\xbb\xbf" if bom else b"") + text.encode()


def parsed(data: bytes) -> list[srt.Subtitle]:
    return list(srt.parse(data.decode("utf-8-sig")))


def test_every_cue_translated_and_its_numbers_times_and_settings_kept():
    data = sample("\r\n", bom=True)
    out, counts = translated(data, "srt")
    before, after = parsed(data), parsed(out)
    assert len(after) == len(before) and counts.units == 4
    for a, b in zip(before, after, strict=True):
        assert (a.index, a.start, a.end, a.proprietary) == (b.index, b.start, b.end, b.proprietary)
    assert after[2].content == "♪ ♪"  # no words: as it was
    for sub in after[:2] + after[3:]:
        assert CJK.search(sub.content)
        assert not any(w in sub.content for w in ("Hello", "world", "Where", "table", "stop"))
    assert out.startswith(b"\xef\xbb\xbf1\r\n") and out.count(b"\n") == out.count(b"\r\n")
    assert b"X1:100 X2:200 Y1:10 Y2:20\r\n" in out
    assert data == sample("\r\n", bom=True)  # the input bytes untouched


def test_tags_come_back_around_the_chinese_of_their_words():
    after = parsed(translated(sample(), "srt")[0])
    assert after[0].content.startswith("{\\an8}") and f"<b>{word('world')}</b>" in after[0].content
    assert f'<font color="#ff0000">{word("red")}</font>' in after[3].content
    assert f"<i>{word('cat')}</i>" in after[1].content


def test_dialogue_dashes_start_their_lines_and_a_long_cue_breaks_at_a_comma():
    after = parsed(translated(sample(), "srt")[0])
    lines = after[1].content.split("\n")
    assert len(lines) == 2 and all(line.startswith("- ") for line in lines)
    assert lines[1] == "- " + word("under") + word("table") + "."
    two = after[4].content.split("\n")  # "four," stands near the middle of the Chinese
    assert len(two) == 2 and two[0].endswith(",") and CJK.search(two[1])
    assert after[0].content.count("\n") == 0  # one line stays one line


def test_units_are_cues_and_an_unclosed_tag_is_not_closed_for_it():
    data = srt.compose([cue(1, "<i>An open line\nand more")]).encode()
    (unit,) = SrtFormat.read(data).units
    assert {run.mark for run in unit} == {("<i>",)}
    assert "".join(run.text for run in unit) == "An open line and more"
    out = parsed(translated(data, "srt")[0])[0].content
    assert out.startswith("<i>") and "</i>" not in out and CJK.search(out)


@pytest.mark.parametrize(
    "data",
    [
        b"this is not a subtitle file\n",
        b"1\n00:00:01,000 --> 00:00:02,000\nHello\n\n2\n00:00:03 --> later\nBye\n",
        b"1\n00:00:01,000 --> 00:00:02,000\n\xff\xfe broken bytes\n",
    ],
)
def test_a_broken_file_is_one_line_saying_so(data):
    with pytest.raises(BadDocument) as caught:
        SrtFormat.read(data)
    assert "\n" not in str(caught.value) and ".srt" in str(caught.value)


def test_a_glossary_term_in_bold_comes_back_bold_with_the_real_model(trained, tmp_path):
    from translator.inference.text import Translator

    src = tmp_path / "in.srt"
    src.write_text(srt.compose([cue(1, "Tom will buy the <b>cat</b>."), cue(2, "I can see.")]))
    given = src.read_bytes()
    out = tmp_path / "out.srt"
    Translator.from_checkpoint(trained, "cpu").translate_file(src, out, glossary={"cat": "猫咪"})
    assert src.read_bytes() == given
    before, after = parsed(given), parsed(out.read_bytes())
    assert [(s.index, s.start, s.end) for s in after] == [(s.index, s.start, s.end) for s in before]
    assert "<b>猫咪</b>" in after[0].content
