"""n-best lists with scores, sampling (top-k, top-p, temperature, seed) and the n-gram
repetition guard, on a tiny trained model."""

import math

import pytest
import torch

from translator.config import DecodeConfig
from translator.data.batching import pad, padding_mask
from translator.errors import UserError
from translator.inference.search import (
    Greedy,
    TokenSampling,
    beam_search,
    block_repeats,
    draw,
    restrict,
)
from translator.inference.text import Translator

SENTENCES = ["Tom will buy the book.", "Mary can see the dog.", "The cat likes the car."]


@pytest.fixture(scope="module")
def translator(trained):
    return Translator.from_checkpoint(trained, "cpu")


@pytest.fixture(scope="module")
def sources(translator):
    from translator.data.layout import read_split

    english = read_split(trained_data(translator), "test")[0]
    return translator.encode(english)


def trained_data(translator):
    return translator.engine.config.data.dir


def test_nbest_is_ranked_and_its_first_is_the_plain_translation(translator):
    plain = translator.translate(SENTENCES, beam=4)
    found = translator.translate(SENTENCES, beam=4, nbest=4)
    for line, hypotheses in zip(plain, found, strict=True):
        assert hypotheses[0].text == line and 1 <= len(hypotheses) <= 4
        scores = [h.score for h in hypotheses]
        assert scores == sorted(scores, reverse=True) and all(s <= 0 for s in scores)
    one = translator.translate(SENTENCES, nbest=1)  # beam 1: greedy's output, with a score
    assert [h[0].text for h in one] == translator.translate(SENTENCES)
    assert all(math.isfinite(h[0].score) for h in one)


def test_a_line_of_two_sentences_sums_their_scores(translator):
    two = translator.translate(" ".join(SENTENCES[:2]), beam=3, nbest=1)[0]
    alone = [translator.translate(s, beam=3, nbest=1)[0] for s in SENTENCES[:2]]
    assert two.score == pytest.approx(alone[0].score + alone[1].score, abs=1e-4)


def test_nbest_above_the_beam_is_refused():
    with pytest.raises(UserError, match="decode.nbest \\(3\\) must be at most decode.beam"):
        DecodeConfig(beam=2, nbest=3).check()


def test_top_k_never_leaves_the_k_best_and_top_p_keeps_the_smallest_set():
    logits = torch.tensor([[3.0, 2.0, 1.0, 0.0, -1.0]])
    kept = restrict(logits, TokenSampling(topk=2)).isfinite()
    assert kept.tolist() == [[True, True, False, False, False]]
    probs = logits.softmax(-1)[0]  # 0.64, 0.24, 0.09, ...
    kept = restrict(logits, TokenSampling(topp=0.7)).isfinite()[0]
    assert kept.tolist() == [True, True, False, False, False]  # 0.64 < 0.7 <= 0.87
    kept = restrict(logits, TokenSampling(topp=float(probs[0]) - 0.01)).isfinite()[0]
    assert kept.tolist() == [True, False, False, False, False]


def test_sampled_tokens_stay_within_top_k_and_top_p():
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(64, 50, generator=generator) * 3
    best3 = logits.topk(3, dim=-1).indices
    for _ in range(50):
        drawn = draw(logits, TokenSampling(temperature=2.0, topk=3, generator=generator))
        assert (best3 == drawn[:, None]).any(dim=1).all()
    ordered = logits.softmax(-1).sort(dim=-1, descending=True)
    needed = (ordered.values.cumsum(-1) < 0.5).sum(-1) + 1  # the smallest set with 0.5
    for _ in range(50):
        drawn = draw(logits, TokenSampling(topp=0.5, generator=generator))
        rank = (ordered.indices == drawn[:, None]).float().argmax(dim=1)
        assert (rank < needed).all()


def test_top_1_sampling_is_greedy(translator):
    greedy = translator.translate(SENTENCES)
    assert translator.with_decode(sample=True, topk=1, seed=3).translate(SENTENCES) == greedy


def test_temperature_zero_is_greedy_and_the_seed_makes_it_reproducible(translator):
    greedy = translator.translate(SENTENCES)
    assert translator.with_decode(sample=True, temperature=0.0).translate(SENTENCES) == greedy
    hot = translator.with_decode(sample=True, temperature=1.5, seed=7, nbest=3)
    first, again = hot.translate(SENTENCES), hot.translate(SENTENCES)
    assert first == again
    other = translator.with_decode(sample=True, temperature=1.5, seed=8, nbest=3)
    assert other.translate(SENTENCES) != first
    assert all(len(samples) == 3 for samples in first)
    assert any(len({s.text for s in samples}) > 1 for samples in first)  # they differ


def test_sampling_ignores_the_beam_of_the_config(translator):
    """A config that decodes with beam 5 can still sample: sampling has no beam."""
    sampled = translator.with_decode(sample=True, seed=2, nbest=3)
    assert sampled.with_decode(beam=5).translate(SENTENCES) == sampled.translate(SENTENCES)


def test_block_repeats_bans_exactly_the_tokens_that_would_repeat_an_ngram():
    history = torch.tensor([[5, 6, 7, 5, 6], [5, 6, 7, 8, 9]])
    logits = torch.zeros(2, 10)
    block_repeats(logits, history, 3)  # row 0 ends in "5 6", and "5 6 7" was written
    assert torch.isinf(logits[0]).nonzero().flatten().tolist() == [7]
    assert not torch.isinf(logits[1]).any()
    logits = torch.zeros(2, 10)
    block_repeats(logits, history, 1)  # unigrams: nothing written may be written again
    assert torch.isinf(logits[1]).nonzero().flatten().tolist() == [5, 6, 7, 8, 9]


def repeated_ngrams(ids: list[int], n: int) -> int:
    grams = [tuple(ids[i : i + n]) for i in range(len(ids) - n + 1)]
    return len(grams) - len(set(grams))


def test_the_guard_applies_to_real_model_outputs_too(translator, sources):
    model = translator.engine.model
    src = pad(sources[:24])
    max_lens = torch.full((src.size(0),), 30)  # long limits: a small model loops
    found = beam_search(model, src, padding_mask(src), max_lens, Greedy(), no_repeat_ngram=2)
    loose = [h[0][0] for h in beam_search(model, src, padding_mask(src), max_lens, Greedy())]
    assert all(repeated_ngrams(h[0][0], 2) == 0 for h in found)
    assert any(repeated_ngrams(ids, 2) for ids in loose)  # the guard had work to do


def test_the_api_checks_decode_settings_as_the_config_does(translator):
    with pytest.raises(ValueError, match="at most decode.beam"):
        translator.translate(SENTENCES, nbest=3)
    with pytest.raises(ValueError, match="decode.topp"):
        translator.with_decode(sample=True, topp=0.0)
