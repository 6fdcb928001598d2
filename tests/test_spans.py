"""Protected spans (data/spans.py): found as the entity suite writes them, carried through
a model as ⦅n⦆ placeholders (data.placeholders), put back after decoding, and any span
missing from a translation named in its hypothesis."""

import copy
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import ct2_translator, generated_pairs, tiny_config, write_tatoeba

from translator.data import spans
from translator.data.layout import read_split, tokenizer_file
from translator.data.tokenizer import load_tokenizer
from translator.evaluation import entities
from translator.inference.engine import About
from translator.inference.text import Translator, _mark_for


def test_every_span_of_the_entity_suite_is_found_and_nothing_else():
    for sentence in entities.suite(1000):  # single-word names are decode.keep_names's
        expected = [s.text for s in sentence.spans if s.kind != "word name"]
        assert spans.find(sentence.text) == expected, sentence.text
    for plain in ("Tom is 25.", "I have 3 apples.", "Meet me at 10:30.", "Hi, Tom!", "OK."):
        assert spans.find(plain) == []


def test_a_digit_is_free_where_no_placeholder_holds_it():
    assert not spans.has_free_digit("Call ⦅1⦆ at ⦅12⦆.")
    assert spans.has_free_digit("I have 3 apples.")
    assert spans.has_free_digit("Room 4⦅1⦆.") and spans.has_free_digit("⦅1⦆ 2")


def test_mask_and_unmask_round_trip_and_name_what_was_lost():
    text = "I paid $5.99 at https://example.com on 2024-03-05."
    masked, found = spans.mask(text)
    assert masked == "I paid $⦅1⦆ at ⦅2⦆ on ⦅3⦆."
    assert found == ["5.99", "https://example.com", "2024-03-05"]
    back = spans.unmask("我在⦅2⦆花了⦅1⦆美元。", found)
    assert back.text == "我在https://example.com花了5.99美元。"
    assert back.lost == ["2024-03-05"] and back.extra == 0
    assert spans.unmask("⦅1⦆在⦅1⦆⦅7⦆", ["A380"]) == spans.Unmasked("A380在", [], 2)  # once
    many = " ".join(f"{1000 + i}" for i in range(10))
    masked, found = spans.mask(many)
    assert len(found) == spans.MAX_PLACEHOLDERS and masked.endswith("1008 1009")


def test_spans_written_back_to_back_are_not_run_together():
    """Two placeholders side by side would otherwise make one number the source lacks."""
    found = ["VS-9278", "403.76"]
    assert spans.unmask("十美元⦅1⦆⦅2⦆美元。", found).text == "十美元VS-9278 403.76美元。"
    assert spans.unmask("⦅1⦆⦅1⦆⦅2⦆", found) == spans.Unmasked("VS-9278 403.76", [], 1)
    assert spans.unmask("⦅2⦆，⦅1⦆", found).text == "403.76，VS-9278"
    assert spans.unmask("⦅1⦆⦅2⦆", ["😀", "x"]).text == "😀x"  # no letters meet: as written


def test_the_span_guard_puts_a_lost_span_at_the_end_before_the_final_marks():
    found = ["555.02", "HY-4584"]
    back = spans.unmask("我付了⦅2⦆的钱。", found, append=True)
    assert back == spans.Unmasked("我付了HY-4584的钱555.02。", [], 0, ["555.02"])
    assert spans.unmask("我付了钱", found, append=True).text == "我付了钱555.02 HY-4584"
    assert spans.unmask("I paid!”", found, append=True).text == "I paid 555.02 HY-4584!”"
    assert spans.unmask("。", found, append=True).text == "555.02 HY-4584。"
    assert spans.unmask("我付了钱。", found).lost == found  # without append: lost, as was


def test_a_training_pair_is_masked_only_where_the_target_has_every_span():
    assert spans.mask_pair("I was born in 1990.", "我1990年出生。") == (
        "I was born in ⦅1⦆.",
        "我⦅1⦆年出生。",
    )
    assert spans.mask_pair("It costs 1,000 yen.", "这要一千日元。") is None  # not verbatim
    assert spans.mask_pair("Tom is here.", "汤姆在这里。") is None
    english = ["Call 555-1234.", "No span.", "Visit https://github.com or GitHub."]
    chinese = ["打555-1234。", "没有。", "访问GitHub。"]
    assert spans.mask_lines(english, chinese) == 1
    assert english == ["Call ⦅1⦆.", "No span.", "Visit https://github.com or GitHub."]
    assert chinese == ["打⦅1⦆。", "没有。", "访问GitHub。"]


