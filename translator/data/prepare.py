"""`translator prepare`: raw corpus files → normalised, filtered, deduplicated, split pairs
and one SentencePiece model per language, all written into `data.dir`.

    read (readers) → normalise → drop empty → drop too long / bad length ratio
      → drop exact duplicates → split by connected groups (split.py) → write
      → train tokenizers
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from translator.config import DataConfig
from translator.data.layout import LANGS, SPLITS, split_file, stats_file
from translator.data.lines import write_lines
from translator.data.normalize import has_traditional, normalize_en, to_simplified
from translator.data.readers import ReadStats, check_input, detect_format, read_pairs
from translator.data.split import held_out_cap, split_pairs
from translator.data.tokenizer import train_tokenizer
from translator.errors import UserError


@dataclass
class Prepared:
    dir: Path
    stats: dict


def output_dir_for(inputs: list[str]) -> Path:
    """Where `prepare --input FILE` writes when no --out is given: data/prepared/<name of the
    first input>, so preparing another corpus never overwrites the configured one."""
    name = re.sub(r"[^\w.+-]+", "_", Path(inputs[0]).name.split(".")[0]) or "corpus"
    return Path("data/prepared") / (name if len(inputs) == 1 else f"{name}+{len(inputs) - 1}")


def read_inputs(paths: list[Path], fmt: str) -> tuple[pd.DataFrame, ReadStats, list[dict]]:
    """Every input's raw pairs, the read statistics, and a summary per input."""
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
    pairs = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["en", "zh"])
    return pairs.astype(str), read, per_input


def prepare(
    config: DataConfig, inputs: list[str] | None = None, fmt: str | None = None
) -> Prepared:
    paths = [Path(p) for p in (inputs or config.inputs)]
    if not paths:
        raise UserError("no input files: pass --input or set data.inputs in the config")
    raw, read, per_input = read_inputs(paths, fmt or config.format)
    pairs, counts = clean(raw, config)
    if pairs.empty:
        raise UserError(
            f"no usable pair in {', '.join(map(str, paths))} "
            f"({read.rows} rows read, {read.malformed} malformed)"
        )
    split = split_pairs(pairs["en"], pairs["zh"], config.valid_size, config.test_size, config.seed)
    pairs = pairs.loc[split.names.index].assign(split=split.names)

    out = Path(config.dir)
    out.mkdir(parents=True, exist_ok=True)
    for name in SPLITS:
        part = pairs[pairs["split"] == name]
        for lang in LANGS:
            write_lines(split_file(out, name, lang), part[lang].tolist())
    vocab = {
        "en": train_tokenizer(
            split_file(out, "train", "en"),
            out / "spm.en",
            config.src_vocab_size,
            1.0,
            "data.src_vocab_size",
        ),
        "zh": train_tokenizer(
            split_file(out, "train", "zh"),
            out / "spm.zh",
            config.tgt_vocab_size,
            0.9995,
            "data.tgt_vocab_size",
            byte_fallback=config.byte_fallback,
        ),
    }
    stats = {
        "inputs": per_input,
        "rows_read": read.rows,
        "headers": read.headers,
        "malformed": read.malformed,
        "malformed_by_kind": dict(sorted(read.kinds.items())),
        "malformed_examples": [str(m) for m in read.examples],
        **counts,
        "pairs": len(pairs),
        "groups": split.groups,
        "largest_group": split.largest_group,
        "groups_too_large_for_held_out": split.kept_in_train,
        "held_out_group_limit": {
            "valid": held_out_cap(config.valid_size),
            "test": held_out_cap(config.test_size),
        },
        "splits": {s: int((pairs["split"] == s).sum()) for s in SPLITS},
        "english_sentences": {
            s: int(pairs.loc[pairs["split"] == s, "en"].nunique()) for s in SPLITS
        },
        "vocab_size": vocab,
        "byte_fallback": config.byte_fallback,
    }
    stats_file(out).write_text(json.dumps(stats, indent=2, ensure_ascii=False) + "\n")
    return Prepared(out, stats)


def clean(pairs: pd.DataFrame, config: DataConfig) -> tuple[pd.DataFrame, dict]:
    """Normalise, then drop empty sides, over-long pairs, implausible length ratios and
    exact duplicates. Each dropped pair is counted under the first reason that applies."""
    zh = pairs["zh"].map(normalize_en)  # the same steps as English first
    traditional = zh.map(has_traditional).astype(bool)
    simplified = zh[traditional].map(to_simplified)
    converted = int((simplified != zh[traditional]).sum())
    zh[traditional] = simplified
    pairs = pd.DataFrame({"en": pairs["en"].map(normalize_en), "zh": zh}, dtype=str)

    empty = (pairs["en"] == "") | (pairs["zh"] == "")
    pairs = pairs[~empty]
    en_len, zh_len = pairs["en"].str.len(), pairs["zh"].str.len()
    too_long = (en_len > config.max_chars) | (zh_len > config.max_chars)
    ratio = en_len / zh_len
    bad_ratio = ~too_long & ((ratio < config.min_length_ratio) | (ratio > config.max_length_ratio))
    pairs = pairs[~(too_long | bad_ratio)]
    pair_hash = pd.util.hash_pandas_object(pairs[["en", "zh"]], index=False)
    duplicate = pair_hash.duplicated()  # 64-bit hashes of both sides, not the strings
    pairs = pairs[~duplicate.to_numpy()].reset_index(drop=True)
    counts = {
        "traditional_converted": converted,
        "empty": int(empty.sum()),
        "too_long": int(too_long.sum()),
        "bad_length_ratio": int(bad_ratio.sum()),
        "filtered": int(too_long.sum() + bad_ratio.sum()),
        "duplicates": int(duplicate.sum()),
    }
    return pairs, counts
