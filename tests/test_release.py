"""`translator release`: the weights, config and tokenizers only, in float32 (the same
translations, sentence for sentence) or half precision (close), loaded by every command
that takes a checkpoint."""

from dataclasses import replace

import numpy as np
import pytest
import torch
from conftest import assert_one_line_error, generated_pairs, run_cli, run_script, tiny_config

from translator.config import DecodeConfig
from translator.corpus.preparer import prepare
from translator.data.batching import pad, padding_mask
from translator.data.tokenizer import BOS, EOS
from translator.deploy.release import release
from translator.errors import UserError
from translator.inference.text import Translator
from translator.model import checkpoint
from translator.training.trainer import train

SENTENCES = [en for en, _ in generated_pairs(300, seed=7)[:80]] + ["Tom?", "", "Café 123."]
GREEDY = DecodeConfig(beam=1)


def logits(path, outputs, sources=SENTENCES[:20]):
    """Output logits of the model in `path` with `outputs` as the target prefix."""
    translator = Translator.from_checkpoint(path, "cpu", GREEDY)
    model, src_tok, tgt_tok = translator.engine.model, translator.src_tok, translator.tgt_tok
    src = pad([np.array(src_tok.encode(s) + [EOS]) for s in sources])
    tgt = pad([np.array([BOS] + tgt_tok.encode(s)) for s in outputs])
    with torch.no_grad():
        return model(src, tgt, padding_mask(src))


def test_a_float32_release_keeps_only_what_decoding_needs_and_translates_the_same(
    trained, tmp_path
):
    done = release(trained.parent.parent, tmp_path / "model.pt")  # a run dir: its best.pt
    payload = checkpoint.load(done.path)
    assert set(payload) == {
        "format",
        "config",
        "tokenizers",
        "tokenizer_models",
        "source_words",
        "model",
        "release",
    }
    assert payload["release"] == {"from": str(trained), "dtype": "float32"}
    last = trained.with_name("last.pt")
    assert done.bytes < last.stat().st_size / 2  # no optimiser moments, history or rng
    weights = payload["model"]  # the tied projection is the embedding itself: stored once
    assert weights["project.weight"].data_ptr() == weights["tgt_embed.tokens.weight"].data_ptr()
    ours = Translator.from_checkpoint(trained, "cpu", GREEDY).translate(SENTENCES)
    assert Translator.from_checkpoint(done.path, "cpu", GREEDY).translate(SENTENCES) == ours


@pytest.mark.parametrize("dtype, eps", [("float16", 2**-11), ("bf16", 2**-8)])
def test_a_half_precision_release_is_half_the_size_and_decodes_close(trained, tmp_path, dtype, eps):
    full = release(trained, tmp_path / "full.pt")
    half = release(trained, tmp_path / "half.pt", dtype)
    assert half.bytes < full.bytes * 0.6
    stored = checkpoint.load(half.path)["model"]
    original = checkpoint.load(trained)["model"]
    for name, tensor in original.items():
        assert stored[name].dtype == {"float16": torch.float16, "bf16": torch.bfloat16}[dtype]
        torch.testing.assert_close(stored[name].float(), tensor, rtol=eps, atol=1e-5)
    outputs = Translator.from_checkpoint(full.path, "cpu", GREEDY).translate(SENTENCES[:20])
    reference, loaded = logits(full.path, outputs), logits(half.path, outputs)
    assert (loaded - reference).abs().max() < 0.05 * reference.abs().max()
    same = Translator.from_checkpoint(full.path, "cpu", GREEDY).translate(SENTENCES)
    close = Translator.from_checkpoint(half.path, "cpu", GREEDY).translate(SENTENCES)
    assert sum(a == b for a, b in zip(same, close, strict=True)) >= 0.9 * len(SENTENCES)


def test_bad_dtype_or_overwriting_the_source_is_refused(trained, tmp_path):
    with pytest.raises(UserError, match="unknown --dtype 'int8'"):
        release(trained, tmp_path / "x.pt", "int8")
    with pytest.raises(UserError, match="is the checkpoint being released"):
        release(trained, trained)
    with pytest.raises(UserError, match="no checkpoint or run directory"):
        release(tmp_path / "missing", tmp_path / "x.pt")


def test_cli_release_then_translate_eval_info_and_serve_load_it(trained, tmp_path):
    run_dir = trained.parent.parent
    done = run_cli("release", str(run_dir), "--out", "model.pt", "--dtype", "bf16", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "wrote model.pt:" in done.stdout and "bfloat16 weights" in done.stdout
    config = tiny_config(trained.parents[2])
    config_args = ["-c", "config.toml"]
    (tmp_path / "config.toml").write_text(f'[data]\ndir = "{config.data.dir}"\n', encoding="utf-8")
    said = run_cli(
        "translate", *config_args, "--checkpoint", "model.pt", "Tom can see the cat.", cwd=tmp_path
    )
    assert said.returncode == 0 and said.stdout.strip(), said.stderr
    scored = run_cli("eval", *config_args, "--checkpoint", "model.pt", cwd=tmp_path)
    assert scored.returncode == 0 and "BLEU = " in scored.stdout, scored.stderr
    info = run_cli("info", "model.pt", cwd=tmp_path)
    assert f"release of {trained}: bfloat16 weights, no training state" in info.stdout
    served = Translator.open(
        replace(config, train=replace(config.train, device="cpu")), tmp_path / "model.pt"
    )
    assert served.translate(["Tom can see the cat."]) == [said.stdout.strip()]
    bad = run_cli("release", str(run_dir), "--out", "x.pt", "--dtype", "int4", cwd=tmp_path)
    assert_one_line_error(bad, "unknown --dtype 'int4'")


def test_a_release_exports_to_ctranslate2(trained, tmp_path):
    pytest.importorskip("ctranslate2")
    from translator.deploy.export import export

    done = release(trained, tmp_path / "model.pt", "float16")
    assert (export(done.path, tmp_path / "ct2") / "model.bin").is_file()


def test_fine_tuning_can_start_from_a_half_precision_release(trained, tmp_path):
    done = release(trained, tmp_path / "model.pt", "bfloat16")
    base = tiny_config(trained.parents[2])
    data = replace(base.data, dir=str(tmp_path / "prepared"), tokenizers_from=str(done.path))
    prepare(data)
    run = replace(base.train, run_dir=str(tmp_path / "run"), init_from=str(done.path), max_epochs=1)
    result = train(replace(base, data=data, train=run), progress=False)
    assert result.state.epoch == 1


def test_the_release_parity_tables_sizes_and_identical_output(trained):
    data = trained.parents[2] / "prepared"
    args = ["release", str(trained), "--data", str(data)]
    done = run_script("export_parity.py", *args, cwd=trained.parent)
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| release")]
    assert len(rows) == 3 and "| release, float32 |" in rows[0]
    sentences = done.stdout.split("(")[1].split(" sentences")[0]
    assert f"| {sentences} of {sentences} |" in rows[0]  # float32: every sentence the same
