"""Several corpora in one prepare: data.inputs entries, per-corpus counts, a split that stays
leak-free across corpora, weights applied per epoch by train, and data.exclude."""

import json
import re
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
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
from translator.data.batching import weighted_rows
from translator.data.dataset import load_training_data, train_corpora
from translator.data.layout import SPLITS, corpus_file, read_split
from translator.errors import UserError
from translator.inputs import Corpus, parse_corpora

PAIRS = generated_pairs(600)


def write_moses(directory, pairs, name):
    en, zh = directory / f"{name}.en", directory / f"{name}.zh"
    en.write_text("".join(e + "\n" for e, _ in pairs), encoding="utf-8")
    zh.write_text("".join(z + "\n" for _, z in pairs), encoding="utf-8")
    return {"src": str(en), "tgt": str(zh)}


def test_inputs_entries_are_files_or_tables():
    assert parse_corpora(
        ["a.tsv", {"path": "b.tsv", "weight": 0.5}, {"src": "c.en", "tgt": "c.zh", "weight": 3}]
    ) == [Corpus(("a.tsv",)), Corpus(("b.tsv",), 0.5), Corpus(("c.en", "c.zh"), 3.0)]
    bad = {
        "data.inputs[0].weight": {"path": "a", "weight": 0},
        "data.inputs[0].lang": {"path": "a", "lang": "en"},
        "either path": {"src": "a.en"},
        "must be a file name or a table": 3,
    }
    for message, entry in bad.items():
        with pytest.raises(UserError, match=re.escape(message)):
            from_dict({"data": {"inputs": [entry]}})


@pytest.fixture
def two_corpora(tmp_path):
    """PAIRS' first half as a TSV; the second half, plus the first 50 pairs again (duplicates)
    and the first 50 English sentences with other translations, as a Moses pair."""
    half = len(PAIRS) // 2
    other = [(e, z + "呢") for e, z in PAIRS[:50]]
    inputs = [
        str(write_tatoeba(tmp_path / "a.tsv", PAIRS[:half])),
        write_moses(tmp_path, PAIRS[half:] + PAIRS[:50] + other, "b") | {"weight": 3},
    ]
    config = replace(tiny_config(tmp_path).data, inputs=inputs, dir=str(tmp_path / "out"))
    return config, prepare(config).stats


def test_counts_are_reported_per_corpus(two_corpora):
    config, stats = two_corpora
    a, b = stats["inputs"]
    half = len(PAIRS) // 2
    assert (a["format"], a["weight"], b["format"], b["weight"]) == ("tatoeba", 1.0, "moses", 3.0)
    assert a["rows"] == half and b["rows"] == len(PAIRS) - half + 100
    assert b["duplicates"] == 50 and a["duplicates"] == 0  # a pair in both is the first's
    for c in (a, b):
        assert c["dropped"] == c["rows"] - c["pairs"]
        assert sum(c["splits"].values()) == c["pairs"]
    assert a["pairs"] + b["pairs"] == stats["pairs"]
    for s in SPLITS:
        assert a["splits"][s] + b["splits"][s] == stats["splits"][s]


def test_a_sentence_in_two_corpora_is_one_sentence_for_the_split(two_corpora):
    config, _ = two_corpora
    seen: dict[str, set] = {}
    for split in SPLITS:
        for en in read_split(config.dir, split)[0]:
            seen.setdefault(en, set()).add(split)
    assert all(len(splits) == 1 for splits in seen.values())


