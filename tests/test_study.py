"""scripts/studies/recipes.py trains, scores, rescores and tabulates a variant (a tiny one, for
seconds): it must not rot."""

import csv
import json
import subprocess
from pathlib import Path

from conftest import run_script
from test_cli import CONFIG

STUDY = Path(__file__).resolve().parents[1] / "scripts" / "studies" / "recipes.py"


def study(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return run_script(
        "scripts/studies/recipes.py", "-c", "study.toml", "--out", "runs", *args, cwd=cwd
    )


def results(cwd: Path) -> list[dict]:
    with (cwd / "runs" / "results.tsv").open(encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def test_study_trains_scores_and_tabulates_a_variant(tmp_path, corpus):
    # five epochs, so that the last five can be averaged
    (tmp_path / "study.toml").write_text(CONFIG.replace("max_epochs = 2", "max_epochs = 5"))

    # a two-sentence stand-in for newstest2021 (the real one takes a tiny model minutes)
    news = tmp_path / "news"
    for suffix, text in (("en", "Hello.\nGood night.\n"), ("refA.zh", "你好。\n晚安。\n")):
        news.with_name(f"news.{suffix}").write_text(text, encoding="utf-8")
    news.with_name("news.refB.zh").write_text("您好。\n晚安！\n", encoding="utf-8")

    trained = study(tmp_path, "--only", "baseline", "--news", str(news))
    assert trained.returncode == 0, trained.stderr
    [row] = results(tmp_path)
    assert row["variant"] == "baseline" and row["changes"] == "none"
    assert row["epochs"] == "5"
    assert 0.0 <= float(row["newstest2021_bleu_beam5"]) <= 100.0
    assert (tmp_path / "prepared").is_dir()  # the base config's data, no vocabulary change
    for column in ("valid_bleu", "test_bleu", "test_bleu_beam5", "valid_bleu_avg5"):
        assert 0.0 <= float(row[column]) <= 100.0, column
    assert (tmp_path / "runs/baseline/checkpoints/average5.pt").is_file()

    rescored = study(tmp_path, "--rescore", "--news", str(news))
    assert rescored.returncode == 0, rescored.stderr
    assert results(tmp_path) == [row]  # same checkpoints, same scores, still one row

    table = study(tmp_path, "--table")
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[2].startswith("| baseline | none | ")


def test_study_names_unknown_variants(tmp_path):
    (tmp_path / "study.toml").write_text(CONFIG)
    result = study(tmp_path, "--only", "no-such-variant")
    assert result.returncode != 0
    assert "unknown variants: no-such-variant" in result.stderr


def test_prepare_only_writes_every_variants_data_and_trains_nothing(tmp_path, corpus):
    """What lets several studies train at once on one machine (scripts/studies/gpu.sh): the
    data they share, sampled encodings included, is written first; --set reaches it."""
    (tmp_path / "study.toml").write_text(CONFIG)
    sets = ["--set", "data.src_vocab_size=50"]  # a vocabulary change: its own directory
    result = study(tmp_path, "--only", "baseline", "levers", *sets, "--prepare-only")
    assert result.returncode == 0, result.stderr
    plain, sampled = tmp_path / "prepared-v50-320", tmp_path / "prepared-v50-320-sw4-both-0.1"
    assert (plain / "ids.json").is_file() and not (tmp_path / "prepared").exists()
    assert json.loads((sampled / "ids.json").read_text())["sampling"]["count"] == 4
    assert all(
        (sampled / f"train.{lang}.s{k}.ids.bin").is_file()
        for lang in ("en", "zh")
        for k in range(1, 5)
    )
    assert not (tmp_path / "runs").exists()  # nothing trained, no results


def test_a_sampling_base_keeps_its_data_and_a_variant_without_gets_a_copy(tmp_path, corpus):
    """configs/tatoeba-cpu-60.toml samples: its baseline trains on the config's own prepared
    directory, and a variant that turns sampling off must not re-encode that directory
    under the baseline (which would drop its sampled encodings)."""
    config = CONFIG.replace("tgt_vocab_size = 320", "tgt_vocab_size = 320\nsubword_sampling = 2")
    (tmp_path / "study.toml").write_text(config)
    result = study(tmp_path, "--only", "baseline", "no-subword", "--prepare-only")
    assert result.returncode == 0, result.stderr
    base, plain = tmp_path / "prepared", tmp_path / "prepared-sw0"
    assert json.loads((base / "ids.json").read_text())["sampling"]["count"] == 2
    assert (base / "train.zh.s2.ids.bin").is_file()
    assert json.loads((plain / "ids.json").read_text())["sampling"] is None
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("prepared")) == [
        "prepared",
        "prepared-sw0",
    ]
