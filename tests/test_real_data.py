"""`prepare` on the shared Tatoeba export; skipped when ../shared/data is absent."""

import shutil
from pathlib import Path

import pytest
from conftest import run_cli

from translator.config import load
from translator.corpus.preparer import prepare
from translator.data.layout import read_split, split_file, tokenizer_file
from translator.data.lines import read_lines
from translator.data.tokenizer import UNK, load_tokenizer

ROOT = Path(__file__).resolve().parents[1]
TATOEBA = ROOT / "../shared/data/tatoeba/en-cmn.tsv"
pytestmark = pytest.mark.skipif(not TATOEBA.is_file(), reason=f"{TATOEBA} is absent")


def test_prepare_the_shared_tatoeba_file(tmp_path):
    config = load(ROOT / "configs/tatoeba-cpu.toml").data
    config.inputs, config.dir = [str(TATOEBA)], str(tmp_path)
    stats = prepare(config).stats
    assert stats["rows_read"] == 27_052 and stats["malformed"] == 0
    assert stats["traditional_converted"] > 0 and stats["duplicates"] > 0
    assert stats["splits"]["test"] >= 1000 and stats["splits"]["valid"] >= 500
    train_en, train_zh = (set(side) for side in read_split(tmp_path, "train"))
    for split in ("valid", "test"):
        en, zh = read_split(tmp_path, split)
        assert not set(en) & train_en and not set(zh) & train_zh  # was 198 of 1,000 in test
    assert 1 < stats["largest_group"] < 100 and stats["groups"] < stats["pairs"]

    zh = load_tokenizer(tokenizer_file(tmp_path, "zh"))
    references = read_lines(split_file(tmp_path, "test", "zh"))
    assert all(UNK not in zh.encode(ref) for ref in references)  # byte fallback
    assert all(zh.decode(zh.encode(ref)) == ref for ref in references)
    with_punctuation = [r for r in references if "？" in r or "，" in r or "！" in r]
    assert len(with_punctuation) > 100


def test_the_default_config_prepares_the_first_4000_lines(tmp_path):
    """configs/tiny.toml's vocabulary is too small for them: it is raised with a warning.
    The output goes to data/prepared/<input name>, not over the sample's prepared data."""
    (tmp_path / "configs").mkdir()
    shutil.copy(ROOT / "configs/tiny.toml", tmp_path / "configs/tiny.toml")
    with TATOEBA.open(encoding="utf-8") as f:
        head = [next(f) for _ in range(4000)]
    (tmp_path / "first-4000.tsv").write_text("".join(head), encoding="utf-8")
    result = run_cli("prepare", "--input", "first-4000.tsv", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(warnings) == 1 and warnings[0].startswith(
        "warning: data.tgt_vocab_size = 850 is too small"
    )
    assert (tmp_path / "data/prepared/first-4000/spm.zh.model").is_file()
    assert not (tmp_path / "data/prepared/sample").exists()
