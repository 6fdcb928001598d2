"""Fine-tuning: prepare with a trained model's tokenizers (and how well they cover the new
text), a new run that starts from its weights with everything else fresh, the checks that
refuse a model or data that does not fit, and a train-only corpus mixed in against
forgetting."""

import hashlib
import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import (
    assert_one_line_error,
    generated_pairs,
    run_cli,
    tiny_config,
    to_toml,
    write_tatoeba,
)

from translator.config import from_dict
from translator.corpus.preparer import prepare
from translator.corpus.split import plan_split, sentence_keys
from translator.data.ids import BYTE, UNKNOWN, meta_file, piece_kinds
from translator.data.layout import read_split, tokenizer_file
from translator.data.tokenizer import load_tokenizer
from translator.errors import UserError
from translator.model import checkpoint
from translator.model.transformer import Transformer
from translator.training.resume import initial_weights, spread_layers
from translator.training.trainer import train

NEW_PAIRS = generated_pairs(300, seed=7)[:200]  # the same words, other sentences and order
STRANGE = [(f"Zyx qwv {i} ✓.", f"鳕鲸鳟鲨{i}号。") for i in range(60)]  # letters it never saw


def finetune_config(trained, tmp_path, pairs=NEW_PAIRS, **train):
    """A tiny config for new data, prepared with the tokenizers of the `trained` fixture."""
    corpus = write_tatoeba(tmp_path / "new.tsv", pairs)
    base = tiny_config(trained.parents[2])
    data = replace(
        base.data,
        inputs=[str(corpus)],
        dir=str(tmp_path / "prepared"),
        tokenizers_from=str(trained),
    )
    run = replace(base.train, run_dir=str(tmp_path / "run"), init_from=str(trained), **train)
    return replace(base, data=data, train=run)


def test_tokenizers_from_a_checkpoint_are_its_own_byte_for_byte(trained, tmp_path):
    config = finetune_config(trained, tmp_path)
    stats = prepare(config.data).stats
    models = checkpoint.load(trained)["tokenizer_models"]
    for lang, side in (("en", "src"), ("zh", "tgt")):
        assert tokenizer_file(config.data.dir, lang).read_bytes() == models[side]
    recorded = json.loads(meta_file(config.data.dir).read_text())["tokenizers"]
    assert recorded == {
        lang: hashlib.sha256(models[side]).hexdigest()
        for lang, side in (("en", "src"), ("zh", "tgt"))
    }
    assert stats["tokenizers_from"] == str(trained)
    assert stats["coverage"]["en"]["fallback"] == 0 == stats["coverage"]["zh"]["fallback"]


def test_a_run_directory_stands_for_its_best_checkpoint(trained, tmp_path):
    config = finetune_config(trained, tmp_path)
    prepare(replace(config.data, tokenizers_from=str(trained.parent.parent)))
    models = checkpoint.load(trained)["tokenizer_models"]
    assert tokenizer_file(config.data.dir, "zh").read_bytes() == models["tgt"]


def test_coverage_counts_unknown_and_byte_pieces_and_warns(trained, tmp_path, caplog):
    config = finetune_config(trained, tmp_path, NEW_PAIRS + STRANGE)
    stats = prepare(config.data).stats
    for lang in ("en", "zh"):  # counted again here, piece by piece
        tokenizer = load_tokenizer(tokenizer_file(config.data.dir, lang))
        kinds = piece_kinds(tokenizer)
        ids = [
            i
            for split in ("train", "valid", "test")
            for line in read_split(config.data.dir, split)[lang == "zh"]
            for i in tokenizer.encode(line)
        ]
        found = stats["coverage"][lang]
        assert found["pieces"] == len(ids)
        assert found["unknown"] == sum(kinds[i] == UNKNOWN for i in ids)
        assert found["bytes"] == sum(kinds[i] == BYTE for i in ids)
    assert stats["coverage"]["en"]["unknown"] > 0  # "✓" and the unseen letters
    assert stats["coverage"]["zh"]["bytes"] > 0  # 鳕鲸鳟鲨 through byte fallback
    assert "cover this text poorly" in caplog.text and "Chinese pieces" in caplog.text