def test_synthetic_placeholders_go_into_a_share_of_pairs_alike_on_both_sides():
    pairs = generated_pairs(576) * 4  # every templated pair, four times over
    english, chinese = [en for en, _ in pairs], [zh for _, zh in pairs]
    english[0], chinese[0] = "Call ⦅1⦆.", "打⦅1⦆。"  # has one already: left alone
    done = spans.insert_synthetic(english, chinese, np.random.default_rng(1), 0.1)
    changed = [i for i, (en, _) in enumerate(pairs) if english[i] != en]
    assert 150 < done == len(changed) - 1 < 250  # about a tenth (pair 0 changed by hand)
    twice = 0
    for i in changed[1:]:
        en, zh = english[i], chinese[i]
        found = spans._PLACEHOLDER.findall(en)
        assert found == spans._PLACEHOLDER.findall(zh) and found in (["1"], ["1", "2"])
        twice += len(found) == 2
        without = spans._PLACEHOLDER.sub("", en).replace(" ", "")
        assert without == pairs[i][0].replace(" ", "") and en.endswith(".")
        assert spans._PLACEHOLDER.sub("", zh) == pairs[i][1] and zh.endswith("。")
    assert 0.2 < twice / done < 0.47  # a third get two
    again = [en for en, _ in pairs], [zh for _, zh in pairs]
    again[0][0], again[1][0] = "Call ⦅1⦆.", "打⦅1⦆。"
    spans.insert_synthetic(*again, np.random.default_rng(1), 0.1)
    assert again == (english, chinese)  # seeded


NUMBERED = [
    ("I was born in 1990.", "我1990年出生。"),
    ("The code is KX-4821.", "代码是KX-4821。"),
    ("It costs 12.50 dollars.", "它要12.50美元。"),
    ("Visit https://example.com today.", "今天访问https://example.com。"),
    ("Order KX-4821 came at 10:30.", "KX 4821号订单十点半到了。"),  # not verbatim: left as is
]


@pytest.fixture(scope="module")
def masked_run(tmp_path_factory):
    """The tiny corpus with numbered pairs, prepared with data.placeholders."""
    from translator.corpus.preparer import prepare

    tmp = tmp_path_factory.mktemp("placeholders")
    pairs = generated_pairs(300) + NUMBERED * 20
    write_tatoeba(tmp / "corpus.tsv", pairs)
    config = tiny_config(tmp, data={"placeholders": True})
    return config, prepare(config.data)


def test_prepare_puts_placeholders_in_train_pairs_only_and_keeps_them_whole(masked_run):
    config, prepared = masked_run
    english, chinese = read_split(config.data.dir, "train")
    with_placeholders = [i for i, line in enumerate(english) if "⦅" in line]
    counts = prepared.stats["placeholder_pairs"]
    assert counts["spans"] > 0 and counts["synthetic"] > 0
    assert counts["spans"] + counts["synthetic"] == len(with_placeholders)
    assert "Order KX-4821 came at 10:30." in english  # its Chinese lacks the span verbatim
    for i in with_placeholders:  # the same placeholders on both sides
        assert sorted(spans._PLACEHOLDER.findall(english[i])) == sorted(
            spans._PLACEHOLDER.findall(chinese[i])
        )
    for split in ("valid", "test"):
        assert not any("⦅" in line for side in read_split(config.data.dir, split) for line in side)
    for lang in ("en", "zh"):
        tokenizer = load_tokenizer(tokenizer_file(config.data.dir, lang))
        assert spans.has_placeholders(tokenizer)
        assert tokenizer.encode("⦅3⦆", out_type=str)[-1] == "⦅3⦆"
    assert json.loads((prepared.dir / "stats.json").read_text())["placeholder_pairs"] == counts
    assert tokenizer.piece_to_id("⦅9⦆") == tokenizer.unk_id()  # eight placeholders only


