"""One chunk of raw pairs → normalised, filtered pairs and their 64-bit keys.

A pure function of the chunk and the config, so `prepare` runs it in worker processes on
blocks of the input, and the whole corpus is deduplicated and grouped afterwards from the
keys alone (integer arrays, never a set of strings).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd

from translator.config import DataConfig
from translator.corpus.split import hashed, sentence_keys
from translator.data.normalization import has_traditional, normalize_en, to_simplified


@dataclass
class Cleaned:
    pairs: pd.DataFrame  # columns en, zh: the pairs kept, in input order
    pair_key: np.ndarray  # uint64 hash of (en, zh), one per kept pair
    en_key: np.ndarray  # uint64 loose key of the English side
    zh_key: np.ndarray  # uint64 loose key of the Chinese side
    en_hash: np.ndarray  # uint64 hash of the English side as written (counts sentences)
    counts: Counter  # pairs dropped by reason, and traditional lines converted


def normalize_pairs(pairs: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Both sides normalised (traditional Chinese made simplified), and how many lines that
    conversion changed."""
    zh = pairs["zh"].map(normalize_en)  # the same steps as English first
    traditional = zh.map(has_traditional).astype(bool)
    simplified = zh[traditional].map(to_simplified)
    converted = int((simplified != zh[traditional]).sum())
    zh[traditional] = simplified
    return pd.DataFrame({"en": pairs["en"].map(normalize_en), "zh": zh}, dtype=str), converted


def clean_chunk(raw: pd.DataFrame, data_cfg: DataConfig) -> Cleaned:
    """Normalise, then drop empty sides, over-long pairs and implausible length ratios, each
    dropped pair counted under the first reason that applies; key what is left."""
    pairs, converted = normalize_pairs(raw)
    empty = (pairs["en"] == "") | (pairs["zh"] == "")
    pairs = pairs[~empty]
    en_len, zh_len = pairs["en"].str.len(), pairs["zh"].str.len()
    too_long = (en_len > data_cfg.max_chars) | (zh_len > data_cfg.max_chars)
    ratio = en_len / zh_len
    bad_ratio = ~too_long & (
        (ratio < data_cfg.min_length_ratio) | (ratio > data_cfg.max_length_ratio)
    )
    pairs = pairs[~(too_long | bad_ratio)].reset_index(drop=True)
    counts = Counter(
        traditional_converted=converted,
        empty=int(empty.sum()),
        too_long=int(too_long.sum()),
        bad_length_ratio=int(bad_ratio.sum()),
    )
    return Cleaned(
        pairs,
        hashed(pairs[["en", "zh"]]),
        sentence_keys(pairs["en"]),
        sentence_keys(pairs["zh"]),
        hashed(pairs["en"]),
        counts,
    )


def first_occurrences(pair_key: np.ndarray) -> np.ndarray:
    """Bool mask: True for the first pair with each key (exact duplicates after it False)."""
    _, first = np.unique(pair_key, return_index=True)
    keep = np.zeros(len(pair_key), dtype=bool)
    keep[first] = True
    return keep
