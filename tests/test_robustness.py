"""`translator eval --robustness`: the test split's variants (case, final punctuation) and
the entity suite; each sentence scored once in each variant, the suite generated from the
project's templates alone (it cannot meet the training data), the measures exact."""

import json
import re
from pathlib import Path

import pytest
from conftest import assert_one_line_error, run_cli, tiny_config, to_toml

from translator.evaluation import entities
from translator.evaluation.robustness import (
    VARIANTS,
    entity_score,
    title_cased,
    variant_scores,
    without_final_mark,
)

TATOEBA = Path(__file__).resolve().parents[2] / "shared/data/tatoeba/en-cmn.tsv"


def test_the_variants_of_a_sentence():
    assert title_cased("where is tom's cat? it's here.") == "Where Is Tom's Cat? It's Here."
    assert title_cased("I use iPhone 15") == "I Use IPhone 15"
    assert without_final_mark("Is it you?! ") == "Is it you"
    assert without_final_mark("No mark here") == "No mark here"
    assert without_final_mark("Wait... 5.99.") == "Wait... 5.99"
    assert [typed("Hi, Tom.") for typed in VARIANTS.values()] == [
        "Hi, Tom.",
        "hi, tom.",
        "HI, TOM.",
        "Hi, Tom.",
        "Hi, Tom",
    ]


class Lookup:
    """A stand-in translator: a fixed translation for each source it knows, counting the
    sentences it was given."""

    counts = {"spans_appended": 0}  # it puts no span back (decode.span_guard)

    def __init__(self, table: dict[str, str]):
        self.table, self.calls = table, []

    def translate(self, sources, split=None, nbest=None):
        self.calls.append(list(sources))
        return [self.table.get(s, "不知道") for s in sources]


def test_each_sentence_is_scored_once_in_each_variant_against_its_references():
    sources = ["Where is the station?", "I am Tom."]
    references = [["车站在哪里？", "车站在哪儿？"], ["我是汤姆。"]]
    table = {
        "Where is the station?": "车站在哪里？",
        "where is the station?": "车站在哪里？",
        "Where Is The Station?": "车站在哪里？",
        "Where is the station": "车站在哪里？",
        "I am Tom.": "我是汤姆。",
        "I Am Tom.": "我是汤姆。",
        "I am Tom": "我是汤姆。",
    }
    translator = Lookup(table)
    scores = variant_scores(translator, sources, references)
    assert [len(call) for call in translator.calls] == [2] * len(VARIANTS)
    assert scores["as it is"].bleu == pytest.approx(100) and scores["as it is"].ratio == 1
    assert scores["Title Cased"].ratio == pytest.approx(1)
    assert scores["no final punctuation"].ratio == pytest.approx(1)  # the same references
    assert scores["UPPERCASED"].bleu < 10 and scores["UPPERCASED"].ratio < 0.1
    assert 0 < scores["lowercased"].ratio < 1  # the first sentence known, "i am tom." not


def test_the_entity_suite_is_seeded_and_every_span_is_in_its_sentence():
    suite = entities.suite(len(entities.TEMPLATES) * 2)
    assert suite == entities.suite(len(entities.TEMPLATES) * 2)
    assert suite != entities.suite(len(entities.TEMPLATES) * 2, seed=2)
    assert {span.kind for s in suite for span in s.spans} == set(entities.KINDS)
    for sentence in suite:
        assert all(span.text in sentence.text for span in sentence.spans)
        assert all(entities.kept(sentence.text, sentence.spans))  # a copy keeps everything
        assert entities.invented_digit_runs(sentence.text, sentence.text) == 0
    integers = [sp.text for s in entities.suite(500) for sp in s.spans if sp.kind == "integer"]
    assert all(len(t.replace(",", "")) >= 4 for t in integers) and any("," in t for t in integers)


