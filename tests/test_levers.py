"""The levers of quality that grows with compute: the plateau rule on validation BLEU
(train.plateau_metric), a moving average of the weights (train.ema), and BPE-dropout
encodings of the train split (data.subword_sampling)."""

import numpy as np
import pytest
import torch
from conftest import run_cli, tiny_config, to_toml
from test_train import (
    assert_same_run,
    exact_config,
    recorded_losses,
    sigterm_after,
    with_train,
)

from translator.config import DataConfig, TrainConfig, from_dict
from translator.corpus.preparer import prepare
from translator.data.dataset import load_training_data
from translator.data.ids import SubwordSampling, encode_splits, ids_file, open_ids, up_to_date
from translator.data.layout import split_file, tokenizer_file
from translator.data.lines import read_lines
from translator.data.tokenizer import load_tokenizer
from translator.errors import UserError
from translator.inference.text import Translator
from translator.model import checkpoint
from translator.model.ema import WeightEMA
from translator.model.rundir import RunDir
from translator.model.transformer import Transformer
from translator.training.schedule import LRSchedule
from translator.training.trainer import Interrupted, train

CPU = torch.device("cpu")


def schedule(**values) -> LRSchedule:
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1e-3)
    return LRSchedule(optimizer, TrainConfig(lr=1e-3, **values))


def test_plateau_on_bleu_keeps_the_rate_while_bleu_climbs_and_loss_does_not():
    losses, bleus = [2.0, 2.1, 2.2, 2.3], [10.0, 11.0, 12.0, 13.0]  # overfitting, still better
    on_loss = schedule(warmup_steps=0, plateau_patience=1)
    on_bleu = schedule(warmup_steps=0, plateau_patience=1, plateau_metric="bleu")
    for loss, bleu in zip(losses, bleus, strict=True):
        on_loss.after_epoch(loss, bleu, update=100)
        on_bleu.after_epoch(loss, bleu, update=100)
    assert on_loss.lr < 1e-3 and on_bleu.lr == 1e-3
    for _ in range(2):  # BLEU stops rising: halved after the patience
        on_bleu.after_epoch(2.4, 13.0, update=100)
    assert on_bleu.lr == pytest.approx(5e-4)


def test_the_rate_warms_up_linearly_then_stays_until_the_plateau_rule():
    s = schedule(warmup_steps=4)
    rates = {}
    for update in (1, 2, 4, 16, 64):
        s.before_update(update)
        rates[update] = s.lr
    assert rates == pytest.approx({1: 2.5e-4, 2: 5e-4, 4: 1e-3, 16: 1e-3, 64: 1e-3})


def test_resume_refuses_a_plateau_rule_on_the_other_metric():
    saved = schedule(plateau_metric="bleu").state_dict()
    with pytest.raises(UserError, match="plateau_metric"):
        schedule(plateau_metric="loss").load_state_dict(saved)


def test_weight_ema_is_the_moving_average_of_every_update(tmp_path):
    config = tiny_config(tmp_path)
    model = Transformer(config.model, 60, 320)  # tied embeddings: one tensor, averaged once
    start = {k: v.clone() for k, v in model.state_dict().items()}
    ema = WeightEMA(model, decay=0.9)
    steps = []
    for _ in range(3):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p))
        ema.update()
        steps.append({k: v.clone() for k, v in model.state_dict().items()})
    for name, first in start.items():
        expected = first
        for weights in steps:
            expected = 0.9 * expected + 0.1 * weights[name]
        torch.testing.assert_close(ema.state_dict()[name], expected, msg=name)
    assert ema.model.tgt_embed.tokens.weight is ema.model.project.weight
    assert not any(p.requires_grad for p in ema.model.parameters())