class Copying:
    """A stand-in engine (inference/engine.py's `Engine`) that writes its source back
    through the target tokenizer, and drops what `drop` names: the text path around any
    engine, with nothing learnt. `seen`: every source it was given."""

    known_words, src_prefix = None, ""
    about = About("copying", "fp32")
    add: str = ""  # written after every source: a placeholder of the model's own

    def __init__(self, src_tok, tgt_tok, max_positions: int, drop: tuple[str, ...] = ()):
        self.src_tok, self.tgt_tok, self.max_positions, self.drop = (
            src_tok,
            tgt_tok,
            max_positions,
            drop,
        )
        self.seen: list = []

    def batch_size(self, decode_cfg) -> int:
        return decode_cfg.batch_size

    def search(self, sources, batches, decode_cfg):
        out = [[] for _ in sources]
        for batch in batches:
            for i in batch.rows:
                self.seen.append(sources[i])
                text = self.src_tok.decode([int(t) for t in sources[i][:-1]])
                for gone in self.drop:
                    text = text.replace(gone, "")
                out[i] = [(self.tgt_tok.encode(text + self.add), -1.0)]
        return out


def copying(config, drop=()) -> Translator:
    tokenizers = [load_tokenizer(tokenizer_file(config.data.dir, lang)) for lang in ("en", "zh")]
    return Translator(Copying(*tokenizers, config.model.max_positions, drop), config.decode)


def test_the_text_path_carries_spans_as_placeholders_and_names_the_lost(masked_run):
    config, _ = masked_run
    engine = copying(config)
    assert engine.placeholders
    line = "It costs 12.50 dollars. Order KX-4821 came at https://example.com."
    assert engine.translate(line) == line.replace(". ", ".")  # Chinese joins without spaces
    dropping = copying(config, drop=("⦅2⦆",)).with_decode(span_guard=False)
    found = dropping.translate([line], nbest=1)[0][0]
    assert "⦅" not in found.text and "https://example.com" not in found.text
    assert found.lost == ("https://example.com",)
    assert dropping.counts["spans_lost"] == 1
    dropping.translate(line, beam=1)  # a copy with other settings counts into the same total
    assert dropping.counts["spans_lost"] == 2
    guarded = dropping.with_decode(span_guard=True)
    found = guarded.translate([line], nbest=1)[0][0]
    assert found.text == "It costs 12.50 dollars.Order KX-4821 came at https://example.com."
    assert found.lost == () and found.appended == ("https://example.com",)
    assert (guarded.counts["spans_lost"], guarded.counts["spans_appended"]) == (2, 1)


def test_a_placeholder_the_model_writes_on_its_own_never_reaches_the_output(masked_run):
    """A model trained with placeholders may write one where the source has no span (or
    one more than it has): it is dropped, whether or not the sentence had spans."""
    config, _ = masked_run
    engine = copying(config)
    engine.engine.add = "⦅1⦆"
    assert engine.translate(["Tom is here.", "It costs 12.50 dollars."]) == [
        "Tom is here.",
        "It costs 12.50 dollars.",
    ]
    found = engine.translate(["Tom is here."], nbest=1)[0][0]
    assert found.lost == () and found.appended == ()


def test_serve_names_and_counts_the_spans_the_guard_put_at_the_end(masked_run):
    """An entity-bearing request through `serve`'s app on an engine that drops a placeholder,
    with decode.span_guard: /translate names the span put at the end (plain and n-best
    answers), /lt translates as the library does, and /metrics counts every one."""
    pytest.importorskip("fastapi")
    pytest.importorskip("granian")
    from test_serve import app_in_thread, call, post
    from test_serve_clients import lt_post

    from translator.deploy.decoder import LocalDecoder
    from translator.deploy.server import create_app

    config, _ = masked_run
    engine = copying(config, drop=("⦅2⦆",)).with_decode(span_guard=True)
    app = create_app(LocalDecoder(engine), engine.decode_cfg, config.serve, {"engine": "copy"})
    with app_in_thread(app) as url:
        line = "Order KX-4821 came from https://example.com today."
        expected = engine.translate(line)
        assert expected.endswith("today https://example.com.")
        status, body = post(url, {"text": [line, "Hello."]})
        assert status == 200, body
        assert body["translations"] == engine.translate([line, "Hello."])
        assert body["appended"] == [["https://example.com"], []]
        assert body["lost"] == [[], []]
        status, nbest = post(url, {"text": [line], "nbest": 1})
        assert status == 200 and nbest["appended"] == body["appended"][:1]
        assert nbest["hypotheses"][0][0]["appended"] == ["https://example.com"]
        status, answer = lt_post(url, {"q": line, "source": "en", "target": "zh"})
        assert status == 200 and answer["translatedText"] == expected
        metrics = call(url + "/metrics")[1]
        assert "translator_spans_appended_total 3.0" in metrics.splitlines()
        assert "translator_spans_lost_total 0.0" in metrics.splitlines()


