"""The streaming pass of `prepare`: every input, block by block, parsed, normalised and
filtered in worker processes; the kept pairs go to a work file per block, and only their
64-bit keys come back to the main process.

Blocks are numbered in input order and their results taken in that order, so the output
is the same for any number of workers. Memory: a few blocks in flight, plus 24 bytes of
keys and a corpus number per kept pair.
"""

from __future__ import annotations

import multiprocessing
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
from tqdm import tqdm

from translator.config import DataConfig
from translator.corpus.cleaning import clean_chunk
from translator.corpus.formats import readers, sources
from translator.corpus.formats.read_stats import ReadStats
from translator.corpus.formats.sources import Source
from translator.runtime import worker_count


@dataclass
class BlockResult:
    source: Source  # the corpus the block came from
    size: int  # bytes read
    rows: int  # pairs kept in the block's work files
    keys: tuple[np.ndarray, ...]  # pair_key, en_key, zh_key, en_hash
    counts: Counter
    read: ReadStats


@dataclass
class Scan:
    block_files: list[Path]  # work files, without the .en/.zh suffix, in input order
    pair_key: np.ndarray  # one entry per pair in the work files, in order
    en_key: np.ndarray
    zh_key: np.ndarray
    en_hash: np.ndarray
    corpus: np.ndarray  # uint16: the index in data.inputs of each pair's corpus
    counts: Counter = field(default_factory=Counter)
    read: ReadStats = field(default_factory=ReadStats)
    per_input: list[dict] = field(default_factory=list)  # one per corpus, in input order
    workers: int = 1  # processes that read


def process_block(job: tuple[Source, object, Path], data_cfg: DataConfig) -> BlockResult:
    source, block, out = job
    raw, read = sources.parse(source, block)
    cleaned = clean_chunk(raw, data_cfg)
    for lang in ("en", "zh"):
        text = "".join(line + "\n" for line in cleaned.pairs[lang])
        out.with_suffix(f".{lang}").write_text(text, encoding="utf-8")
    keys = cleaned.pair_key, cleaned.en_key, cleaned.zh_key, cleaned.en_hash
    return BlockResult(source, block.size, len(cleaned.pairs), keys, cleaned.counts, read)


def ordered_map(fn: Callable, items: Iterable, workers: int) -> Iterator:
    """`fn` over `items` in `workers` processes, results in item order. At most two items
    per worker are in flight, so the input is never all in memory. One worker: inline."""
    if workers <= 1:
        yield from map(fn, items)
        return
    # fork where there is one: workers start at once with the modules already imported, and
    # a user's script calling prepare() needs no `if __name__ == "__main__"` guard
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        pending: deque = deque()
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def scan(corpora: list[Source], data_cfg: DataConfig, work_dir: Path) -> Scan:
    """Stream every corpus through `process_block` (see the module docstring)."""
    blocks = ((source, block) for source in corpora for block in sources.blocks(source))
    jobs = ((source, block, block_file(work_dir, i)) for i, (source, block) in enumerate(blocks))
    workers = worker_count(data_cfg.workers)
    size = sum(source.size for source in corpora)
    if size <= 2 * readers.BLOCK_BYTES:
        workers = 1  # starting processes costs more than it saves
    out = Scan([], *(np.zeros(0, np.uint64) for _ in range(4)), np.zeros(0, np.uint16))
    out.workers = workers
    out.per_input = [_summary(source) for source in corpora]
    keys: list[tuple[np.ndarray, ...]] = []
    bar = tqdm(total=size, desc="reading", unit="B", unit_scale=True, leave=False, disable=None)
    results = ordered_map(partial(process_block, data_cfg=data_cfg), jobs, workers)
    for i, result in enumerate(results):
        bar.update(result.size)
        summary = out.per_input[result.source.index]  # the block's corpus
        summary["rows"] += result.read.rows
        summary["malformed"] += result.read.malformed
        for reason in _DROPPED:
            summary[reason] += result.counts[reason]
        out.counts.update(result.counts)
        out.read.merge(result.read)
        out.block_files.append(block_file(work_dir, i))
        keys.append((*result.keys, np.full(result.rows, result.source.index, np.uint16)))
    bar.close()
    if keys:
        columns = zip(*keys, strict=True)
        out.pair_key, out.en_key, out.zh_key, out.en_hash, out.corpus = map(np.concatenate, columns)
    return out


_DROPPED = ("empty", "too_long", "bad_length_ratio")  # cleaning's reasons, counted per corpus


def _summary(source: Source) -> dict:
    return {
        "name": source.name,
        "paths": list(source.paths),
        "files": [str(f) for f in source.files],
        "format": source.format,
        "weight": source.weight,
        "train_only": source.train_only,
        **dict.fromkeys(("rows", "malformed", *_DROPPED), 0),
    }


def block_file(work_dir: Path, index: int) -> Path:
    return work_dir / f"block-{index:06d}"
