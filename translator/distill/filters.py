"""The filters of sequence-level knowledge distillation: the teacher's failures, which a
student should not learn, each dropped output counted under the first reason that applies:

    empty             nothing written
    loop              a span of 2–20 characters three or more times in a row
    too_long          longer than data.max_chars, as `prepare` drops a human pair
    bad_length_ratio  outside [data.min_length_ratio, data.max_length_ratio], as in `prepare`

Outputs are normalised first as `prepare` normalises a human translation.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pandas as pd

from translator.config import DataConfig
from translator.corpus.cleaning import normalize_pairs

REASONS = ("empty", "loop", "too_long", "bad_length_ratio")
LOOP = re.compile(r"(.{2,20}?)\1{2,}")  # a short span, then itself twice more


def loops(text: pd.Series) -> np.ndarray:
    """Bool per line: whether it repeats a short span three or more times in a row."""
    return np.fromiter((LOOP.search(s) is not None for s in text), dtype=bool, count=len(text))


def filter_outputs(
    en: pd.Series, zh: pd.Series, data_cfg: DataConfig
) -> tuple[pd.DataFrame, np.ndarray, Counter]:
    """English sources and the teacher's outputs, line for line → the pairs (normalised),
    a bool mask of those kept, and the dropped counted by reason."""
    pairs, _ = normalize_pairs(pd.DataFrame({"en": en, "zh": zh}, dtype=str))
    en_len, zh_len = pairs["en"].str.len().to_numpy(), pairs["zh"].str.len().to_numpy()
    empty = (zh_len == 0) | (en_len == 0)
    loop = ~empty & loops(pairs["zh"])
    too_long = ~empty & ~loop & ((en_len > data_cfg.max_chars) | (zh_len > data_cfg.max_chars))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = en_len / zh_len
    bad_ratio = ~(empty | loop | too_long) & (
        (ratio < data_cfg.min_length_ratio) | (ratio > data_cfg.max_length_ratio)
    )
    dropped = {"empty": empty, "loop": loop, "too_long": too_long, "bad_length_ratio": bad_ratio}
    counts = Counter({reason: int(mask.sum()) for reason, mask in dropped.items()})
    keep = ~(empty | loop | too_long | bad_ratio)
    return pairs, keep, counts
