"""A train/valid/test split that cannot leak: pairs that share a sentence on either side are
grouped, and every group goes whole to one split.

    sentence keys (64-bit hashes) → connected groups (union-find over integer ids)
      → groups ranked by a seeded hash of their content → test, then valid, filled with
        whole groups → the rest is train

Two pairs are linked when their English sentences, or their Chinese sentences, are the same
after a loose normalisation (case folded, punctuation and spaces removed), so "I know that
Tom is a little worried." and "I know Tom is a little worried.", both translated
我知道汤姆有点担心。, share a group, and so do "Hi!" and "hi." Links are transitive: the
groups are the connected components of that graph. No Python set of strings is built: each
sentence becomes a 64-bit hash, and the components are found with vectorised min-label
propagation and pointer jumping over integer arrays, which works the same at millions of
pairs. (A hash collision can only merge two groups, never split one: it cannot leak.)

The rank of a group depends on the seed and on its sentences, not on the row order, so the
same pairs give the same split in any order. A group larger than a tenth of a held-out split
(at least 5 pairs) is kept in train, so one huge group of generic sentences cannot fill a
test set on its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from translator.errors import UserError

SPLIT_NAMES = ("train", "valid", "test")
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _hash(text: pd.Series) -> np.ndarray:
    return pd.util.hash_pandas_object(text, index=False).to_numpy(dtype=np.uint64)


def loose_form(text: pd.Series) -> pd.Series:
    """Case folded, each run of punctuation, symbols and spaces made one space, ends
    stripped: "I'm OK!" and "i'm ok." both become "i m ok"; 好。 and 好！ become 好."""
    words = text.astype(object).str.casefold().str.replace(r"[\W_]+", " ", regex=True)
    return words.str.strip()


def sentence_keys(text: pd.Series) -> np.ndarray:
    """One uint64 key per sentence: the hash of its loose form, or of the sentence itself
    when nothing is left of it (a line of punctuation must not link to every other one)."""
    loose = loose_form(text)
    return np.where(loose.to_numpy() == "", _hash(text), _hash(loose))


def _mix(values: np.ndarray, seed: int) -> np.ndarray:
    """splitmix64 of values ^ seed: a seeded, well-spread uint64 per value."""
    with np.errstate(over="ignore"):
        z = values ^ (np.uint64(seed) * _GOLDEN)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def connected_groups(*keys: np.ndarray) -> np.ndarray:
    """Rows that share a value in any key column are connected; returns, for each row, the
    smallest row index of its connected component (its group label).

    Min-label propagation with pointer jumping: each round every row takes the smallest
    label among the rows sharing one of its keys, then follows labels to their roots. Labels
    only decrease, so it stops; at the fixed point all rows of a component agree."""
    n = len(keys[0])
    ids = [np.unique(k, return_inverse=True)[1].ravel() for k in keys]
    label = np.arange(n)
    while n:
        before = label
        for key_id in ids:
            smallest = np.full(key_id.max() + 1, n)
            np.minimum.at(smallest, key_id, label)
            label = np.minimum(label, smallest[key_id])
        label = _follow_to_roots(label)
        if np.array_equal(label, before):
            break
    return label


def _follow_to_roots(label: np.ndarray) -> np.ndarray:
    while True:
        jumped = label[label]
        if np.array_equal(jumped, label):
            return label
        label = jumped


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
    """Assign each pair to train/valid/test by whole groups (see the module docstring), from
    the sentence keys of its two sides. Groups are taken in seeded order: test until it holds
    at least `test_size` pairs, then valid likewise; the rest is train. A group holding a
    `train_only` pair (bool per pair) stays in train. The order is group by group in that
    order (rows of a group together, in input order), so the files come out shuffled."""
    if valid_size + test_size >= len(en_keys):
        raise UserError(
            f"only {len(en_keys)} usable pairs: data.valid_size ({valid_size}) + "
            f"data.test_size ({test_size}) leaves nothing to train on"
        )
    label = connected_groups(en_keys, zh_keys)
    groups, group_of = np.unique(label, return_inverse=True)
    del label
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
