"""The split cannot leak: no English and no Chinese sentence of valid or test occurs in
train, even on a corpus built to tempt it (one Chinese sentence behind two slightly
different English ones, chains of shared translations, the same English in other case and
punctuation)."""

import json
import random

import numpy as np
import pandas as pd
import pytest
from conftest import tiny_config, write_tatoeba
from reference import split_pairs

from translator.corpus.preparer import prepare
from translator.corpus.split import connected_groups, loose_form
from translator.data.layout import read_split


def tempting_pairs(n_stories: int, seed: int = 0) -> list[tuple[str, str]]:
    """Pairs whose only correct split keeps each "story" together: a story links pairs
    through a shared Chinese sentence, a shared English sentence, and English that differs
    only in case, spacing and punctuation, in chains several pairs long."""
    rng = random.Random(seed)
    names = ["Tom", "Mary", "John", "Alice", "Ken", "Lucy"]
    cn = ["汤姆", "玛丽", "约翰", "爱丽丝", "肯", "露西"]
    pairs = []
    for k in range(n_stories):
        i = k % len(names)
        en_a = f"I know that {names[i]} is a little worried about {k}."
        en_b = f"I know {names[i]} is a little worried about {k}."
        zh_1 = f"我知道{cn[i]}有点担心{k}。"
        zh_2 = f"我晓得{cn[i]}有一点担心{k}。"
        zh_3 = f"{cn[i]}有点担心{k}，我知道。"
        story = [
            (en_a, zh_1),  # two English sentences behind one Chinese one
            (en_b, zh_1),
            (en_b, zh_2),  # the second English goes on to another translation ...
            (f"{names[i]} worries about {k}, I know.", zh_2),  # ... shared with a third
            (en_a.upper().replace(".", "!"), zh_3),  # the first English, shouted
            (f"  {en_b.lower()}", f"{zh_3}"),
        ][: rng.randint(1, 6)]
        pairs += story
    for k in range(n_stories):  # and plenty of unlinked pairs around them
        pairs.append((f"This is sentence number {k} on its own.", f"这是单独的第{k}句。"))
    rng.shuffle(pairs)
    return pairs


def sides(data_dir, split):
    en, zh = read_split(data_dir, split)
    return {"en": set(en), "zh": set(zh), "loose_en": set(loose_form(pd.Series(en)))}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_no_sentence_of_valid_or_test_occurs_in_train(tmp_path, seed):
    write_tatoeba(tmp_path / "corpus.tsv", tempting_pairs(150, seed))
    config = tiny_config(
        tmp_path, data={"seed": seed, "valid_size": 60, "test_size": 80, "max_length_ratio": 20.0}
    ).data
    stats = prepare(config).stats
    train, valid, test = (sides(config.dir, s) for s in ("train", "valid", "test"))
    for held_out in (valid, test):
        for side in ("en", "zh", "loose_en"):
            assert not held_out[side] & train[side], side
    assert not valid["en"] & test["en"] and not valid["zh"] & test["zh"]
    assert stats["splits"]["test"] >= 80 and stats["splits"]["valid"] >= 60
    assert stats["largest_group"] > 1 and stats["groups"] < stats["pairs"]
    written = json.loads((tmp_path / "prepared" / "stats.json").read_text())
    assert written["groups"] == stats["groups"]


def union_find_oracle(*keys) -> list[int]:
    """Plain union-find over the same links, to check the vectorised one."""
    parent = list(range(len(keys[0])))

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x

    for column in keys:
        first = {}
        for row, value in enumerate(column):
            if value in first:
                a, b = find(first[value]), find(row)
                parent[max(a, b)] = min(a, b)
            else:
                first[value] = row
    return [find(row) for row in range(len(parent))]


@pytest.mark.parametrize("seed", range(20))
def test_connected_groups_equal_a_plain_union_find(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    keys = [rng.integers(0, max(1, n // k), size=n).astype(np.uint64) for k in (1, 2)]
    assert connected_groups(*keys).tolist() == union_find_oracle(*keys)


def test_a_long_chain_is_one_group():
    n = 1001  # pair i shares its English with pair i+1 when i is even, its Chinese when odd
    en = np.array([i // 2 for i in range(n)], dtype=np.uint64)
    zh = np.array([(i + 1) // 2 for i in range(n)], dtype=np.uint64)
    assert set(connected_groups(en, zh).tolist()) == {0}


def test_loose_form_ignores_case_punctuation_and_spacing():
    forms = loose_form(pd.Series(["I'm OK!", "  i'm   ok. ", "好。", "好！", "?!"]))
    assert forms.tolist() == ["i m ok", "i m ok", "好", "好", ""]


def frame(pairs):
    return pd.DataFrame(pairs, columns=["en", "zh"])


def split_of_each_pair(pairs: pd.DataFrame, names: pd.Series) -> dict:
    names = names.sort_index()
    return {(en, zh): names[i] for i, en, zh in pairs[["en", "zh"]].itertuples()}


def test_split_is_deterministic_and_independent_of_row_order():
    pairs = frame(tempting_pairs(100))
    first = split_pairs(pairs["en"], pairs["zh"], 40, 50, seed=7).names
    again = split_pairs(pairs["en"], pairs["zh"], 40, 50, seed=7).names
    assert first.equals(again)
    shuffled = pairs.sample(frac=1.0, random_state=3).reset_index(drop=True)
    moved = split_pairs(shuffled["en"], shuffled["zh"], 40, 50, seed=7).names
    assert split_of_each_pair(pairs, first) == split_of_each_pair(shuffled, moved)
    other_seed = split_pairs(pairs["en"], pairs["zh"], 40, 50, seed=8).names
    assert not first.sort_index().equals(other_seed.sort_index())


def test_held_out_sizes_overshoot_by_less_than_one_group():
    pairs = frame(tempting_pairs(200))
    split = split_pairs(pairs["en"], pairs["zh"], 60, 90, seed=1)
    sizes = split.names.value_counts()
    assert 90 <= sizes["test"] < 90 + 6 and 60 <= sizes["valid"] < 60 + 6
    assert sizes.sum() == len(pairs)


def test_a_huge_group_stays_in_train():
    hub = [(f"Variant {k} of hello.", "你好。") for k in range(300)]  # one group of 300
    rest = [(f"Sentence {k}.", f"句子{k}。") for k in range(300)]
    pairs = frame(hub + rest)
    for seed in range(5):
        split = split_pairs(pairs["en"], pairs["zh"], 50, 50, seed=seed)
        assert (split.names[split.names.index < 300] == "train").all()
        assert split.largest_group == 300 and split.kept_in_train == 1


def test_groups_are_written_whole_and_together():
    pairs = frame([(f"E{k}.", f"中{k}。") for k in range(50)])
    pairs = pd.concat([pairs, frame([("E1!", "别的。"), ("e1", "又一个。")])], ignore_index=True)
    names = split_pairs(pairs["en"], pairs["zh"], 5, 5, seed=1).names
    positions = [names.index.get_loc(i) for i in (1, 50, 51)]  # E1's group, three rows
    assert max(positions) - min(positions) == 2
    assert names[[1, 50, 51]].nunique() == 1
