"""`translator prepare`: raw corpus files → normalised, filtered, deduplicated, split pairs,
one SentencePiece model per language, and the splits encoded as id arrays, all written
into `data.dir`.

    read in blocks → normalise, filter, key (worker processes; scan.py)
      → drop exact duplicates and split by connected groups, on 64-bit keys (split.py)
      → write the splits in the split's order (split_writer.py) → train tokenizers on a sample
      → encode the splits (data/ids.py) → stats.json

Memory holds a few blocks of text and a few integers per pair, never the corpus: 5 million
pairs prepare within 2 GB (docs/performance.md). The output depends on the inputs, the
config and the seed only, not on the number of workers.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from translator.config import DataConfig
from translator.corpus.cleaning import first_occurrences
from translator.corpus.readers import check_format
from translator.corpus.scan import Scan, scan
from translator.corpus.split import SplitPlan, held_out_cap, plan_split
from translator.corpus.split_writer import write_splits
from translator.data.ids import encode_splits, meta_file
from translator.data.layout import SPLITS, split_file, stats_file
from translator.data.tokenizer import Sample, train_tokenizer
from translator.errors import UserError
from translator.runtime import worker_count


@dataclass
class Prepared:
    dir: Path
    stats: dict
    seconds: dict[str, float]  # per stage (not in stats.json, which depends on the data only)
    workers: int  # processes that read the input


def output_dir_for(inputs: list[str]) -> Path:
    """Where `prepare --input FILE` writes when no --out is given: data/prepared/<name of the
    first input>, so preparing another corpus never overwrites the configured one."""
    name = re.sub(r"[^\w.+-]+", "_", Path(inputs[0]).name.split(".")[0]) or "corpus"
    return Path("data/prepared") / (name if len(inputs) == 1 else f"{name}+{len(inputs) - 1}")


def prepare(config: DataConfig) -> Prepared:
    """Prepare `config.inputs` into `config.dir` (see the module docstring)."""
    paths = [Path(p) for p in config.inputs]
    if not paths:
        raise UserError("no input files: pass --input or set data.inputs in the config")
    sources = [(path, check_format(path, config.format)) for path in paths]
    out = Path(config.dir)
    out.mkdir(parents=True, exist_ok=True)
    for stale in [stats_file(out), meta_file(out), *out.glob(".prepare-*")]:
        shutil.rmtree(stale) if stale.is_dir() else stale.unlink(missing_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".prepare-", dir=out))
    seconds: dict[str, float] = {}
    try:
        stats, workers = _prepare(config, sources, out, work, seconds)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    stats_file(out).write_text(json.dumps(stats, indent=2, ensure_ascii=False) + "\n")
    return Prepared(out, stats, seconds, workers)


def _prepare(
    config: DataConfig, sources: list[tuple[Path, str]], out: Path, work: Path, seconds: dict
) -> tuple[dict, int]:
    """The stats, and the number of processes that read the input."""
    workers = worker_count(config.workers)
    with _stage(seconds, "read"):
        scanned = scan(sources, config, work)
    keep = first_occurrences(scanned.pair_key)
    if not keep.any():
        read = scanned.read
        raise UserError(
            f"no usable pair in {', '.join(str(p) for p, _ in sources)} "
            f"({read.rows} rows read, {read.malformed} malformed)"
        )
    with _stage(seconds, "split"):
        plan = plan_split(
            scanned.en_key[keep],
            scanned.zh_key[keep],
            config.valid_size,
            config.test_size,
            config.seed,
        )
    with _stage(seconds, "write"):
        write_splits(scanned.block_files, keep, plan, out, work)
    with _stage(seconds, "tokenizers"):
        vocab = _train_tokenizers(config, out, workers)
    with _stage(seconds, "encode"):
        tokens = encode_splits(out, workers)
    stats = _stats(config, scanned, keep, plan) | {
        "vocab_size": vocab,
        "byte_fallback": config.byte_fallback,
        "tokens": tokens,
    }
    return stats, scanned.workers


@contextmanager
def _stage(seconds: dict[str, float], name: str) -> Iterator[None]:
    start = time.perf_counter()
    yield
    seconds[name] = time.perf_counter() - start


def _train_tokenizers(config: DataConfig, out: Path, workers: int) -> dict[str, int]:
    sample = Sample(config.tokenizer_sentences, config.seed, workers)
    return {
        "en": train_tokenizer(
            split_file(out, "train", "en"),
            out / "spm.en",
            config.src_vocab_size,
            1.0,
            "data.src_vocab_size",
            sample=sample,
        ),
        "zh": train_tokenizer(
            split_file(out, "train", "zh"),
            out / "spm.zh",
            config.tgt_vocab_size,
            0.9995,
            "data.tgt_vocab_size",
            byte_fallback=config.byte_fallback,
            sample=sample,
        ),
    }


def _stats(config: DataConfig, scanned: Scan, keep: np.ndarray, plan: SplitPlan) -> dict:
    read, counts = scanned.read, scanned.counts
    en_hash = scanned.en_hash[keep]
    return {
        "inputs": scanned.per_input,
        "rows_read": read.rows,
        "headers": read.headers,
        "malformed": read.malformed,
        "malformed_by_kind": dict(sorted(read.kinds.items())),
        "malformed_examples": [str(m) for m in read.examples],
        "traditional_converted": counts["traditional_converted"],
        "empty": counts["empty"],
        "too_long": counts["too_long"],
        "bad_length_ratio": counts["bad_length_ratio"],
        "filtered": counts["too_long"] + counts["bad_length_ratio"],
        "duplicates": int((~keep).sum()),
        "pairs": int(keep.sum()),
        "groups": plan.groups,
        "largest_group": plan.largest_group,
        "groups_too_large_for_held_out": plan.kept_in_train,
        "held_out_group_limit": {
            "valid": held_out_cap(config.valid_size),
            "test": held_out_cap(config.test_size),
        },
        "splits": {s: int((plan.split == i).sum()) for i, s in enumerate(SPLITS)},
        "english_sentences": {
            s: len(np.unique(en_hash[plan.split == i])) for i, s in enumerate(SPLITS)
        },
    }
