"""Prepared splits → what training consumes: tokenizers, the batches of the train and valid
splits, and the validation sentences that are translated for BLEU (each distinct English
sentence once, scored against all its translations).

The ids are memory-mapped (ids.py); batches are planned from the length arrays alone and
each is collated from the mapped ids only when training reaches it, so start-up time and
memory do not grow with the corpus.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from translator.config import Config
from translator.data.batching import Batch, collate_padded, plan_batches
from translator.data.ids import Ids, encode_splits, open_ids, up_to_date
from translator.data.layout import group_references, read_split, stats_file, tokenizer_file
from translator.errors import UserError
from translator.runtime import worker_count

log = logging.getLogger(__name__)


class Batches(Sequence[Batch]):
    """Token-budget batches of a split, collated from the mapped ids on access."""

    def __init__(self, src: Ids, tgt: Ids, max_len: int, max_tokens: int):
        self.src, self.tgt = src, tgt
        src_lens, tgt_lens = src.lengths() + 1, tgt.lengths() + 1  # + EOS
        keep = np.flatnonzero((src_lens <= max_len) & (tgt_lens < max_len))  # BOS on target
        self.pairs = len(keep)
        self.dropped = len(src_lens) - len(keep)
        self.groups = [keep[g] for g in plan_batches(src_lens[keep], tgt_lens[keep], max_tokens)]
        sizes = np.array([len(g) for g in self.groups], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        flat = tgt_lens[np.concatenate(self.groups)] if self.groups else np.zeros(0, np.int64)
        self.tokens = np.add.reduceat(flat, starts) if self.groups else flat  # per batch

    def __len__(self) -> int:
        return len(self.groups)

    def __getitem__(self, i: int) -> Batch:  # type: ignore[override]
        rows = self.groups[i]
        return collate_padded(self.src.padded(rows), self.tgt.padded(rows))


@dataclass
class TrainData:
    tokenizer_paths: dict[str, str]
    tokenizer_models: dict[str, bytes]
    train: Batches
    valid: Batches
    bleu_src: list[str]  # distinct English sentences of the valid split ...
    bleu_refs: list[list[str]]  # ... each with all its translations
    train_pairs: int
    dropped: int


def load_training_data(config: Config) -> TrainData:
    data_dir = Path(config.data.dir)
    paths = {"src": tokenizer_file(data_dir, "en"), "tgt": tokenizer_file(data_dir, "zh")}
    for path in paths.values():
        if not path.is_file():
            raise UserError(f"no prepared data in {data_dir}: run `translator prepare` first")
    if not stats_file(data_dir).is_file():  # written last: a missing one means interrupted
        raise UserError(f"`translator prepare` did not finish in {data_dir}: run it again")
    if not up_to_date(data_dir):
        log.info("encoding the splits of %s with its tokenizers (once)", data_dir)
        encode_splits(data_dir, worker_count(config.data.workers))

    def batches(split: str) -> Batches:
        src, tgt = open_ids(data_dir, split, "en"), open_ids(data_dir, split, "zh")
        return Batches(src, tgt, config.model.max_positions, config.train.max_tokens)

    train = batches("train")
    if not train.pairs:
        raise UserError(f"no usable training pairs in {data_dir}")
    bleu_src, bleu_refs = group_references(*read_split(data_dir, "valid"))
    n = config.train.bleu_samples
    return TrainData(
        tokenizer_paths={k: str(p) for k, p in paths.items()},
        tokenizer_models={k: p.read_bytes() for k, p in paths.items()},
        train=train,
        valid=batches("valid"),
        bleu_src=bleu_src[:n],
        bleu_refs=bleu_refs[:n],
        train_pairs=train.pairs,
        dropped=train.dropped,
    )