def test_an_ema_run_validates_saves_and_averages_the_average(config, tmp_path):
    trained = train(with_train(config, max_epochs=3, keep_last=2, ema=0.9), progress=False)
    rows = RunDir(tmp_path / "run").metric_rows()
    assert len(rows) == 3 and all(0 <= float(r["ema_valid_bleu"]) <= 100 for r in rows)
    best = max(float(r["ema_valid_bleu"]) for r in rows)
    assert trained.state.best_ema_bleu == pytest.approx(best, rel=1e-5)
    ckpt = tmp_path / "run/checkpoints"
    ema = checkpoint.load(ckpt / "ema.pt")
    assert ema["weights_from"] == "ema" and not {"optimizer", "ema", "rng"} & ema.keys()
    last = checkpoint.load(ckpt / "last.pt")
    assert not torch.equal(ema["model"]["project.weight"], last["model"]["project.weight"])
    assert len(Translator.from_checkpoint(ckpt / "ema.pt", CPU).translate(["Tom ran."])) == 1

    path = checkpoint.average_last(tmp_path / "run", last=2, weights="ema")
    assert path == ckpt / "ema-average2.pt"
    a, b = (checkpoint.load(ckpt / n)["ema"] for n in ("epoch0002.pt", "epoch0003.pt"))
    for name, tensor in checkpoint.load(path)["model"].items():
        torch.testing.assert_close(tensor, (a[name] + b[name]) / 2)


def test_average_of_the_ema_needs_a_run_that_kept_one(config, tmp_path):
    train(with_train(config, keep_last=2), progress=False)
    with pytest.raises(UserError, match="hold no ema weights: train with train.ema"):
        checkpoint.average_last(tmp_path / "run", last=2, weights="ema")


def test_cli_averages_the_ema_and_evaluates_it(config, tmp_path):
    config_file = tmp_path / "c.toml"
    config_file.write_text(to_toml(config.to_dict()))
    train(with_train(config, keep_last=2, ema=0.9), progress=False)
    averaged = run_cli("average", str(tmp_path / "run"), "--last", "2", "--ema", cwd=tmp_path)
    assert averaged.returncode == 0, averaged.stderr
    assert "moving averages" in averaged.stdout
    ema = tmp_path / "run/checkpoints/ema-average2.pt"
    scored = run_cli("eval", "-c", str(config_file), "--checkpoint", str(ema), cwd=tmp_path)
    assert scored.returncode == 0, scored.stderr
    assert "BLEU" in scored.stdout
    info = run_cli("info", str(tmp_path / "run/checkpoints/ema.pt"), cwd=tmp_path)
    assert "weights: the moving average of training's (train.ema 0.9)" in info.stdout


def test_resume_with_every_lever_on_is_exact(config, tmp_path, monkeypatch):
    def levers(name):
        levered = exact_config(config, tmp_path, name)
        levered.train.ema, levered.train.plateau_metric = 0.9, "bleu"
        levered.train.warmup_steps = 3  # cut at 5: warm
        levered.data.subword_sampling = 2
        return levered

    losses = recorded_losses(monkeypatch)
    train(levers("straight"), progress=False)
    expected, losses[:] = list(losses), []
    with sigterm_after(monkeypatch, 5), pytest.raises(Interrupted):
        train(levers("cut"), progress=False)
    train(levers("cut"), resume=True, progress=False)
    assert losses == pytest.approx(expected, abs=1e-6)
    assert_same_run(tmp_path / "straight", tmp_path / "cut")
    ea, eb = (
        checkpoint.load(tmp_path / d / "checkpoints/last.pt")["ema"] for d in ("straight", "cut")
    )  # noqa: E501
    for name, tensor in ea.items():
        torch.testing.assert_close(eb[name], tensor, rtol=0, atol=1e-6, msg=name)


def sampled_config(tmp_path, **data):
    return tiny_config(tmp_path, data={"subword_sampling": 2, **data})


def test_prepare_samples_only_the_train_split_and_keeps_the_text(tmp_path, corpus):
    with_sampling = sampled_config(tmp_path)
    prepare(with_sampling.data)
    d = with_sampling.data.dir
    names = sorted(p.name for p in (tmp_path / "prepared").glob("*.s[0-9]*"))
    assert names == sorted(
        f"train.{lang}.s{k}.{kind}"
        for lang in ("en", "zh")
        for k in (1, 2)
        for kind in ("ids.bin", "offsets.npy")
    )  # valid and test are never sampled: what is scored is the plain encoding
    for lang in ("en", "zh"):
        tokenizer = load_tokenizer(tokenizer_file(d, lang))
        plain = open_ids(d, "train", lang)
        rows = np.arange(len(plain))
        texts = [tokenizer.decode(ids[ids > 0].tolist()) for ids in plain.padded(rows)]
        changed = 0
        for k in (1, 2):
            sampled = open_ids(d, "train", lang, k)
            assert len(sampled) == len(plain)
            decoded = [tokenizer.decode(ids[ids > 0].tolist()) for ids in sampled.padded(rows)]
            assert decoded == texts  # another segmentation of the same sentence
            changed += int((sampled.lengths() != plain.lengths()).sum())
            assert sampled.lengths().sum() > plain.lengths().sum()  # dropout splits pieces
        assert changed > 0
    first = ids_file(d, "train", "zh", 2).read_bytes()
    encode_splits(d, threads=2, sampling=SubwordSampling.of(with_sampling.data))
    assert ids_file(d, "train", "zh", 2).read_bytes() == first  # reproducible from the seed


