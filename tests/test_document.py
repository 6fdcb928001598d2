"""Document mode: lines split into sentences, long sentences cut into pieces, translations
joined back with exactly one output line per input line."""

import json
import logging
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli

from translator.data.splitting import join, sentences
from translator.data.tokenizer import EOS
from translator.inference.sentences import Cutter, units
from translator.inference.text import Translator

PROJECT = Path(__file__).resolve().parents[1]  # for configs/tiny.toml beside --checkpoint


@pytest.fixture(scope="module")
def translator(trained):
    return Translator.from_checkpoint(trained, "cpu")


def test_sentences_of_a_news_line_and_blank_lines():
    line = 'Mr. Smith arrived at 5 p.m. on Monday. "Where is he?" she asked. He left.'
    assert sentences(line) == [
        "Mr. Smith arrived at 5 p.m. on Monday.",
        '"Where is he?" she asked.',
        "He left.",
    ]
    assert sentences("") == [] and sentences("A heading without a full stop") == [
        "A heading without a full stop"
    ]
    assert units(["One. Two.", "", "Three"], split=True) == (["One.", "Two.", "Three"], [0, 0, 2])
    assert units(["One. Two.", "", "Three"], split=False) == (["One. Two.", "Three"], [0, 2])


def test_chinese_sentences_join_without_a_space_latin_ends_with_one():
    assert join(["车站在哪里？", "我必须睡了。"]) == "车站在哪里？我必须睡了。"
    assert join(["他叫Tom", "Smith来了。", "", "好。"]) == "他叫Tom Smith来了。好。"
    assert join([]) == ""


def test_a_long_source_is_cut_after_clause_ends_and_nothing_is_dropped(translator):
    cutter = Cutter(translator.src_tok, positions=12)
    text = " ".join(["Tom will buy the book."] * 8)  # the tiny vocabulary's only stop: "."
    ids = cutter.pieces([text], [0]).sources
    whole = translator.src_tok.encode([text])[0]
    assert len(ids) > 1 and all(len(p) <= 12 and p[-1] == EOS for p in ids)
    assert np.concatenate([p[:-1] for p in ids]).tolist() == whole  # every id, in order
    for piece in ids[:-1]:  # each piece but the last ends a clause
        assert cutter.clause_end[piece[-2]]


def test_a_source_without_clause_ends_is_cut_into_equal_pieces(translator):
    cutter = Cutter(translator.src_tok, positions=10)
    ids = np.arange(4, 4 + 30, dtype=np.int32) % 50 + 4
    ids = ids[~cutter.clause_end[ids]][:25]
    pieces = cutter.cut(ids)
    lengths = [len(p) - 1 for p in pieces]
    assert sum(lengths) == len(ids) and max(lengths) <= 9
    assert max(lengths) - min(lengths) <= 9 // 4 + 1  # about equal


def test_document_mode_translates_each_sentence_as_if_alone(translator, monkeypatch):
    document = ["Tom will buy the book. Mary can see the dog.", "", "Tom will buy the book."]
    alone = translator.translate(["Tom will buy the book.", "Mary can see the dog."])
    calls = []
    real = translator.engine.search
    monkeypatch.setattr(
        translator.engine,
        "search",
        lambda s, batches, decode: calls.append(len(s)) or real(s, batches, decode),
    )
    out = translator.translate(document)
    assert out == [join(alone), "", alone[0]]
    assert calls == [3]  # every sentence of the document in one call, batched by length
    assert translator.translate(document, split=False)[1] == ""


def test_cli_keeps_the_document_structure_and_warns_once(translator, trained, tmp_path, caplog):
    doc = tmp_path / "doc.txt"
    long = " ".join(["Tom will buy the book and the car"] * 40)  # one sentence, > 256 tokens
    doc.write_text(f"Heading\n\nTom will buy the book. Mary can see the dog.\n{long}.\n\n")
    result = run_cli("translate", "--checkpoint", str(trained), "-i", str(doc), cwd=PROJECT)
    assert result.returncode == 0, result.stderr
    out = result.stdout.split("\n")
    assert len(out) - 1 == 5 and out[1] == "" and out[4] == ""
    assert result.stderr.count("longer than the model's") == 1
    assert "1 sentence longer than the model's 64 tokens: cut at clause" in result.stderr


def test_nbest_json_lines_from_the_cli(trained, tmp_path):
    args = ["translate", "--checkpoint", str(trained), "--beam", "4", "--nbest", "3"]
    result = run_cli(*args, "Tom will buy the book.", "", cwd=PROJECT)
    assert result.returncode == 0, result.stderr
    first, blank = [json.loads(line) for line in result.stdout.splitlines()]
    assert first["source"] == "Tom will buy the book." and len(first["hypotheses"]) == 3
    scores = [h["score"] for h in first["hypotheses"]]
    assert scores == sorted(scores, reverse=True) and all(s <= 0 for s in scores)
    assert blank == {"source": "", "hypotheses": []}
    too_many = run_cli(*args[:-1], "5", "Hi.", cwd=PROJECT)
    assert too_many.returncode != 0 and "decode.nbest (5) must be at most" in too_many.stderr


def test_one_warning_per_document_names_the_count(translator, caplog):
    cutter_room = translator.engine.max_positions
    long = " ".join(["Tom will buy the book and the car"] * (cutter_room // 4))
    with caplog.at_level(logging.WARNING, logger="translator"):
        out = translator.translate([long + ".", "Hi.", long + "!"])
    assert len(out) == 3 and all(out[i] for i in (0, 2))
    assert caplog.text.count("WARNING") == 1 and "2 sentences longer" in caplog.text