def test_the_single_word_names_left_the_other_sentences_as_they_were():
    """The names come after the other kinds' sentences, drawn apart: the 500 sentences of
    the default suite still hold the 586 spans quality.md's tables were measured on."""
    suite = entities.suite(500)
    assert len(suite) == 600 and sum(len(s.spans) for s in suite[:500]) == 586
    assert all(span.kind == "word name" for s in suite[500:] for span in s.spans)


@pytest.mark.skipif(not TATOEBA.is_file(), reason="the shared Tatoeba file is not here")
def test_no_entity_sentence_is_a_tatoeba_sentence():
    """The suite comes from templates, not from any corpus: none of its sentences is in
    the Tatoeba export every recipe trains on, and no single-word name is a word of its
    English (so a model trained on it has never seen them)."""
    rows = [line.split("\t") for line in TATOEBA.read_text().splitlines() if "\t" in line]
    english = {row[1] for row in rows}
    assert not {s.text for s in entities.suite(2000)} & english
    words = set(re.findall(r"[a-z]+", " ".join(english).lower()))
    assert not {name.lower() for name in entities._WORD_NAMES} & words


def test_kept_and_invented_count_each_span_and_run_once():
    two = (entities.Span("integer", "4821"), entities.Span("integer", "4821"))
    assert entities.kept("订单4821和4821", two) == [True, True]
    assert entities.kept("订单4821", two) == [True, False]
    url = entities.Span("url", "https://example.com")
    assert entities.kept("请访问https://example.com。", [url]) == [True]
    assert entities.kept("请访问https://example.cn。", [url]) == [False]
    source = "I paid $5.99 at https://example.com on 2024-03-05."
    assert entities.invented_digit_runs(source, "我在2024-03-05花了5.99美元。") == 0
    assert entities.invented_digit_runs(source, "我199300000000日元买了1000000000") == 2
    assert entities.invented_digit_runs(source, "5.99 5.99") == 2  # the second copy is extra
    assert entities.invented_digit_runs("No number here.", "没有数字。") == 0


def test_entity_score_counts_by_kind_and_names_what_was_lost():
    suite = entities.suite(len(entities.TEMPLATES))
    echo = Lookup({s.text: s.text for s in suite})
    score, lost = entity_score(echo, suite)
    assert score.kept == score.spans == sum(len(s.spans) for s in suite) and lost == []
    assert sum(n for _, n in score.by_kind.values()) == score.spans
    score, lost = entity_score(Lookup({}), suite)  # "不知道" for everything
    assert score.kept == 0 and len(lost) == len(suite) and score.invented_digit_runs == 0
    assert lost[0]["lost"] == [suite[0].spans[0].text]


def test_cli_robustness_on_the_tiny_model(trained, tmp_path):
    run = trained.parents[1]
    config = tiny_config(run.parent)
    (tmp_path / "tiny.toml").write_text(to_toml(config.to_dict()))
    given = ["-c", str(tmp_path / "tiny.toml"), "--beam", "2"]

    result = run_cli("eval", *given, "--robustness", "--entities", "40", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["variant", "BLEU", "chrF", "ratio"]
    assert [line[:22].strip() for line in lines[1:6]] == list(VARIANTS)
    assert lines[6].startswith("entities: 48 sentences,") and "kept verbatim" in lines[6]
    assert lines[7].startswith("digit runs invented:")
    written = run / "checkpoints/best.test.beam2.robustness.json"
    assert str(written) in lines[-1] and written.is_file()

    as_json = run_cli("eval", *given, "--robustness", "--entities", "40", "--json", cwd=tmp_path)
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data == json.loads(written.read_text())
    assert list(data["variants"]) == list(VARIANTS) and data["entities"]["sentences"] == 48
    original = data["variants"]["as it is"]
    assert original["ratio"] == 1.0 if original["bleu"] else original["ratio"] is None

    src = ["--src", "a.en", "--ref", "a.zh"]
    assert_one_line_error(run_cli("eval", *given, "--robustness", *src, cwd=tmp_path), "--split")
    assert_one_line_error(run_cli("eval", *given, "--json", cwd=tmp_path), "--robustness")