def test_epochs_take_the_sampled_encodings_in_turn(tmp_path, corpus):
    sampled = sampled_config(tmp_path)
    prepare(sampled.data)
    data = load_training_data(sampled)
    assert len(data.train.samples) == 2 and not data.valid.samples
    for epoch in range(4):
        planned = data.train.epoch(epoch)
        src, tgt = data.train.samples[epoch % 2]
        assert planned.src is src and planned.tgt is tgt
        rows = planned.groups[0]
        assert planned[0].src.shape == src.padded(rows).shape
        assert planned[0].tgt_out.shape == tgt.padded(rows).shape
    assert data.train.epoch(0).pairs <= data.train.pairs


def test_a_changed_sampling_is_encoded_again_and_an_old_one_removed(tmp_path, corpus):
    sampled = sampled_config(tmp_path)
    prepare(sampled.data)
    d = sampled.data.dir
    assert up_to_date(d, SubwordSampling.of(sampled.data)) and not up_to_date(d)
    sampled.data.subword_sampling = 3
    assert not up_to_date(d, SubwordSampling.of(sampled.data))
    load_training_data(sampled)  # train encodes what the config asks for
    assert ids_file(d, "train", "en", 3).is_file()
    assert up_to_date(d, SubwordSampling.of(sampled.data))
    sampled.data.subword_sampling = 0
    load_training_data(sampled)
    assert not list((tmp_path / "prepared").glob("*.s[0-9]*")) and up_to_date(d)


def test_only_the_sides_asked_for_are_sampled(tmp_path, corpus):
    assert SubwordSampling.of(DataConfig(subword_sampling=2, subword_sides="src")).langs == ("en",)
    assert SubwordSampling.of(DataConfig(subword_sampling=2, subword_sides="tgt")).langs == ("zh",)
    assert SubwordSampling.of(DataConfig(subword_sampling=0)).langs == ()
    sampled = sampled_config(tmp_path, subword_sides="tgt")
    prepare(sampled.data)
    data = load_training_data(sampled)
    src, tgt = data.train.samples[0]
    assert np.array_equal(src.lengths(), open_ids(sampled.data.dir, "train", "en").lengths())
    assert not ids_file(sampled.data.dir, "train", "en", 1).exists()
    assert ids_file(sampled.data.dir, "train", "zh", 1).is_file() and len(tgt) == len(src)


@pytest.mark.parametrize(
    "section, values, message",
    [
        ("train", {"ema": 1.0}, "train.ema' must be in [0, 1)"),
        ("train", {"plateau_metric": "chrf"}, "train.plateau_metric' must be one of loss, bleu"),
        ("data", {"subword_sampling": -1}, "data.subword_sampling' must be >= 0"),
        ("data", {"subword_alpha": 0.0}, "data.subword_alpha' must be in (0, 1)"),
        ("data", {"subword_sides": "left"}, "data.subword_sides' must be one of both, src, tgt"),
    ],
)
def test_lever_settings_are_checked(section, values, message):
    with pytest.raises(UserError) as error:
        from_dict({section: values})
    assert message in str(error.value)


def test_validation_and_test_lines_are_untouched_by_sampling(tmp_path, corpus):
    """What is scored is the split's text: sampling changes only train's ids."""
    plain, sampled = tiny_config(tmp_path / "a"), sampled_config(tmp_path / "b")
    for each in (plain, sampled):
        each.data.inputs = [str(corpus)]
        prepare(each.data)
    for split in ("valid", "test"):
        for lang in ("en", "zh"):
            a = read_lines(split_file(plain.data.dir, split, lang))
            b = read_lines(split_file(sampled.data.dir, split, lang))
            assert a == b
            assert (
                ids_file(plain.data.dir, split, lang).read_bytes()
                == ids_file(sampled.data.dir, split, lang).read_bytes()
            )
