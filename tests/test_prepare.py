import json

import pandas as pd
import pytest
from conftest import generated_pairs, tiny_config, write_tatoeba

from translator.corpus.cleaning import clean_chunk, first_occurrences
from translator.corpus.preparer import prepare
from translator.data.layout import split_file
from translator.data.lines import read_lines
from translator.errors import UserError


def test_clean_counts_each_dropped_pair_once(tmp_path):
    config = tiny_config(tmp_path, data={"max_chars": 30}).data
    raw = pd.DataFrame(
        {
            "en": [
                "Hi.",
                "Hi.",
                "  Hi. ",
                "",
                "Hello.",
                "A" * 31,
                "Someone is always on duty.",
                "Ok.",
            ],
            "zh": ["嗨。", "嗨。", "嗨。", "空。", "  ", "长。", "哈哈", "好。"],
        },
        dtype=str,
    )
    cleaned = clean_chunk(raw, config)
    counts = cleaned.counts
    assert counts["empty"] == 2
    assert counts["too_long"] == 1
    assert counts["bad_length_ratio"] == 1  # 26 English characters for 2 Chinese ones
    keep = first_occurrences(cleaned.pair_key)
    pairs = cleaned.pairs[keep]
    assert pairs.to_records(index=False).tolist() == [("Hi.", "嗨。"), ("Ok.", "好。")]
    assert (~keep).sum() == 2  # the third "Hi." is a duplicate once whitespace is collapsed


def test_prepare_writes_splits_tokenizers_and_stats(tmp_path):
    pairs = generated_pairs(200)
    pairs += [pairs[0], ("Tom will draw the car.", "湯姆會畫車。"), ("", "空。")]
    write_tatoeba(tmp_path / "corpus.tsv", pairs)
    config = tiny_config(tmp_path).data
    result = prepare(config)
    stats = json.loads((tmp_path / "prepared" / "stats.json").read_text())
    assert stats == result.stats
    assert stats["rows_read"] == 203 and stats["empty"] == 1
    assert stats["traditional_converted"] == 1
    assert stats["duplicates"] >= 1  # the repeated pair, and the converted one if generated
    assert sum(stats["splits"].values()) == stats["pairs"]
    seen = {}
    for split in ("train", "valid", "test"):
        en, zh = (read_lines(split_file(config.dir, split, lang)) for lang in ("en", "zh"))
        assert len(en) == len(zh) == stats["splits"][split]
        seen[split] = set(en)
    assert not (
        seen["train"] & seen["valid"]
        or seen["train"] & seen["test"]
        or seen["valid"] & seen["test"]
    )
    assert all("會" not in line for line in read_lines(split_file(config.dir, "train", "zh")))
    for lang in ("en", "zh"):
        assert (tmp_path / "prepared" / f"spm.{lang}.model").is_file()


def test_several_inputs_of_different_formats(tmp_path):
    write_tatoeba(tmp_path / "a.tsv", generated_pairs(100, seed=1))
    (tmp_path / "b.jsonl").write_text(
        "".join(
            json.dumps({"english": en, "chinese": zh}, ensure_ascii=False) + "\n"
            for en, zh in generated_pairs(100, seed=2)
        ),
        encoding="utf-8",
    )
    config = tiny_config(tmp_path).data
    config.inputs = [str(tmp_path / "a.tsv"), str(tmp_path / "b.jsonl")]
    stats = prepare(config).stats
    assert [i["format"] for i in stats["inputs"]] == ["tatoeba", "jsonl"]
    assert stats["rows_read"] == 200


def test_no_usable_pair_is_a_user_error(tmp_path):
    (tmp_path / "corpus.tsv").write_text("1\t\t2\t空。\n3\tonly three\t4\n")
    with pytest.raises(UserError, match="no usable pair"):
        prepare(tiny_config(tmp_path).data)


def test_vocabulary_too_large_for_corpus_is_a_user_error(tmp_path, corpus):
    config = tiny_config(tmp_path, data={"src_vocab_size": 50_000}).data
    with pytest.raises(UserError, match=r"data.src_vocab_size = 50000 is too large.*at most \d+"):
        prepare(config)