def test_the_entity_score_counts_the_spans_the_guard_put_back(masked_run):
    from translator.evaluation.robustness import entity_score

    config, _ = masked_run
    suite = entities.suite(40)[:40]  # the spans' sentences (not the single-word names')
    dropping = copying(config, drop=("⦅1⦆",)).with_decode(span_guard=False)  # every first span
    plain, lost = entity_score(dropping, suite)
    assert plain.spans - plain.kept == len(lost) == len(suite) and plain.appended == 0
    guarded, lost = entity_score(dropping.with_decode(span_guard=True), suite)
    assert guarded.kept == guarded.spans and lost == [] and guarded.appended == len(suite)


def test_a_placeholder_already_in_a_line_comes_back_as_written(masked_run):
    """distill translates a train split that data.placeholders masked: its ⦅n⦆ are spans of
    their own, numbered with the line's other spans, so none collides or is dropped."""
    assert spans.mask("Call ⦅2⦆ at https://example.com.") == (
        "Call ⦅1⦆ at ⦅2⦆.",
        ["⦅2⦆", "https://example.com"],
    )
    config, _ = masked_run
    engine = copying(config)
    line = "It costs ⦅2⦆ at https://example.com today ⦅1⦆."
    found = engine.translate([line], nbest=1)[0][0]
    assert found.text == line and found.lost == ()
    dropping = copying(config, drop=("⦅1⦆",))  # the engine loses the first: ⦅2⦆ as given
    assert dropping.with_decode(span_guard=False).translate([line], nbest=1)[0][0].lost == ("⦅2⦆",)


def test_without_placeholders_spans_are_checked_as_written(masked_run):
    config, _ = masked_run
    line = "Order KX-4821 came at 10:30."
    for drop, lost in (((), ()), (("4821",), ("KX-4821",))):
        engine = copying(config, drop=drop)
        engine.terms.placeholders = False  # a model trained without them
        found = engine.translate([line], nbest=1)[0][0]
        assert found.lost == lost and found.text == line.replace("4821", "" if drop else "4821")


def test_a_sentence_without_a_final_mark_is_translated_with_one(masked_run):
    config, _ = masked_run
    engine = copying(config)
    seen = engine.engine.seen
    assert engine.translate("It costs 12.50 dollars") == "It costs 12.50 dollars."
    assert engine.src_tok.decode([int(i) for i in seen[-1][:-1]]) == "It costs ⦅1⦆ dollars."
    assert engine.translate("It costs 12.50 dollars.") == "It costs 12.50 dollars."
    assert [_mark_for(s) for s in ("Does it cost 5", "where is it", "Tom can't", "How")] == [
        "?",
        "?",
        ".",
        "?",
    ]
    plain = engine.with_decode(final_mark=False)
    assert plain.translate("It costs 12.50 dollars") == "It costs 12.50 dollars"
    assert engine.src_tok.decode([int(i) for i in seen[-1][:-1]]) == "It costs ⦅1⦆ dollars"


@pytest.fixture(scope="module")
def masked_model(masked_run):
    """A tiny model trained for 3 epochs with data.placeholders: its best.pt."""
    from translator.training.trainer import train

    config, _ = masked_run
    config = copy.deepcopy(config)
    config.train.max_epochs = 3
    train(config, progress=False)
    return config, Path(config.train.run_dir) / "checkpoints/best.pt"


