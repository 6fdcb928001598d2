"""`translator prepare`: raw corpus files → normalised, filtered, deduplicated, split pairs
and one SentencePiece model per language, all written into `data.dir`.

    read (readers) → normalise → drop empty → drop too long / bad length ratio
      → drop exact duplicates → split by English sentence → write → train tokenizers
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from translator.config import DataConfig
from translator.data.normalize import normalize_en, to_simplified
from translator.data.readers import ReadStats, check_input, detect_format, read_pairs
from translator.data.tokenizer import train_tokenizer
from translator.errors import UserError

SPLITS = ("train", "valid", "test")
LANGS = ("en", "zh")


@dataclass
class Prepared:
    dir: Path
    stats: dict


def split_file(data_dir: Path | str, split: str, lang: str) -> Path:
    return Path(data_dir) / f"{split}.{lang}"


def tokenizer_file(data_dir: Path | str, lang: str) -> Path:
    return Path(data_dir) / f"spm.{lang}.model"


def read_lines(path: Path) -> list[str]:
    if not path.is_file():
        raise UserError(f"file not found: {path}")
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def read_split(data_dir: Path | str, split: str) -> tuple[list[str], list[str]]:
    """The (English, Chinese) lines of one prepared split."""
    en, zh = (read_lines(split_file(data_dir, split, lang)) for lang in LANGS)
    if len(en) != len(zh):
        raise UserError(f"{split_file(data_dir, split, 'en')} and its .zh file differ in length")
    return en, zh


def prepare(
    config: DataConfig, inputs: list[str] | None = None, fmt: str | None = None
) -> Prepared:
    paths = [Path(p) for p in (inputs or config.inputs)]
    if not paths:
        raise UserError("no input files: pass --input or set data.inputs in the config")
    fmt = fmt or config.format
    for path in paths:
        check_input(path)

    read = ReadStats()
    frames, per_input = [], []
    for path in paths:
        before = (read.rows, read.malformed)
        file_format = detect_format(path) if fmt == "auto" else fmt
        frames.extend(read_pairs(path, file_format, read))
        per_input.append(
            {
                "path": str(path),
                "format": file_format,
                "rows": read.rows - before[0],
                "malformed": read.malformed - before[1],
            }
        )
    pairs = pd.concat(frames, ignore_index=True)
    pairs, counts = clean(pairs, config)
    if pairs.empty:
        raise UserError(
            f"no usable pair in {', '.join(map(str, paths))} "
            f"({read.rows} rows read, {read.malformed} malformed)"
        )
    split = split_by_source(pairs["en"], config.valid_size, config.test_size, config.seed)
    pairs = pairs.loc[split.index].assign(split=split)

    out = Path(config.dir)
    out.mkdir(parents=True, exist_ok=True)
    for split in SPLITS:
        part = pairs[pairs["split"] == split]
        for lang in LANGS:
            split_file(out, split, lang).write_text(
                "".join(s + "\n" for s in part[lang]), encoding="utf-8"
            )
    for lang, vocab, coverage in (
        ("en", config.src_vocab_size, 1.0),
        ("zh", config.tgt_vocab_size, 0.9995),
    ):
        key = "data.src_vocab_size" if lang == "en" else "data.tgt_vocab_size"
        train_tokenizer(split_file(out, "train", lang), out / f"spm.{lang}", vocab, coverage, key)

    stats = {
        "inputs": per_input,
        "rows_read": read.rows,
        "malformed": read.malformed,
        "malformed_examples": [str(m) for m in read.examples],
        **counts,
        "pairs": len(pairs),
        "splits": {s: int((pairs["split"] == s).sum()) for s in SPLITS},
    }
    (out / "stats.json").write_text(json.dumps(stats, indent=2, ensure_ascii=False) + "\n")
    return Prepared(out, stats)


def clean(pairs: pd.DataFrame, config: DataConfig) -> tuple[pd.DataFrame, dict]:
    """Normalise, then drop empty sides, over-long pairs, implausible length ratios and
    exact duplicates. Each dropped pair is counted under the first reason that applies."""
    zh_unconverted = pairs["zh"].map(normalize_en)  # the same steps as English first
    zh = zh_unconverted.map(to_simplified)
    converted = int((zh != zh_unconverted).sum())
    pairs = pd.DataFrame({"en": pairs["en"].map(normalize_en), "zh": zh}, dtype=str)

    empty = (pairs["en"] == "") | (pairs["zh"] == "")
    pairs = pairs[~empty]
    en_len, zh_len = pairs["en"].str.len(), pairs["zh"].str.len()
    too_long = (en_len > config.max_chars) | (zh_len > config.max_chars)
    ratio = en_len / zh_len
    bad_ratio = ~too_long & ((ratio < config.min_length_ratio) | (ratio > config.max_length_ratio))
    pairs = pairs[~(too_long | bad_ratio)]
    duplicate = pairs.duplicated(["en", "zh"])
    pairs = pairs[~duplicate].reset_index(drop=True)
    counts = {
        "traditional_converted": converted,
        "empty": int(empty.sum()),
        "too_long": int(too_long.sum()),
        "bad_length_ratio": int(bad_ratio.sum()),
        "filtered": int(too_long.sum() + bad_ratio.sum()),
        "duplicates": int(duplicate.sum()),
    }
    return pairs, counts


def split_by_source(en: pd.Series, valid_size: int, test_size: int, seed: int) -> pd.Series:
    """Assign each pair to train/valid/test so that all pairs sharing an English sentence
    land in the same split. English sentences are shuffled with `seed`; whole groups fill
    test, then valid, until each holds at least its size in pairs; the rest is train.
    The returned Series is ordered by that shuffle, so files come out in random order."""
    sentences, group, sizes = np.unique(
        en.to_numpy(dtype=object), return_inverse=True, return_counts=True
    )
    if valid_size + test_size >= len(en):
        raise UserError(
            f"only {len(en)} usable pairs: data.valid_size ({valid_size}) + data.test_size "
            f"({test_size}) leaves nothing to train on"
        )
    order = np.random.default_rng(seed).permutation(len(sentences))
    filled_before = np.cumsum(sizes[order]) - sizes[order]  # pairs assigned before each group
    names = np.full(len(sentences), "train", dtype=object)
    names[order[filled_before < test_size]] = "test"
    in_valid = (filled_before >= test_size) & (filled_before < test_size + valid_size)
    names[order[in_valid]] = "valid"
    rank = np.empty(len(sentences), dtype=np.int64)
    rank[order] = np.arange(len(sentences))
    result = pd.Series(names[group], index=en.index)
    return result.iloc[np.argsort(rank[group], kind="stable")]
