"""The filters of sequence-level knowledge distillation: which of a teacher's translations
a student should not learn from. A teacher that has not learnt a sentence writes nothing,
loops ("我很喜欢我很喜欢我很喜欢…" until the length limit) or writes far too much or too
little; such outputs teach the student the failure, so they are dropped and counted, each
under the first reason that applies:

    empty             nothing written
    loop              a span of 2–20 characters three or more times in a row
    too_long          longer than data.max_chars, as `prepare` drops a human pair
    bad_length_ratio  English characters per Chinese character outside
                      [data.min_length_ratio, data.max_length_ratio], as `prepare` does

Outputs are normalised as `prepare` normalises a human translation (traditional characters
made simplified) before they are judged, so a distilled pair is held to the same rules as
the pairs it replaces.
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
    bad_ratio = (
        ~empty
        & ~loop
        & ~too_long
        & ((ratio < data_cfg.min_length_ratio) | (ratio > data_cfg.max_length_ratio))
    )
    dropped = {"empty": empty, "loop": loop, "too_long": too_long, "bad_length_ratio": bad_ratio}
    counts = Counter({reason: int(mask.sum()) for reason, mask in dropped.items()})
    keep = ~(empty | loop | too_long | bad_ratio)
    return pairs, keep, counts
