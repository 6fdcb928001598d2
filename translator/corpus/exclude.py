"""Decontamination: drop every pair that shares a sentence with a test set (`data.exclude`).

Each line of an excluded file is a sentence (each tab-separated field, in a table), in
either language. It is normalised as prepare normalises a pair's English side and, again,
as it normalises a Chinese side (traditional script made simplified), and keyed loosely as
the split keys sentences (split.sentence_keys: case, punctuation and spacing ignored). A
pair is dropped when its English key is among the English keys or its Chinese key among
the Chinese keys. Only 64-bit keys are held (sorted arrays, `np.isin`), never the text, so
test sets of any size cost 16 bytes a sentence; a hash collision can only drop a pair
too many, never keep one that matches.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from translator.corpus.cleaning import normalize_pairs
from translator.corpus.formats.readers import blocks, check_input, decode_lines
from translator.corpus.split import sentence_keys


@dataclass
class Excluded:
    en: np.ndarray  # sorted unique uint64 keys of the sentences as English
    zh: np.ndarray  # ... and as Chinese
    sentences: int  # non-blank sentences read from the files


def excluded_keys(paths: list[str]) -> Excluded:
    """The keys of every sentence in `paths` (plain or compressed text files)."""
    en, zh, sentences = [], [], 0
    for name in paths:
        path = Path(name)
        check_input(path)
        for block in blocks(path):
            fields = decode_lines(block).str.split("\t").explode().str.strip()
            fields = fields[fields != ""]
            sentences += len(fields)
            pairs, _ = normalize_pairs(pd.DataFrame({"en": fields, "zh": fields}, dtype=str))
            en.append(sentence_keys(pairs["en"]))
            zh.append(sentence_keys(pairs["zh"]))
    empty = np.zeros(0, np.uint64)
    return Excluded(
        np.unique(np.concatenate([empty, *en])), np.unique(np.concatenate([empty, *zh])), sentences
    )


def excluded_mask(en_key: np.ndarray, zh_key: np.ndarray, excluded: Excluded) -> np.ndarray:
    """True for each pair with a side among the excluded sentences."""
    return np.isin(en_key, excluded.en) | np.isin(zh_key, excluded.zh)