def test_each_train_pair_knows_its_corpus(two_corpora):
    config, _ = two_corpora
    first = {(e, z) for e, z in PAIRS[: len(PAIRS) // 2]}
    en, zh = read_split(config.dir, "train")
    corpus = np.load(corpus_file(config.dir))
    assert len(corpus) == len(en)
    assert [int(c) for c in corpus] == [0 if p in first else 1 for p in zip(en, zh, strict=True)]


def test_weights_repeat_or_subsample_a_corpus_each_epoch():
    rows = np.arange(140)
    corpus = np.array([0] * 100 + [1] * 40)
    draws = [weighted_rows(rows, corpus, [3, 0.5], seed=1, epoch=e) for e in range(3)]
    for rows_of_epoch in draws:
        counts = Counter(rows_of_epoch.tolist())
        assert all(counts[i] == 3 for i in range(100))
        extra = [i for i in range(100, 140) if counts[i]]
        assert len(extra) == 20 and all(counts[i] == 1 for i in extra)
    assert not np.array_equal(draws[0], draws[1])  # a fresh half each epoch
    assert np.array_equal(draws[0], weighted_rows(rows, corpus, [3, 0.5], seed=1, epoch=0))


def test_train_plans_epochs_with_the_weights(tmp_path, two_corpora):
    data, stats = two_corpora
    a, b = (c["splits"]["train"] for c in stats["inputs"])
    config = tiny_config(tmp_path, data={"dir": data.dir, "inputs": data.inputs})
    train = load_training_data(config).train
    assert train.unique_pairs == a + b
    assert train.epoch(0).pairs == a + 3 * b  # the configured weights
    assert sorted(np.concatenate(train.epoch(0).groups).tolist()) == sorted(
        list(range(a + b)) + [i for i in range(a + b) for _ in range(2) if train.corpus[i] == 1]
    )
    changed = [{"path": data.inputs[0].paths[0], "weight": 0.5}]
    changed.append(data.inputs[1].entry() | {"weight": 1})
    config = tiny_config(tmp_path, data={"dir": data.dir, "inputs": changed})
    assert train_corpora(config, data.dir)[1] == [0.5, 1.0]  # edited: no new prepare
    assert load_training_data(config).train.epoch(0).pairs == round(a / 2) + b
    elsewhere = tiny_config(tmp_path, data={"dir": data.dir, "inputs": ["other.tsv"]})
    assert train_corpora(elsewhere, data.dir)[1] == [1.0, 3.0]  # as recorded by prepare


def test_excluded_sentences_never_survive_at_scale(tmp_path):
    """100,000 pairs; every 10th English sentence excluded as written differently (case,
    punctuation), every 20th Chinese one in traditional script. Checked by the numbers in
    the surviving lines, not by the keys prepare used."""
    n = 100_000
    en = [f"Item {i} is on shelf {i % 97}." for i in range(n)]
    zh = [f"第{i}号物品在{i % 97}号架子上。" for i in range(n)]
    corpus = tmp_path / "big.tsv"
    corpus.write_text("".join(f"{e}\t{z}\n" for e, z in zip(en, zh, strict=True)), "utf-8")
    english = tmp_path / "test.en"
    english.write_text("".join(f"ITEM {i} is on shelf {i % 97}!\n" for i in range(0, n, 10)))
    chinese = tmp_path / "test.zh"
    chinese.write_text("".join(f"第{i}號物品在{i % 97}號架子上\n" for i in range(5, n, 20)))
    config = replace(
        tiny_config(tmp_path).data,
        inputs=[str(corpus)],
        exclude=[str(english), str(chinese)],
        dir=str(tmp_path / "out"),
        tokenizer_sentences=2000,
    )
    stats = prepare(config).stats
    gone = set(range(0, n, 10)) | set(range(5, n, 20))
    assert stats["excluded"] == len(gone) and stats["inputs"][0]["excluded"] == len(gone)
    assert stats["exclude"]["sentences"] == n // 10 + n // 20
    survivors = []
    for split in SPLITS:
        en_lines, zh_lines = read_split(config.dir, split)
        survivors += [int(line.split()[1]) for line in en_lines]
        assert [int(re.search(r"\d+", z).group()) for z in zh_lines] == survivors[-len(zh_lines) :]
    assert len(survivors) == n - len(gone) and not gone & set(survivors)


def test_the_cli_takes_a_pair_and_an_exclude_file(tmp_path):
    pair = write_moses(tmp_path, PAIRS, "news")
    (tmp_path / "test.en").write_text(PAIRS[0][0] + "\n")
    config = tmp_path / "c.toml"
    config.write_text(to_toml({"data": tiny_config(tmp_path).to_dict()["data"]}))
    args = ["prepare", "-c", str(config), "--out", "out", "--pair", pair["src"], pair["tgt"]]
    result = run_cli(*args, "--exclude", str(tmp_path / "test.en"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"{pair['src']} + {pair['tgt']} (moses, weight 1): {len(PAIRS)} read" in result.stdout
    assert "1 excluded" in result.stdout
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats["excluded"] == 1
    short = tmp_path / "short.zh"
    short.write_text("一\n二\n")
    result = run_cli(*args[:6], pair["src"], str(short), cwd=tmp_path)
    assert_one_line_error(result, f"has {len(PAIRS)} lines but", "has 2")


def test_a_weighted_epoch_is_what_train_runs_and_resume_draws_the_same(tmp_path, two_corpora):
    from translator.training.trainer import train

    data, _ = two_corpora
    inputs = [
        {"path": data.inputs[0].paths[0], "weight": 0.5},
        data.inputs[1].entry() | {"weight": 2},
    ]
    config = tiny_config(
        tmp_path, data={"dir": data.dir, "inputs": inputs}, train={"max_epochs": 2}
    )
    plan = load_training_data(config).train
    epochs = [len(plan.epoch(e)) for e in range(2)]
    result = train(config, progress=False)
    assert result.state.step == sum(epochs)  # one update per batch, update_freq 1
    assert result.batches_per_epoch == epochs[-1] != len(plan)  # as `train` reports a stop
    assert (
        plan.epoch(1).groups[0].tolist()
        == load_training_data(config).train.epoch(1).groups[0].tolist()
    )
