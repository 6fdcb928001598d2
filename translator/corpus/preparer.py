"""`translator prepare`: raw corpus files → normalised, filtered, deduplicated, split pairs,
one SentencePiece model per language, and the splits encoded as id arrays, all written
into `data.dir`, stage by stage (`_prepare`).

Memory holds a few blocks of text and a few integers per pair, never the corpus
(docs/performance.md#data-at-scale). The output depends on the inputs, the config and the
seed only, not on the number of workers.
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
from itertools import chain
from pathlib import Path

import numpy as np

from translator.config import DataConfig
from translator.corpus.cleaning import first_occurrences
from translator.corpus.exclude import Excluded, excluded_keys, excluded_mask
from translator.corpus.formats.sources import Source, resolve
from translator.corpus.scan import Scan, scan
from translator.corpus.split import SplitPlan, held_out_cap, plan_split
from translator.corpus.split_writer import write_splits
from translator.corpus.vocabulary import coverage, has_byte_fallback, make_tokenizers
from translator.data import known_words
from translator.data.ids import SubwordSampling, encode_splits, meta_file
from translator.data.layout import LANGS, SPLITS, corpus_file, split_file, stats_file, words_file
from translator.data.lines import read_chunks
from translator.data.spans import insert_synthetic, mask_lines
from translator.errors import UserError
from translator.runtime import worker_count


@dataclass
class Prepared:
    dir: Path
    stats: dict
    seconds: dict[str, float]  # per stage (not in stats.json, which depends on the data only)
    workers: int  # processes that read the input


def output_dir_for(first: str, corpora: int) -> Path:
    """Where `prepare --input FILE` (or --pair) writes when no --out is given:
    data/prepared/<name of the first input file>, so preparing another corpus never
    overwrites the configured one."""
    name = re.sub(r"[^\w.+-]+", "_", Path(first).name.split(".")[0]) or "corpus"
    return Path("data/prepared") / (name if corpora == 1 else f"{name}+{corpora - 1}")


def prepare(data_cfg: DataConfig) -> Prepared:
    """Prepare `config.inputs` into `config.dir` (see the module docstring)."""
    corpora = data_cfg.inputs
    if not corpora:
        raise UserError("no input files: pass --input or --pair, or set data.inputs in the config")
    if all(c.train_only for c in corpora) and data_cfg.valid_size + data_cfg.test_size:
        raise UserError(
            "every corpus in data.inputs is train_only: the valid and test splits need one "
            "that is not"
        )
    sources = [resolve(i, corpus, data_cfg.format) for i, corpus in enumerate(corpora)]
    excluded = excluded_keys(data_cfg.exclude)
    out = Path(data_cfg.dir)
    out.mkdir(parents=True, exist_ok=True)
    for stale in [stats_file(out), meta_file(out), *out.glob(".prepare-*")]:
        shutil.rmtree(stale) if stale.is_dir() else stale.unlink(missing_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".prepare-", dir=out))
    seconds: dict[str, float] = {}
    try:
        stats, workers = _prepare(data_cfg, sources, excluded, out, work, seconds)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    stats_file(out).write_text(json.dumps(stats, indent=2, ensure_ascii=False) + "\n")
    return Prepared(out, stats, seconds, workers)


def _prepare(
    data_cfg: DataConfig,
    sources: list[Source],
    excluded: Excluded,
    out: Path,
    work: Path,
    seconds: dict,
) -> tuple[dict, int]:
    """The stats, and the number of processes that read the input."""
    workers = worker_count(data_cfg.workers)
    with _stage(seconds, "read"):
        scanned = scan(sources, data_cfg, work)
    dropped = excluded_mask(scanned.en_key, scanned.zh_key, excluded)
    rows = np.flatnonzero(~dropped)
    keep = np.zeros(len(dropped), dtype=bool)  # the first of each pair not excluded
    keep[rows[first_occurrences(scanned.pair_key[rows])]] = True
    if not keep.any():
        read = scanned.read
        raise UserError(
            f"no usable pair in {', '.join(s.name for s in sources)} "
            f"({read.rows} rows read, {read.malformed} malformed, {int(dropped.sum())} excluded)"
        )
    with _stage(seconds, "split"):
        train_only = [s.index for s in sources if s.train_only]
        plan = plan_split(
            scanned.en_key[keep],
            scanned.zh_key[keep],
            data_cfg.valid_size,
            data_cfg.test_size,
            data_cfg.seed,
            np.isin(scanned.corpus[keep], train_only),
        )
    with _stage(seconds, "write"):
        write_splits(scanned.block_files, keep, plan, out, work)
        ordered = plan.order  # kept pairs in the order the files are written
        np.save(corpus_file(out), scanned.corpus[keep][ordered][plan.split[ordered] == 0])
    placeholders = None
    if data_cfg.placeholders:
        with _stage(seconds, "placeholders"):
            placeholders = mask_train_split(out, data_cfg)
    with _stage(seconds, "words"):
        words = write_words(out)
    with _stage(seconds, "tokenizers"):
        vocab = make_tokenizers(data_cfg, out, workers)
    with _stage(seconds, "encode"):
        encoded = encode_splits(out, workers, SubwordSampling.of(data_cfg))
    stats = _stats(data_cfg, scanned, keep, dropped, plan) | {
        "exclude": {"files": data_cfg.exclude, "sentences": excluded.sentences},
        "tokenizers_from": data_cfg.tokenizers_from,
        "placeholder_pairs": placeholders,
        "english_words": words,
        "vocab_size": vocab,
        "byte_fallback": has_byte_fallback(out),
        "tokens": encoded.tokens,
        "coverage": coverage(encoded, data_cfg.tokenizers_from),
    }
    return stats, scanned.workers


def mask_train_split(out: Path, data_cfg: DataConfig) -> dict[str, int]:
    """data.placeholders: the train split's pairs whose protected spans are on both sides
    rewritten with ⦅n⦆, and a data.synthetic_placeholders share of the others given some;
    returns how many of each. Held-out splits stay as written: eval and translate put the
    placeholders in themselves."""
    files = [split_file(out, "train", lang) for lang in LANGS]
    masked_files = [path.with_suffix(path.suffix + ".masked") for path in files]
    masked = {"spans": 0, "synthetic": 0}
    rng = np.random.default_rng(data_cfg.seed)
    synthetic = data_cfg.synthetic_placeholders
    with (
        masked_files[0].open("w", encoding="utf-8") as en,
        masked_files[1].open("w", encoding="utf-8") as zh,
    ):
        for english, chinese in zip(*(read_chunks(f, 200_000) for f in files), strict=True):
            masked["spans"] += mask_lines(english, chinese)
            masked["synthetic"] += insert_synthetic(english, chinese, rng, synthetic)
            en.write("".join(line + "\n" for line in english))
            zh.write("".join(line + "\n" for line in chinese))
    for path, new in zip(files, masked_files, strict=True):
        new.replace(path)
    return masked


def write_words(out: Path) -> int:
    """words.en, the train split's English words and their counts; how many distinct words."""
    counts = known_words.count(
        chain.from_iterable(read_chunks(split_file(out, "train", "en"), 200_000))
    )
    known_words.write_counts(counts, words_file(out))
    return len(counts)


