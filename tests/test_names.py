"""Names a model does not know (data/known_words.py, decode.keep_names): the rule, the words a
prepared directory and a checkpoint carry, and the name carried through verbatim by both
engines, as a placeholder or as a term that keeps its English."""

from __future__ import annotations

import pytest
import torch

from translator.data import known_words
from translator.data.glossary import Glossary
from translator.data.layout import words_file
from translator.inference.text import Translator
from translator.model.checkpoint import load as load_checkpoint

KNOWN = frozenset(
    {"tom", "can", "see", "the", "cat", "boston", "i", "use", "at", "work", "short", "arrange"}
)


def found(text: str, exclude=()) -> list[str]:
    return [text[s:e] for s, e in known_words.unknown(text, KNOWN, exclude)]


def test_a_capitalised_word_the_model_never_saw_is_a_name():
    assert found("Do you use Wikipedia at work?") == ["Do", "Wikipedia"]
    assert found("Tom can see Boston.") == []  # seen: translated as before
    assert found("Linux's users use NASA data.") == ["Linux", "NASA"]
    assert found("linux, I, e-Mail and well-Known are not") == []  # lower case, one letter
    assert found("Visit Example now", exclude=[(6, 13)]) == ["Visit"]
    # a seen word with an English ending is a word, not a name
    assert found("Shortly, Arrangements and Cats and Using") == ["Using"]


def test_the_words_travel_from_prepare_to_the_checkpoint_and_the_export(trained, tmp_path):
    prepared = trained.parents[2] / "prepared"
    counts = known_words.read_counts(words_file(prepared))
    assert counts["the"] > 100 and "linux" not in counts
    listed = known_words.listed(load_checkpoint(trained)["source_words"])
    assert set(listed) == set(counts)
    # the tiny corpus's few words are fewer than a model needs to tell a name from a word
    assert len(listed) < known_words.FEWEST_WORDS and known_words.known(listed) is None
    assert Translator.from_checkpoint(trained, "cpu").engine.known_words is None
    pytest.importorskip("ctranslate2")
    from translator.deploy.export import export
    from translator.inference.ct2_engine import SOURCE_WORDS

    exported = export(trained, tmp_path / "ct2")
    assert (exported / SOURCE_WORDS).read_text(encoding="ascii").split("\n") == listed


@pytest.fixture
def ours(trained) -> Translator:
    """The tiny model, told the words of its corpus as a model trained on enough words
    would be (the tiny corpus has fewer than FEWEST_WORDS)."""
    translator = Translator.from_checkpoint(trained, torch.device("cpu"))
    translator.engine.known_words = frozenset(
        known_words.listed(load_checkpoint(trained)["source_words"])
    )
    return translator


def test_an_unknown_name_passes_through_verbatim(ours):
    """On a model without placeholders the name is a term that keeps its English (the
    search writes it); with decode.keep_names off it is translated as any word."""
    lines = ["Tom can see Linux.", "Mary will buy Spotify."]
    assert [p.terms for p in map(ours.prepare, lines)] == [["Linux"], ["Spotify"]]
    for found_ in ours.translate(lines, nbest=1):
        assert found_[0].text.count("Linux") + found_[0].text.count("Spotify") == 1
    off = ours.with_decode(keep_names=False)
    assert [p.terms for p in map(off.prepare, lines)] == [[], []]
    assert ours.counts["names_kept"] >= 2


def test_an_unknown_name_is_a_placeholder_on_a_model_trained_with_them(ours):
    """Where the model has placeholders, the name is carried as ⦅n⦆ and given back as
    written, as a URL is."""
    ours.terms.placeholders = True  # as a model trained with data.placeholders sees its input
    prepared = ours.prepare("I use Wikipedia at https://example.com every day.")
    assert prepared.text == "I use ⦅1⦆ at ⦅2⦆ every day."
    assert prepared.spans == ["Wikipedia", "https://example.com"]
    # a glossary term the model never saw goes the same way, its Chinese given back; one
    # it saw is placed in the translation by the model
    prepared = ours.prepare(
        "Tom can see the GPU and the cat.", Glossary.of({"GPU": "显卡", "cat": "狗"})
    )
    assert (prepared.text, prepared.spans, prepared.terms) == (
        "Tom can see the ⦅1⦆ and the cat.",
        ["显卡"],
        ["狗"],
    )
