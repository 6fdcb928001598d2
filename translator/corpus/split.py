"""The leak-free split: pairs that share a sentence on either side are grouped, and every
group goes whole to one split (docs/data.md#the-split).

Each sentence becomes a 64-bit hash, so no Python set of strings is built (a hash collision
can only merge two groups, never split one: it cannot leak). A group's rank depends on the
seed and its sentences, not on the row order, so the same pairs give the same split in any
order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from translator.errors import UserError

SPLIT_NAMES = ("train", "valid", "test")
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def hashed(values: pd.DataFrame | pd.Series) -> np.ndarray:
    return pd.util.hash_pandas_object(values, index=False).to_numpy(np.uint64)


def loose_form(text: pd.Series) -> pd.Series:
    """Case folded, each run of punctuation, symbols and spaces made one space, ends
    stripped: "I'm OK!" and "i'm ok." both become "i m ok"; 好。 and 好！ become 好."""
    return text.astype(object).str.casefold().str.replace(r"[\W_]+", " ", regex=True).str.strip()


def sentence_keys(text: pd.Series) -> np.ndarray:
    """One uint64 key per sentence: the hash of its loose form, or of the sentence itself
    when nothing is left of it (a line of punctuation must not link to every other one)."""
    loose = loose_form(text)
    return np.where(loose.to_numpy() == "", hashed(text), hashed(loose))


def _mix(values: np.ndarray, seed: int) -> np.ndarray:
    """splitmix64 of values ^ seed: a seeded, well-spread uint64 per value."""
    with np.errstate(over="ignore"):
        z = values ^ (np.uint64(seed) * _GOLDEN)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def connected_groups(*keys: np.ndarray) -> np.ndarray:
    """Rows that share a value in any key column are connected; returns, for each row, the
    smallest row index of its connected component (its group label). Min-label propagation
    with pointer jumping: labels only decrease, so it stops, and at the fixed point all rows
    of a component agree."""
    n = len(keys[0])
    ids = [np.unique(k, return_inverse=True)[1].ravel() for k in keys]
    label = np.arange(n)
    while n:
        before = label
        for key_id in ids:
            smallest = np.full(key_id.max() + 1, n)
            np.minimum.at(smallest, key_id, label)
            label = np.minimum(label, smallest[key_id])
        while not np.array_equal(jumped := label[label], label):  # follow labels to roots
            label = jumped
        if np.array_equal(label, before):
            break
    return label


@dataclass
class SplitPlan:
    split: np.ndarray  # int8 per pair: its index in SPLIT_NAMES
    order: np.ndarray  # pair indices in the order the files are written
    groups: int
    largest_group: int
    kept_in_train: int


def plan_split(
    en_keys: np.ndarray,
    zh_keys: np.ndarray,
    valid_size: int,
    test_size: int,
    seed: int,
    train_only: np.ndarray | None = None,
) -> SplitPlan:
    """Assign each pair to train/valid/test by whole groups, from the sentence keys of its
    two sides. Groups are taken in seeded order: test until it holds at least `test_size`
    pairs, then valid likewise; the rest is train. A group larger than `held_out_cap`, or
    holding a `train_only` pair, stays in train. The order is group by group in that order
    (rows of a group together, in input order), so the files come out shuffled."""
    if valid_size + test_size >= len(en_keys):
        raise UserError(
            f"only {len(en_keys)} usable pairs: data.valid_size ({valid_size}) + "
            f"data.test_size ({test_size}) leaves nothing to train on"
        )
    groups, group_of = np.unique(connected_groups(en_keys, zh_keys), return_inverse=True)
    sizes = np.bincount(group_of)
    content = np.full(len(groups), np.iinfo(np.uint64).max, dtype=np.uint64)
    np.minimum.at(content, group_of, en_keys)  # a group's identity: its smallest key
    order = np.argsort(_mix(content, seed), kind="stable")

    names = np.zeros(len(groups), dtype=np.int8)  # train
    held_out_ok = np.ones(len(groups), dtype=bool)
    if train_only is not None:
        held_out_ok[group_of[train_only]] = False
    caps = {"test": held_out_cap(test_size), "valid": held_out_cap(valid_size)}
    for name, size in (("test", test_size), ("valid", valid_size)):
        candidate = (sizes[order] <= caps[name]) & (names[order] == 0) & held_out_ok[order]
        counted = np.where(candidate, sizes[order], 0)
        chosen = candidate & (np.cumsum(counted) - counted < size)
        names[order[chosen]] = SPLIT_NAMES.index(name)

    rank = np.empty(len(groups), dtype=np.int64)
    rank[order] = np.arange(len(groups))
    rows = np.lexsort((np.arange(len(en_keys)), rank[group_of]))
    too_large = int((sizes > max(caps.values())).sum())
    return SplitPlan(names[group_of], rows, len(groups), int(sizes.max()), too_large)


def held_out_cap(size: int) -> int:
    """The largest group a held-out split of `size` pairs takes."""
    return max(5, size // 10)
