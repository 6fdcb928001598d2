"""Decontamination: drop every pair that shares a sentence with a test set (`data.exclude`;
docs/data.md). Only 64-bit keys are held, never the text: a hash collision can only drop a
pair too many, never keep one.
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
    en, zh, sentences = [np.zeros(0, np.uint64)], [np.zeros(0, np.uint64)], 0
    for name in paths:
        check_input(Path(name))
        for block in blocks(Path(name)):
            fields = decode_lines(block).str.split("\t").explode().str.strip()
            fields = fields[fields != ""]
            sentences += len(fields)
            pairs, _ = normalize_pairs(pd.DataFrame({"en": fields, "zh": fields}, dtype=str))
            en.append(sentence_keys(pairs["en"]))
            zh.append(sentence_keys(pairs["zh"]))
    return Excluded(np.unique(np.concatenate(en)), np.unique(np.concatenate(zh)), sentences)


def excluded_mask(en_key: np.ndarray, zh_key: np.ndarray, excluded: Excluded) -> np.ndarray:
    """True for each pair with a side among the excluded sentences."""
    return np.isin(en_key, excluded.en) | np.isin(zh_key, excluded.zh)
