"""Write the split files in the split's order without holding the corpus in memory.

The pairs sit in work files in input order. An external bucket sort puts each kept pair at
its position in the output: pass 1 appends each block's lines to bucket files by output
position (BUCKET_ROWS per bucket), pass 2 sorts each bucket in turn and appends its lines to
their splits, so memory holds one block or one bucket of lines at a time.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from translator.corpus.split import SplitPlan
from translator.data.layout import LANGS, SPLITS, split_file

BUCKET_ROWS = 500_000


def write_splits(
    block_files: list[Path], keep: np.ndarray, plan: SplitPlan, out_dir: Path, work_dir: Path
) -> None:
    """`keep` marks, over all pairs of the block files in order, the pairs that were kept;
    `plan` is over the kept pairs. Writes {train,valid,test}.{en,zh} into `out_dir`."""
    position = np.full(len(keep), -1, dtype=np.int64)  # output position, -1: dropped
    position[np.flatnonzero(keep)[plan.order]] = np.arange(len(plan.order))
    split = np.full(len(keep), -1, dtype=np.int8)
    split[keep] = plan.split
    bucket = np.where(position >= 0, position // BUCKET_ROWS, -1)
    buckets = -(-len(plan.order) // BUCKET_ROWS)
    _to_buckets(block_files, bucket, buckets, work_dir)
    outputs = {
        (name, lang): split_file(out_dir, name, lang).open("w", encoding="utf-8")
        for name in SPLITS
        for lang in LANGS
    }
    try:
        for b in range(buckets):
            rows = np.flatnonzero(bucket == b)  # in input order, as pass 1 appended them
            order = np.argsort(position[rows], kind="stable")
            for lang in LANGS:
                path = _bucket_file(work_dir, b, lang)
                lines = np.array(_read(path), dtype=object)[order]
                path.unlink()
                for s, name in enumerate(SPLITS):
                    chosen = lines[split[rows[order]] == s]
                    outputs[name, lang].write("".join(line + "\n" for line in chosen))
    finally:
        for f in outputs.values():
            f.close()


def _to_buckets(block_files: list[Path], bucket: np.ndarray, buckets: int, work_dir: Path) -> None:
    files = {
        (b, lang): _bucket_file(work_dir, b, lang).open("w", encoding="utf-8")
        for b in range(buckets)
        for lang in LANGS
    }
    try:
        start = 0
        for block in block_files:
            for lang in LANGS:
                path = block.with_suffix(f".{lang}")
                lines = np.array(_read(path), dtype=object)
                path.unlink()
                here = bucket[start : start + len(lines)]
                for b in np.unique(here[here >= 0]):
                    files[b, lang].write("".join(line + "\n" for line in lines[here == b]))
            start += len(lines)
    finally:
        for f in files.values():
            f.close()


def _bucket_file(work_dir: Path, bucket: int, lang: str) -> Path:
    return work_dir / f"bucket-{bucket:05d}.{lang}"


def _read(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return text.split("\n")[:-1] if text else []