def test_prepare_cli_reports_coverage_and_refuses_a_missing_model(trained, tmp_path):
    corpus = write_tatoeba(tmp_path / "new.tsv", NEW_PAIRS)
    config = tmp_path / "c.toml"
    config.write_text(to_toml({"data": tiny_config(tmp_path).to_dict()["data"]}))
    args = ["prepare", "-c", str(config), "--input", str(corpus), "--out", str(tmp_path / "p")]
    done = run_cli(*args, "--tokenizers-from", str(trained), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"tokenizers from {trained}" in done.stdout and "en 0.00%, zh 0.00%" in done.stdout
    missing = run_cli(*args, "--tokenizers-from", str(tmp_path / "nope.pt"), cwd=tmp_path)
    assert_one_line_error(missing, "no checkpoint or run directory at")


def test_init_from_starts_from_the_weights_with_everything_else_fresh(trained, tmp_path):
    """…from a run directory, which the run records as the checkpoint file it read; the
    config it records is the resolved one (precision and pad multiple decided here)."""
    config = finetune_config(trained, tmp_path, max_epochs=1, lr=1e-12, min_lr=0.0)
    assert trained.name == "best.pt"
    config = replace(config, train=replace(config.train, init_from=str(trained.parents[1])))
    prepare(config.data)
    result = train(config, progress=False)
    recorded = json.loads((tmp_path / "run/config.json").read_text(encoding="utf-8"))
    assert recorded["train"]["init_from"] == str(trained)
    assert recorded["train"]["precision"] in ("fp32", "bf16")
    assert recorded["train"]["pad_to_multiple"] >= 1 and recorded["data"]["inputs"] == [
        str(tmp_path / "new.tsv")
    ]
    start = checkpoint.load(trained)
    last = checkpoint.load(tmp_path / "run/checkpoints/last.pt")
    for name, tensor in start["model"].items():  # a learning rate of 1e-12 moves nothing
        torch.testing.assert_close(last["model"][name], tensor, rtol=0, atol=1e-6)
    assert result.state.epoch == 1 and result.state.step == result.batches_per_epoch
    assert last["config"] == recorded and last["precision"] == recorded["train"]["precision"]
    assert start["train_state"]["step"] > 0  # the counters were not carried over
    moments = next(iter(last["optimizer"]["state"].values()))  # AdamW began at zero
    assert int(moments["step"]) == result.state.step
    assert [row["epoch"] for row in last["train_state"]["history"]] == [1]


def test_a_fine_tuned_run_beats_the_same_epoch_from_scratch(trained, tmp_path):
    config = finetune_config(trained, tmp_path, max_epochs=1)
    prepare(config.data)
    tuned = train(config, progress=False).history[-1]
    scratch = replace(config.train, init_from="", run_dir=str(tmp_path / "scratch"))
    fresh = train(replace(config, train=scratch), progress=False).history[-1]
    assert tuned["valid_loss"] < fresh["valid_loss"] - 0.5


def write_config(tmp_path, config):
    path = tmp_path / "finetune.toml"
    path.write_text(to_toml(config.to_dict()), encoding="utf-8")
    return path


def test_a_different_architecture_is_one_line_naming_every_key(trained, tmp_path):
    config = finetune_config(trained, tmp_path)
    prepare(config.data)
    model = replace(config.model, d_model=64, heads=4, norm="post", dropout=0.3, max_positions=99)
    path = write_config(tmp_path, replace(config, model=model))
    done = run_cli("train", "-c", str(path), cwd=tmp_path)
    assert_one_line_error(
        done,
        f"cannot initialise from {trained}: the config's [model] section differs",
        "model.d_model is 64 here and 32 in the checkpoint",
        "model.heads is 4 here and 2 in the checkpoint",
        "model.norm is 'post' here and 'pre' in the checkpoint",
    )
    assert "dropout" not in done.stderr and "max_positions" not in done.stderr
    assert not (tmp_path / "run").exists()  # refused before anything was written


def test_a_shallower_model_takes_evenly_spaced_layers_with_init_layers_spread(trained, tmp_path):
    payload = checkpoint.load(trained)  # made 3 decoder layers deep, each its own weights
    deep = replace(from_dict(payload["config"]).model, decoder_layers=3)
    vocab = [payload["model"][f"{side}_embed.tokens.weight"].shape[0] for side in ("src", "tgt")]
    payload["model"] = Transformer(deep, *vocab).state_dict()
    payload["config"]["model"]["decoder_layers"] = 3
    teacher = tmp_path / "deep.pt"
    checkpoint.save(payload, teacher)
    config = finetune_config(trained, tmp_path, init_layers="spread")
    config = replace(config, train=replace(config.train, init_from=str(teacher)))
    prepare(config.data)
    for layers, picked in ((1, [0]), (2, [0, 2])):
        student = replace(config, model=replace(config.model, decoder_layers=layers))
        weights = initial_weights(student)
        Transformer(student.model, *vocab).load_state_dict(weights)  # strict: all, no more
        for new, old in enumerate(picked):
            name = "decoder.{}.ff.0.weight"
            assert torch.equal(weights[name.format(new)], payload["model"][name.format(old)])
    assert spread_layers(12, 3) == [0, 6, 11]  # Shleifer and Rush's 3 of 12
    deeper = replace(config, model=replace(config.model, decoder_layers=4))
    with pytest.raises(UserError, match="decoder_layers is 4 here, more than the checkpoint's 3"):
        initial_weights(deeper)
    same = replace(student, train=replace(student.train, init_layers="same"))
    with pytest.raises(UserError, match="model.decoder_layers is 2 here and 3 in the checkpoint"):
        initial_weights(same)


def test_data_prepared_with_other_tokenizers_is_one_line(trained, tmp_path):
    config = finetune_config(trained, tmp_path)
    prepare(replace(config.data, tokenizers_from="", src_vocab_size=70))  # trained anew
    done = run_cli("train", "-c", str(write_config(tmp_path, config)), cwd=tmp_path)
    assert_one_line_error(
        done,
        f"cannot initialise from {trained}: {config.data.dir} was prepared with other "
        "tokenizers (en and zh differ from the checkpoint's): prepare it with "
        f"--tokenizers-from {trained}",
    )


def test_resume_and_init_from_together_is_an_error(trained, tmp_path):
    done = run_cli("train", "--resume", "--init-from", str(trained), cwd=tmp_path)
    assert_one_line_error(done, "--resume and --init-from contradict each other")


def test_info_shows_where_a_run_was_initialised_from(trained, tmp_path):
    config = finetune_config(trained, tmp_path, max_epochs=1)
    prepare(config.data)
    train(config, progress=False)
    done = run_cli("info", str(tmp_path / "run"), cwd=tmp_path)
    assert f"initialised from: {trained} (fine-tuned)" in done.stdout


def test_train_only_pairs_and_their_groups_stay_in_train():
    pairs = generated_pairs(400)
    en = np.array([e for e, _ in pairs], dtype=object)
    zh = np.array([z for _, z in pairs], dtype=object)
    zh[300:] = zh[:100]  # each train-only pair shares its Chinese with one other pair
    train_only = np.zeros(len(pairs), dtype=bool)
    train_only[300:] = True
    keys = sentence_keys(pd.Series(en)), sentence_keys(pd.Series(zh))
    plan = plan_split(*keys, 40, 40, seed=3, train_only=train_only)
    assert (plan.split[300:] == 0).all() and (plan.split[:100] == 0).all()
    assert (plan.split == 1).sum() >= 40 and (plan.split == 2).sum() >= 40


def test_a_train_only_corpus_is_mixed_in_but_never_held_out(trained, tmp_path):
    config = finetune_config(trained, tmp_path)
    old = {"path": str(trained.parents[2] / "corpus.tsv"), "weight": 0.5}
    data = replace(config.data, inputs=[*config.data.inputs, old | {"train_only": True}])
    stats = prepare(data).stats
    new, mixed = stats["inputs"]
    assert mixed["train_only"] and mixed["splits"]["valid"] == mixed["splits"]["test"] == 0
    assert mixed["splits"]["train"] == mixed["pairs"] > 0
    assert new["splits"]["valid"] == stats["splits"]["valid"] > 0
    with pytest.raises(UserError, match="every corpus in data.inputs is train_only"):
        prepare(replace(data, inputs=[old | {"train_only": True}]))
    with pytest.raises(UserError, match="train_only' must be true or false"):
        prepare(replace(data, inputs=[old | {"train_only": "yes"}]))


def test_a_stopped_fine_tuning_run_resumes_with_init_from_left_in_its_config(trained, tmp_path):
    config = finetune_config(trained, tmp_path, max_epochs=1)
    prepare(config.data)
    train(config, progress=False)
    tuned = checkpoint.load(tmp_path / "run/checkpoints/last.pt")["model"]
    longer = replace(config, train=replace(config.train, max_epochs=2))
    result = train(longer, resume=True, progress=False)  # last.pt's weights, not the start's
    assert result.state.epoch == 2 and [row["epoch"] for row in result.history] == [2]
    again = checkpoint.load(tmp_path / "run/checkpoints/last.pt")
    assert len(again["train_state"]["history"]) == 2
    assert not torch.equal(again["model"]["encoder_norm.weight"], tuned["encoder_norm.weight"])
