"""`prepare` on the shared Tatoeba export; skipped when ../shared/data is absent."""

from pathlib import Path

import pytest

from translator.config import load
from translator.data.layout import split_file, tokenizer_file
from translator.data.lines import read_lines
from translator.data.prepare import prepare
from translator.data.tokenizer import load_tokenizer

TATOEBA = Path(__file__).resolve().parents[1] / "../shared/data/tatoeba/en-cmn.tsv"
pytestmark = pytest.mark.skipif(not TATOEBA.is_file(), reason=f"{TATOEBA} is absent")


def test_prepare_the_shared_tatoeba_file(tmp_path):
    config = load(Path(__file__).resolve().parents[1] / "configs/tatoeba-cpu.toml").data
    config.inputs, config.dir = [str(TATOEBA)], str(tmp_path)
    stats = prepare(config).stats
    assert stats["rows_read"] == 27_052 and stats["malformed"] == 0
    assert stats["traditional_converted"] > 0 and stats["duplicates"] > 0
    assert stats["splits"]["test"] >= 1000 and stats["splits"]["valid"] >= 500
    english = {
        s: set(read_lines(split_file(tmp_path, s, "en"))) for s in ("train", "valid", "test")
    }
    assert not english["train"] & english["test"] and not english["train"] & english["valid"]

    zh = load_tokenizer(tokenizer_file(tmp_path, "zh"))
    references = read_lines(split_file(tmp_path, "test", "zh"))
    exact = sum(zh.decode(zh.encode(ref)) == ref for ref in references)
    assert exact / len(references) > 0.97  # only characters too rare for the vocabulary fail
    with_punctuation = [r for r in references if "？" in r or "，" in r or "！" in r]
    assert len(with_punctuation) > 100
    assert all("?" not in zh.decode(zh.encode(r)) for r in with_punctuation)