@contextmanager
def _stage(seconds: dict[str, float], name: str) -> Iterator[None]:
    start = time.perf_counter()
    yield
    seconds[name] = time.perf_counter() - start


def _per_corpus(scanned: Scan, keep: np.ndarray, dropped: np.ndarray, plan: SplitPlan) -> list:
    """Each corpus's summary with what happened to its pairs after reading."""
    n = len(scanned.per_input)
    count = lambda mask: np.bincount(scanned.corpus[mask], minlength=n)  # noqa: E731
    excluded, kept = count(dropped), count(keep)
    duplicates = count(~dropped) - kept
    kept_corpus = scanned.corpus[keep]
    by_split = [np.bincount(kept_corpus[plan.split == i], minlength=n) for i in range(3)]
    out = []
    for c, summary in enumerate(scanned.per_input):
        summary = dict(summary)
        summary.update(excluded=int(excluded[c]), duplicates=int(duplicates[c]))
        summary.update(pairs=int(kept[c]), dropped=int(summary["rows"] - kept[c]))
        summary["splits"] = {s: int(by_split[i][c]) for i, s in enumerate(SPLITS)}
        out.append(summary)
    return out


def _stats(
    data_cfg: DataConfig, scanned: Scan, keep: np.ndarray, dropped: np.ndarray, plan: SplitPlan
) -> dict:
    read, counts = scanned.read, scanned.counts
    en_hash = scanned.en_hash[keep]
    return {
        "inputs": _per_corpus(scanned, keep, dropped, plan),
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
        "excluded": int(dropped.sum()),
        "duplicates": int((~dropped).sum() - keep.sum()),
        "pairs": int(keep.sum()),
        "groups": plan.groups,
        "largest_group": plan.largest_group,
        "groups_too_large_for_held_out": plan.kept_in_train,
        "held_out_group_limit": {
            "valid": held_out_cap(data_cfg.valid_size),
            "test": held_out_cap(data_cfg.test_size),
        },
        "splits": {s: int((plan.split == i).sum()) for i, s in enumerate(SPLITS)},
        "english_sentences": {
            s: len(np.unique(en_hash[plan.split == i])) for i, s in enumerate(SPLITS)
        },
    }
