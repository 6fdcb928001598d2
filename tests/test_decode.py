import itertools

import pytest
import torch
from conftest import tiny_config
from reference import greedy

from translator.config import DecodeConfig, ModelConfig
from translator.corpus.preparer import prepare
from translator.data.batching import pad, padding_mask
from translator.data.layout import read_split
from translator.data.tokenizer import BOS, EOS, PAD, UNK
from translator.inference.engine import NEVER_OUTPUT, length_penalty
from translator.inference.search import Greedy, TopK, beam_search
from translator.inference.text import Translator
from translator.inference.torch_engine import TorchEngine
from translator.model.transformer import Transformer
from translator.training.trainer import Trainer


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny model trained for a few epochs: it ends sentences at varied lengths."""
    from conftest import generated_pairs, write_tatoeba

    tmp = tmp_path_factory.mktemp("decode")
    write_tatoeba(tmp / "corpus.tsv", generated_pairs(300))
    config = tiny_config(tmp, train={"max_epochs": 25, "lr": 3e-3, "warmup_steps": 20})
    prepare(config.data)
    trainer = Trainer(config, progress=False)
    trainer.run_dir.start(config.to_dict(), resume=False)
    trainer.fit()
    engine = TorchEngine(trainer.model, trainer.src_tok, trainer.tgt_tok)
    translator = Translator(engine, config.decode)
    sentences = read_split(config.data.dir, "test")[0] + read_split(config.data.dir, "valid")[0]
    return translator, translator.encode(sentences)


def uncached_greedy(model, src, max_lens):
    """The naive algorithm: re-run the decoder over the whole prefix for every token."""
    mask = padding_mask(src)
    memory = model.encode(src, mask)
    prefix = torch.full((src.size(0), 1), BOS)
    for _ in range(int(max_lens.max())):
        logits, _ = model.decode(prefix, model.start_decoding(memory, mask))
        logits = logits[:, -1]
        logits[:, NEVER_OUTPUT] = float("-inf")
        prefix = torch.cat([prefix, logits.argmax(-1, keepdim=True)], dim=1)
    outputs = []
    for row, limit in zip(prefix[:, 1:].tolist(), max_lens.tolist(), strict=True):
        row = row[:limit]
        outputs.append(row[: row.index(EOS)] if EOS in row else row)
    return outputs


def test_cached_greedy_equals_uncached_re_decoding(trained):
    translator, sources = trained
    model = translator.engine.model.eval()

    src = pad(sources[:40])
    max_lens = torch.tensor([2 + i % 5 for i in range(40)])  # some stop at EOS, some at limit
    with torch.inference_mode():
        expected = uncached_greedy(model, src, max_lens)
    assert greedy(model, src, padding_mask(src), max_lens) == expected
    lengths = [len(o) for o in expected]
    assert any(n < limit for n, limit in zip(lengths, max_lens.tolist(), strict=True))
    assert any(n == limit for n, limit in zip(lengths, max_lens.tolist(), strict=True))


def test_beam_one_is_exactly_greedy(trained):
    translator, sources = trained
    greedy_out = translator.search(sources)
    translator.decode_cfg.beam = 1

    for start in range(0, len(sources), 16):
        src = pad(sources[start : start + 16])
        max_lens = torch.tensor([2 + i % 5 for i in range(len(src))])
        for alpha in (0.0, 0.6, 2.0):
            beam = beam_search(
                translator.engine.model, src, padding_mask(src), max_lens, TopK(1), alpha
            )
            assert best(beam) == greedy(translator.engine.model, src, padding_mask(src), max_lens)
    assert greedy_out == translator.search(sources)


def test_beam_search_through_the_translator_gives_clean_ids(trained):
    translator, sources = trained
    greedy_out = translator.search(sources)
    translator.decode_cfg.beam = 4
    try:
        beam_out = translator.search(sources)
    finally:
        translator.decode_cfg.beam = 1
    assert len(beam_out) == len(greedy_out)
    assert all(EOS not in out and BOS not in out for out in beam_out)


def best(found):
    """Each sentence's best ids, from beam search's (ids, score) lists."""
    return [hypotheses[0][0] for hypotheses in found]


def sequence_log_prob(model, src, hyp):
    """log P(hyp + EOS | src) under the model, by teacher forcing."""
    target = torch.tensor([hyp + [EOS]])
    tgt_in = torch.tensor([[BOS] + hyp])
    logits = model(src, tgt_in, padding_mask(src))[0]
    logp = logits.float().log_softmax(-1)
    logp[:, NEVER_OUTPUT] = float("-inf")
    # decoding renormalises nothing: NEVER_OUTPUT tokens are masked after log_softmax
    return float(logp.gather(1, target.T).sum())


@pytest.mark.parametrize("limit", [2, 4])
@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.5, 3.0])
@pytest.mark.parametrize("seed", range(5))
def test_wide_beam_finds_the_exhaustive_optimum(limit, alpha, seed):
    torch.manual_seed(seed)
    model_cfg = ModelConfig(
        encoder_layers=1,
        decoder_layers=1,
        d_model=16,
        heads=2,
        ff_dim=32,
        dropout=0.0,
        max_positions=8,
    )
    model = Transformer(model_cfg, 10, 6).eval()  # outputs: UNK, EOS, 4, 5
    src = torch.tensor([[4, 5, 6, EOS]])
    words = [UNK, 4, 5]
    with torch.inference_mode():
        candidates = [list(h) for n in range(limit + 1) for h in itertools.product(words, repeat=n)]
        scored = [
            (sequence_log_prob(model, src, h) / length_penalty(len(h) + 1, alpha), h)
            for h in candidates
        ]
        ranked = sorted((h for h in scored if h[0] > float("-inf")), key=lambda h: -h[0])[:3]
        found = beam_search(
            model,
            src,
            padding_mask(src),
            torch.tensor([limit]),
            TopK(len(candidates)),
            alpha,
            nbest=3,
        )
    # the n best of every possible output, in order, with the scores the search ranked by
    assert [ids for ids, _ in found[0]] == [ids for _, ids in ranked]
    assert [score for _, score in found[0]] == pytest.approx([s for s, _ in ranked], abs=1e-5)


def test_beam_search_handles_padding_and_shrinking_batches(trained):
    translator, sources = trained
    translator.decode_cfg.beam = 3
    try:
        together = translator.search(sources[:12])
        alone = [translator.search([s])[0] for s in sources[:12]]
    finally:
        translator.decode_cfg.beam = 1
    assert together == alone
    assert PAD not in sum(together, [])


class TableModel:
    """A stand-in for the Transformer: next-token probabilities looked up by the prefix
    written so far (missing mass goes to PAD, which decoding never outputs)."""

    def __init__(self, table: dict[tuple, dict[int, float]], vocab: int = 6):
        self.table, self.vocab = table, vocab
        self.project = torch.nn.Linear(1, vocab)  # beam search reads the vocabulary size

    class State:
        def __init__(self, prefixes):
            self.prefixes = prefixes

        def reorder(self, rows, sentences=None, beams=0):
            return TableModel.State([self.prefixes[i] for i in rows.tolist()])

    def encode(self, src, mask):
        return src

    def start_decoding(self, memory, mask, beams=1):
        return self.State([[] for _ in range(memory.size(0) * beams)])

    def decode(self, tokens, state):
        prefixes = [p + [t] for p, t in zip(state.prefixes, tokens[:, 0].tolist(), strict=True)]
        rows = []
        for prefix in prefixes:
            probs = torch.full((self.vocab,), 1e-6)
            for token, p in self.table.get(tuple(prefix[1:]), {EOS: 0.5}).items():
                probs[token] = p
            probs[PAD] = 1 - (probs.sum() - probs[PAD])
            rows.append(probs.log())
        return torch.stack(rows)[:, None, :], self.State(prefixes)


class LoopingModel(TableModel):
    """Next-token probabilities by the last token alone: 4 → 5 → 4 → … loops (and with
    length penalty 2, beam search prefers the longest loop too)."""

    NEXT = {BOS: {4: 0.6, 5: 0.3}, 4: {5: 0.9, EOS: 0.05}, 5: {4: 0.9, EOS: 0.05}}

    def __init__(self):
        super().__init__({}, vocab=6)

    def decode(self, tokens, state):
        prefixes = [p + [t] for p, t in zip(state.prefixes, tokens[:, 0].tolist(), strict=True)]
        rows = []
        for prefix in prefixes:
            probs = torch.full((self.vocab,), 1e-6)
            for token, p in self.NEXT.get(prefix[-1], {EOS: 0.9}).items():
                probs[token] = p
            probs[PAD] = 1 - (probs.sum() - probs[PAD])
            rows.append(probs.log())
        return torch.stack(rows)[:, None, :], self.State(prefixes)


def test_the_ngram_guard_stops_a_loop_in_greedy_and_beam_search():
    model, src = LoopingModel(), torch.tensor([[4, EOS], [5, EOS]])
    limits, mask = torch.tensor([8, 8]), padding_mask(src)

    def greedy_with(guard):
        found = beam_search(model, src, mask, limits, Greedy(), no_repeat_ngram=guard)
        return [hypotheses[0][0] for hypotheses in found]

    assert greedy_with(0) == [[4, 5, 4, 5, 4, 5, 4, 5]] * 2
    assert greedy_with(2) == [[4, 5, 4]] * 2  # "4 5" again is blocked: EOS is next best
    assert greedy_with(3) == [[4, 5, 4, 5]] * 2
    for guard in (1, 2, 3):
        found = beam_search(model, src, mask, limits, TopK(4), 2.0, nbest=4, no_repeat_ngram=guard)
        hypotheses = [ids for sentence in found for ids, _ in sentence]
        assert len(hypotheses) == 8
        for ids in hypotheses:
            grams = [tuple(ids[i : i + guard]) for i in range(len(ids) - guard + 1)]
            assert len(grams) == len(set(grams)), ids


def test_search_goes_on_while_a_live_hypothesis_can_still_win():
    """Stopping is sound: the empty output (score -1.50) is only beaten by [6, 4] at full
    length (-2.51 / lp(3) = -1.41, alpha 2), so the search must see that a live beam of
    log-probability -2.30 could still reach -2.30 / lp(limit + 1) = -1.30."""
    model = TableModel(
        {
            (): {EOS: 0.223, 6: 0.1},
            (6,): {4: 0.9, 5: 0.05, EOS: 0.001},
            (6, 4): {EOS: 0.9},
            (6, 5): {EOS: 0.9},
        },
        vocab=7,
    )
    src = torch.tensor([[4, EOS]])
    found = beam_search(model, src, padding_mask(src), torch.tensor([2]), TopK(2), alpha=2.0)
    assert best(found) == [[6, 4]]


def test_unknown_token_is_never_written(trained):
    """<unk> decodes as " ⁇ ": even a model that prefers it above all else never writes it."""
    translator, sources = trained
    model = translator.engine.model
    hook = model.project.register_forward_hook(
        lambda _m, _i, out: out.index_add(
            -1, torch.tensor([UNK]), torch.full((*out.shape[:-1], 1), 1e4)
        )
    )
    try:
        src = pad(sources[:20])
        with torch.inference_mode():
            logits = model(src, torch.full((20, 1), BOS), padding_mask(src))
        assert (logits[:, -1].argmax(-1) == UNK).all()  # the hook works: UNK is the favourite
        max_lens = torch.full((20,), 5)
        for found in (
            greedy(model, src, padding_mask(src), max_lens),
            best(beam_search(model, src, padding_mask(src), max_lens, TopK(3))),
        ):
            assert all(UNK not in ids for ids in found)
            assert any(ids for ids in found)
    finally:
        hook.remove()


def test_a_limit_of_no_tokens_writes_nothing_and_scores_are_reported_where_asked(trained):
    """Greedy search with every limit 0 writes nothing (as it always has); beam search
    reports its scores at one beam too, where plain greedy search reports NaN."""
    import math

    from translator.inference.search import search

    translator, sources = trained
    model, src = translator.engine.model, pad(sources[:4])
    nothing = search(model, src, torch.zeros(4, dtype=torch.long), DecodeConfig())
    assert [found[0][0] for found in nothing] == [[]] * 4
    limits = torch.full((4,), 6)
    plain = search(model, src, limits, DecodeConfig())
    assert all(math.isnan(found[0][1]) for found in plain)
    scored = search(model, src, limits, DecodeConfig(nbest=1))
    assert all(not math.isnan(found[0][1]) for found in scored)


@pytest.mark.parametrize("beam", [1, 3])
def test_a_search_from_a_prefix_starts_with_it_and_goes_on_as_the_model_would(trained, beam):
    """Prefixes (terms.py's placement): each hypothesis starts with its sentence's own
    prefix, of any length; an empty prefix changes nothing, nor, for greedy search, does
    the start of the translation it finds on its own."""
    from translator.inference.search import search

    translator, sources = trained
    model, src = translator.engine.model, pad(sources[:4])
    limits = torch.full((4,), 12)
    decode = DecodeConfig(beam=beam, nbest=1)
    free = search(model, src, limits, decode)
    assert search(model, src, limits, decode, prefixes=[[]] * 4) == free
    own = [found[0][0][:2] for found in free]
    if beam == 1:
        assert search(model, src, limits, decode, prefixes=own) == free
    given = [[7], [8, 9], [], [10, 11, 12]]
    forced = search(model, src, limits, decode, prefixes=given)
    for prefix, found in zip(given, forced, strict=True):
        assert found[0][0][: len(prefix)] == prefix
