"""decode.recase: a line in ALL CAPS, Title Case or lower case is put in ordinary case
before translating, from the source tokenizer's vocabulary; any other line is untouched."""

import pytest

from translator.inference.casing import Recaser, case_kind, cased_forms

PIECES = ["▁Tom", "▁Mary", "▁I", "▁TV", "▁The", "▁the", "▁where", "▁is", "▁cat", "s", "▁Git"]


def test_the_forms_come_from_capitalised_pieces_without_a_lower_case_twin():
    assert cased_forms(PIECES) == {"tom": "Tom", "mary": "Mary", "i": "I", "tv": "TV", "git": "Git"}


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("WHERE IS TOM'S CAT?", "upper"),
        ("I'M HERE.", "upper"),
        ("Where Is Tom's Cat?", "title"),
        ("where is tom's cat?", "lower"),
        ("hello", "lower"),
        ("Tom and Mary went to Boston.", None),
        ("Tom Jackson.", None),  # two capitalised words: a name, not Title Case
        ("OK.", None),
        ("NASA", None),
        ("I paid $5.99 at https://example.com on 2024-03-05.", None),
        ("12345 678", None),
    ],
)
def test_the_kind_of_case(text, kind):
    assert case_kind(text) == kind


def test_each_kind_becomes_ordinary_case_and_other_lines_stay_as_written():
    recase = Recaser.from_pieces(PIECES)
    ordinary = "Where is Tom's cat?"
    assert {
        recase(t) for t in ("WHERE IS TOM'S CAT?", "Where Is Tom's Cat?", "where is tom's cat?")
    } == {ordinary}
    assert recase("i think mary has a tv. she likes it!") == "I think Mary has a TV. She likes it!"
    assert recase("I'M HERE.") == "I'm here."
    for text in ("Tom and Mary went to Boston.", "where is TOM", "Hi, Tom.", "OK."):
        assert recase(text) == text or case_kind(text) == "lower"


def test_spans_and_inner_capitals_are_kept():
    recase = Recaser.from_pieces(PIECES)
    assert (
        recase("please visit https://Example.com/A now") == "Please visit https://Example.com/A now"
    )
    assert recase("I Use GitHub And iPhone Every Day.") == "I use GitHub and iPhone every day."
    assert (
        recase("SEND 5.99 TO TOM@MAIL.COM, ORDER KX-4821.")
        == "Send 5.99 to TOM@MAIL.COM, order KX-4821."
    )
    assert recase("I USE GITHUB.") == "I use github."  # all capitals: nothing tells GitHub apart
