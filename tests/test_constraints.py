"""The glossary in the search: lexically constrained beam search (inference/constraints.py)
on our engine, term insertion on CTranslate2, names as placeholders on a model trained with
them, and an imported Marian. Every search (greedy, beam, n-best) must hold the
terms; a glossary that matches nothing must change nothing; sampling keeps none, and says so."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch
from conftest import (
    assert_one_line_error,
    ct2_translator,
    generated_pairs,
    run_cli,
    tiny_config,
    to_toml,
    write_tatoeba,
)

from translator.config import DecodeConfig
from translator.data.glossary import Glossary, term_ids
from translator.data.layout import read_split
from translator.data.tokenizer import EOS
from translator.errors import UserError
from translator.inference.constraints import Constrained, PackedTerms, _dealt, _repeated
from translator.inference.search import Finished
from translator.inference.text import Translator

# the generated corpus's objects, given other Chinese than the corpus's (the model would
# never write these on its own for these words)
GLOSSARY = {"cat": "狗", "book": "花", "flower": "车"}


def sources_of(checkpoint) -> list[str]:
    data = checkpoint.parents[2] / "prepared"
    return read_split(data, "test")[0] + read_split(data, "valid")[0]


@pytest.fixture(scope="module")
def ours(trained) -> Translator:
    return Translator.from_checkpoint(trained, torch.device("cpu"))


def holding(lines: list[str]) -> list[str]:
    return [s for s in lines if any(word in s for word in GLOSSARY)]


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"beam": 3},
        {"beam": 3, "nbest": 3},
    ],
    ids=["greedy", "beam", "n-best"],
)
def test_every_search_holds_the_terms(ours, trained, changes):
    lines = holding(sources_of(trained))
    assert len(lines) > 10
    engine = ours.with_decode(**{"nbest": 1, **changes})
    for found in engine.translate(lines, glossary=GLOSSARY):
        # the best holds every term; one that ran to its length limit without them (this
        # 4-epoch model's n-best can) ranks after every one that holds them
        missed = [bool(h.missed) for h in found]
        assert found and missed == sorted(missed) and not missed[0]
    assert engine.counts["terms"] >= len(lines) and engine.counts["terms_missed"] == 0


def test_sampling_with_a_glossary_is_one_clear_error(ours, trained, tmp_path):
    """Sampling draws each token: it keeps no terms, so a glossary with it is refused, in
    the Python API and on the command line; without one, sampling runs."""
    lines = holding(sources_of(trained))[:3]
    with pytest.raises(UserError, match="sampling"):
        ours.with_decode(sample=True).translate(lines, glossary=GLOSSARY)
    with pytest.raises(ValueError, match="sampling"):
        ours.with_decode(sample=True, glossary=str(trained))
    assert len(ours.with_decode(sample=True).translate(lines)) == 3
    (tmp_path / "tiny.toml").write_text(to_toml(tiny_config(trained.parents[2]).to_dict()))
    (tmp_path / "terms.tsv").write_text("cat\t狗\n", encoding="utf-8")
    given = ["-c", "tiny.toml", "--glossary", "terms.tsv"]
    result = run_cli("translate", *given, "--sample", "Hi.", cwd=tmp_path)
    assert_one_line_error(result, "decode.glossary", "--sample")


def test_a_glossary_that_matches_nothing_changes_nothing(ours, trained):
    lines = sources_of(trained)
    absent = {"helicopter": "直升机", "credit card": "信用卡"}
    for beam in (1, 3):
        engine = ours.with_decode(beam=beam)
        assert engine.translate(lines, glossary=absent) == engine.translate(lines)


def test_sentences_without_a_term_decode_as_without_the_glossary(ours, trained):
    lines = sources_of(trained)
    plain = ours.translate(lines, beam=3)
    with_terms = ours.translate(lines, beam=3, glossary=GLOSSARY)
    for line, before, after in zip(lines, plain, with_terms, strict=True):
        if not any(word in line for word in GLOSSARY):
            assert before == after


def test_a_term_given_twice_is_written_twice(ours):
    line = "Tom can see the cat and the cat."
    found = ours.translate([line], beam=3, nbest=1, glossary={"cat": "狗"})[0][0]
    assert found.text.count("狗") >= 2 and not found.missed


def test_progress_through_terms_one_token_at_a_time():
    """Two terms (ids 10 11 and 12) in one sentence, beams (1) of width 1: writing 10 then
    11 meets the first; 10 then 13 breaks it; a repeated term needs a second writing."""
    constraints = Constrained(PackedTerms.of([[[10, 11], [12], [12]]], vocab=20), beam=1)
    constraints.start(1, torch.device("cpu"))
    alive = torch.tensor([0])
    origin = torch.zeros(1, 4, dtype=torch.long)
    token = torch.tensor([[10, 12, 13, EOS]])
    after = constraints._advanced(origin, token, alive)[0].tolist()
    assert after == [[1, 0, 0], [0, 1, 0], [0, 0, 0], [0, 0, 0]]
    constraints.progress = torch.tensor([[1, 1, 0]])
    after = constraints._advanced(origin, torch.tensor([[11, 12, 10, 13]]), alive)[0].tolist()
    assert after == [[2, 1, 0], [0, 1, 1], [1, 1, 0], [0, 1, 0]]


def test_the_beams_are_dealt_round_robin_over_the_banks():
    top = torch.tensor([[-1.0, -2.0, -3.0, -4.0, float("-inf"), -0.5]])
    bank = torch.tensor([[0, 0, 1, 1, 2, 0]])
    order = _dealt(top, bank)[0].tolist()
    # bank 1 first (the most advanced that can be taken), then bank 0, in turns
    assert order == [2, 5, 3, 0, 1, 4]
    keys = torch.tensor([[5, 7, 5, 9, 7]])
    assert _repeated(keys)[0].tolist() == [False, False, True, False, True]


def test_a_hypothesis_that_missed_a_term_ranks_last():
    kept = Finished(1, 2, torch.device("cpu"))
    kept.add(torch.tensor([0]), [[5, 6]], [-0.1], torch.tensor([1]))
    kept.add(torch.tensor([0]), [[7]], [-3.0], torch.tensor([0]))
    assert [ids for ids, _ in kept.best()[0]] == [[7], [5, 6]]


@pytest.fixture(scope="module")
def named_model(tmp_path_factory):
    """A tiny model trained for 3 epochs with data.placeholders, on a corpus whose
    sentences carry names with a capital inside (GitHub), so that it copies ⦅n⦆."""
    from translator.corpus.preparer import prepare
    from translator.training.trainer import train

    tmp = tmp_path_factory.mktemp("names")
    names = [(f"I use {n} every day.", f"我每天用{n}。") for n in ("GitHub", "PayPal", "iPad")]
    write_tatoeba(tmp / "corpus.tsv", generated_pairs(300) + names * 30)
    config = tiny_config(tmp, data={"placeholders": True}, train={"max_epochs": 3})
    prepare(config.data)
    train(copy.deepcopy(config), progress=False)
    return config, tmp / "run/checkpoints/best.pt"


def test_names_go_through_placeholders_and_terms_through_the_search_on_both_engines(
    named_model, tmp_path
):
    """On a model trained with placeholders, an entry that keeps its English (Python →
    Python) is carried as ⦅n⦆ and given back as the glossary writes it; the other terms
    are constrained. Both engines hold every term, greedy and with beam 3."""
    config, checkpoint = named_model
    decode = dataclasses.replace(config.decode, span_guard=True)  # as the shipped recipes
    ours = Translator.from_checkpoint(checkpoint, torch.device("cpu"), decode)
    engines = [ours]
    try:
        from translator.deploy.export import export

        exported = export(checkpoint, tmp_path / "ct2")
        engines.append(ct2_translator(exported, decode, threads=0))
    except UserError:  # CTranslate2 is not installed: our engine alone
        pass
    glossary = {"python": "Python", **GLOSSARY}
    lines = ["I use python every day.", "Tom can see the cat.", "Mary will draw the flowers."]
    prepared = ours.prepare(lines[0], Glossary.of(glossary))
    assert (prepared.text, prepared.spans) == ("I use ⦅1⦆ every day.", ["Python"])
    for engine in engines:
        for beam in (1, 3):
            found = engine.with_decode(beam=beam).translate(lines, nbest=1, glossary=glossary)
            assert "Python" in found[0][0].text
            assert all(not h[0].missed for h in found), found
        assert "placeholders" in engine.terms.mechanism(engine.decode_cfg)
    assert "constrained beam search" in engines[0].terms.mechanism(engines[0].decode_cfg)


def test_the_ctranslate2_engine_holds_the_terms_in_every_search(trained, tmp_path):
    pytest.importorskip("ctranslate2")
    from translator.deploy.export import export

    theirs = ct2_translator(export(trained, tmp_path / "ct2"))
    lines = holding(sources_of(trained))
    for changes in ({}, {"beam": 3, "nbest": 2}):
        engine = theirs.with_decode(**{"nbest": 1, **changes})
        for found in engine.translate(lines, glossary=GLOSSARY):
            assert found and not found[0].missed
    assert "term insertion" in theirs.terms.mechanism(theirs.decode_cfg)


def test_an_imported_marian_holds_the_terms(tmp_path):
    """A tiny OPUS-shaped Marian imported with import-hf (no placeholders, a unigram
    tokenizer without byte fallback) obeys a glossary through the search; a term its
    tokenizer cannot write (a character it has no piece for) is named as missed, not
    forced."""
    pytest.importorskip("transformers")
    from test_hf import opus_shaped

    from translator.deploy.hf import import_hf

    directory, _, _ = opus_shaped(tmp_path)
    done = import_hf(directory, tmp_path / "opus.pt", target_token=">>cmn_Hans<<")
    decode = DecodeConfig(batch_size=8, max_len_a=0.0, max_len_b=20)
    imported = Translator.from_checkpoint(done.path, torch.device("cpu"), decode)
    assert not imported.placeholders
    term = next(c for c in "狗花车猫" if term_ids(imported.tgt_tok, c))
    lines = [en for en, _ in generated_pairs(300)[:20]]
    for beam in (1, 3):
        found = imported.translate(lines, beam=beam, nbest=1, glossary={"the": term})
        assert all(term in h[0].text and not h[0].missed for h in found)
    assert term_ids(imported.tgt_tok, "龘") is None
    found = imported.translate(lines[:3], nbest=1, glossary={"the": "龘"})
    assert [h[0].missed for h in found] == [("龘",)] * 3


def test_a_sentence_cut_into_pieces_holds_each_piece_s_terms(ours):
    """A line longer than the model's positions is cut into pieces (sentences.py): each term
    goes to the piece whose English holds it."""
    line = ", ".join(["Tom can see the book"] * 12 + ["Mary can see the cat"]) + "."
    prepared = ours.prepare(line, Glossary.of(GLOSSARY))
    assert len(ours.cutter.pieces([prepared.text], [0]).sources) > 1
    found = ours.translate([line], split=False, nbest=1, glossary=GLOSSARY)[0][0]
    assert found.text.count("花") >= 12 and "狗" in found.text and not found.missed