def test_a_placeholder_model_gives_the_same_output_and_losses_on_both_engines(
    masked_model, tmp_path
):
    """A tiny model trained with data.placeholders, and its CTranslate2 export: the same
    text path, so the same translations and the same spans named as lost, and no ⦅n⦆ is
    ever left in an output; with decode.digit_guard too."""
    pytest.importorskip("ctranslate2")
    import torch

    from translator.deploy.export import export
    from translator.inference.text import Translator

    config, checkpoint = masked_model
    ours = Translator.from_checkpoint(checkpoint, torch.device("cpu"), config.decode)
    theirs = ct2_translator(export(checkpoint, tmp_path / "ct2"), config.decode, threads=0)
    assert ours.placeholders and theirs.placeholders
    lines = [s.text for s in entities.suite(30)] + [en for en, _ in NUMBERED]
    lost = appended = 0
    for guard in (False, True):
        found = [
            [(h[0].text, h[0].lost, h[0].appended) for h in engine.translate(lines, nbest=1)]
            for engine in (
                ours.with_decode(digit_guard=guard, span_guard=guard),
                theirs.with_decode(digit_guard=guard, span_guard=guard),
            )
        ]  # the scores differ a little: docs/translating.md#n-best-lists-and-scores
        assert found[0] == found[1]
        assert not any("⦅" in text for text, _, _ in found[0])
        lost += sum(len(spans_lost) for _, spans_lost, _ in found[0])
        appended += sum(len(put) for _, _, put in found[0])
        if guard:
            assert all(not spans_lost for _, spans_lost, _ in found[0])
    assert appended > 0  # this tiny model drops spans, which the guard puts back
    assert ours.counts["spans_lost"] == theirs.counts["spans_lost"] == lost
    assert ours.counts["spans_appended"] == theirs.counts["spans_appended"] == appended


def test_the_digit_guard_keeps_digits_out_where_the_source_has_none(masked_model):
    """A model made to prefer a digit above all else (a hook on its output layer) writes it
    everywhere; with decode.digit_guard, only where the source, outside its placeholders,
    has a digit of its own, and the lines keep their order."""
    import torch

    from translator.inference.text import Translator

    config, checkpoint = masked_model
    engine = Translator.from_checkpoint(checkpoint, torch.device("cpu"), config.decode)
    digits = engine.terms.digits
    pieces = [engine.tgt_tok.id_to_piece(i) for i in digits]
    assert {f"<0x3{d}>" for d in range(10)} <= set(pieces)  # byte fallback's digits too
    assert not set(spans.PLACEHOLDERS) & set(pieces)
    assert all(any(c.isdigit() for c in p) for p in pieces)
    five = engine.tgt_tok.piece_to_id("<0x35>")
    hook = engine.engine.model.project.register_forward_hook(
        lambda _m, _i, out: out.index_add(
            -1, torch.tensor([five]), torch.full((*out.shape[:-1], 1), 30.0)
        )
    )
    lines = ["Tom will buy the book.", "It costs 12.50 dollars.", "I have 3 apples.", "Hi."]
    free = [spans.has_free_digit(engine.for_model(line)[0]) for line in lines]
    assert free == [False, False, True, False]
    try:
        for settings in ({"beam": 1}, {"beam": 3}, {"sample": True, "topk": 3}):
            plain = engine.with_decode(digit_guard=False, **settings).translate(lines)
            guarded = engine.with_decode(digit_guard=True, **settings).translate(lines)
            assert all("5" in text for text in plain)
            for line, text, has in zip(lines, guarded, free, strict=True):
                written = text.replace("12.50", "")  # the span, put back
                assert any("0" <= c <= "9" for c in written) == has, (line, text)
    finally:
        hook.remove()


def test_train_refuses_data_prepared_with_the_other_setting(masked_run, config):
    from translator.data.dataset import load_training_data
    from translator.errors import UserError

    masked, _ = masked_run
    for cfg, on in ((masked, False), (config, True)):
        changed = copy.deepcopy(cfg)
        changed.data.placeholders = on
        state = "on" if on else "off"
        with pytest.raises(UserError, match=f"data.placeholders is {state} but .* prepared"):
            load_training_data(changed)


def test_the_hf_export_parity_gives_transformers_the_placeholders_too(masked_model, tmp_path):
    """scripts/export_parity.py hf on a model trained with data.placeholders and sentences full of
    spans: transformers is given each sentence as our engine gives it to the model (⦅n⦆ in
    place of its spans, restored after), so every sentence comes out identical."""
    pytest.importorskip("transformers")
    from conftest import run_script

    _, checkpoint = masked_model
    data = tmp_path / "entities"
    data.mkdir()
    sentences = [s.text for s in entities.suite(24)[:24]]  # the spans' (not the word names')
    assert sum(len(spans.find(s)) for s in sentences) >= 24
    (data / "test.en").write_text("".join(f"{s}\n" for s in sentences), encoding="utf-8")
    (data / "test.zh").write_text("好。\n" * len(sentences), encoding="utf-8")
    done = run_script(
        "export_parity.py", "hf", str(checkpoint), "--data", str(data), "--batch", "8", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    n = len(set(sentences))
    assert f"| {n} of {n} |" in done.stdout and "differs:" not in done.stdout, done.stdout
