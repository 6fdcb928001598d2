"""Prepared splits → what training consumes: tokenizers, the batches of the train and valid
splits, and the validation sentences that are translated for BLEU (each distinct English
sentence once, scored against all its translations).

The ids are memory-mapped (ids.py); batches are planned from the length arrays alone and
each is collated from the mapped ids only when training reaches it, so start-up time and
memory do not grow with the corpus.
"""

from __future__ import annotations

import copy
import json
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

import numpy as np

from translator.config import Config
from translator.data import known_words
from translator.data.batching import Batch, collate_padded, plan_batches, round_up, weighted_rows
from translator.data.ids import Ids, SubwordSampling, encode_splits, open_ids, up_to_date
from translator.data.layout import (
    SIDES,
    corpus_file,
    group_references,
    read_split,
    split_file,
    stats_file,
    tokenizer_file,
    words_file,
)
from translator.data.lines import read_chunks
from translator.data.spans import has_placeholders
from translator.data.tokenizer import load_tokenizer, source_prefix
from translator.errors import UserError
from translator.runtime import worker_count

log = logging.getLogger(__name__)


class Batches(Sequence[Batch]):
    """Token-budget batches of a split, collated from the mapped ids on access. `epoch(n)`
    gives the batches of epoch n: with `corpus` (each pair's corpus number) and `weights`
    (one per corpus), corpus c's pairs are seen weights[c] times; with `samples` (K more
    encodings of the split, BPE-dropout), epoch n reads samples[n mod K]. `pad_to_multiple`
    > 1 makes the shapes static (train.pad_to_multiple, docs/training.md)."""

    def __init__(
        self,
        src: Ids,
        tgt: Ids,
        max_len: int,
        max_tokens: int,
        corpus: np.ndarray | None = None,
        weights: Sequence[float] = (1.0,),
        seed: int = 0,
        samples: Sequence[tuple[Ids, Ids]] = (),
        pad_to_multiple: int = 1,
        src_prefix: np.ndarray | None = None,
    ):
        self.max_len, self.max_tokens, self.samples = max_len, max_tokens, list(samples)
        self.prefix = np.zeros(0, dtype=np.int64) if src_prefix is None else src_prefix
        self.multiple = pad_to_multiple
        self._read(src, tgt)
        self.rows = np.flatnonzero(self.fits)
        self.dropped = len(self.fits) - len(self.rows)
        if corpus is not None and len(corpus) != len(self.fits):
            raise UserError("train.corpus.npy does not match the train split: prepare again")
        self.corpus = None if corpus is None else corpus[self.rows]
        self.weights, self.seed = list(weights), seed
        self._plan(self.rows)
        self.unique_pairs = self.pairs  # each usable pair once, whatever the weights

    def _read(self, src: Ids, tgt: Ids) -> None:
        """Batch from these encodings of the split."""
        self.src, self.tgt = src, tgt
        self.lens = src.lengths() + 1 + len(self.prefix), tgt.lengths() + 1  # + EOS
        src_lens, tgt_lens = self.lens
        self.fits = (src_lens <= self.max_len) & (tgt_lens < self.max_len)  # BOS on target

    def _plan(self, rows: np.ndarray) -> None:
        src_lens, tgt_lens = (round_up(lens[rows], self.multiple) for lens in self.lens)
        self.pairs = len(rows)  # examples in an epoch
        self.groups = [rows[g] for g in plan_batches(src_lens, tgt_lens, self.max_tokens)]
        sizes = np.array([len(g) for g in self.groups], dtype=np.int64)
        flat = np.concatenate(self.groups) if self.groups else rows[:0]
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)[: len(sizes)]

        def per_batch(values: np.ndarray, ufunc: np.ufunc) -> np.ndarray:
            return ufunc.reduceat(values[flat], starts) if len(starts) else sizes

        self.tokens = per_batch(self.lens[1], np.add)  # real target tokens of each batch
        self.real = int(self.lens[0][flat].sum() + self.lens[1][flat].sum())  # both sides
        longest = [round_up(per_batch(lens, np.maximum), self.multiple) for lens in self.lens]
        rows_of = sizes
        if self.multiple > 1:  # as many rows as the budget allows at the longer side
            rows_of = np.maximum(sizes, self.max_tokens // np.maximum(*longest))
        self.shapes = np.stack([rows_of, *longest], axis=1)  # (rows, S, T) of each batch

    def padding(self) -> float:
        """The share of the token positions (both sides) of an epoch that are padding."""
        rows, src, tgt = self.shapes.T
        total = int((rows * (src + tgt)).sum())
        return 1 - self.real / total if total else 0.0

    def first_of_each_shape(self) -> list[int]:
        """The index of the first batch of each (rows, source length, target length) shape."""
        return sorted(np.unique(self.shapes, axis=0, return_index=True)[1].tolist())

    def distinct_shapes(self) -> int:
        """How many different (rows, source length, target length) shapes the batches take."""
        return len(self.first_of_each_shape())

    @property
    def weighted(self) -> bool:
        return self.corpus is not None and any(w != 1 for w in self.weights)

    def epoch(self, epoch: int) -> Batches:
        """The batches of `epoch` (0-based): these, unless the corpora are weighted or the
        encodings sampled. A pair whose sampled encoding is too long sits that epoch out."""
        if not self.weighted and not self.samples:
            return self
        planned = copy.copy(self)
        rows = self.rows
        if self.weighted:
            assert self.corpus is not None
            rows = weighted_rows(rows, self.corpus, self.weights, self.seed, epoch)
        if self.samples:
            planned._read(*self.samples[epoch % len(self.samples)])
            rows = rows[planned.fits[rows]]
        planned._plan(rows)
        return planned

    def __len__(self) -> int:
        return len(self.groups)

    def __getitem__(self, i: int) -> Batch:  # type: ignore[override]
        rows, (n, src_len, tgt_len) = self.groups[i], self.shapes[i]
        src = self.src.padded(rows, src_len - len(self.prefix))
        if len(self.prefix):  # data.src_prefix before every source
            src = np.concatenate(
                [np.broadcast_to(self.prefix, (len(rows), len(self.prefix))), src], 1
            )
        return collate_padded(src, self.tgt.padded(rows, tgt_len), n)


@dataclass
class TrainData:
    tokenizer_paths: dict[str, str]
    tokenizer_models: dict[str, bytes]
    source_words: bytes  # the train split's English words, as checkpoints carry them
    train: Batches
    valid: Batches
    bleu_src: list[str]  # distinct English sentences of the valid split ...
    bleu_refs: list[list[str]]  # ... each with all its translations
    train_pairs: int
    dropped: int


def load_training_data(config: Config) -> TrainData:
    data_dir = Path(config.data.dir)
    paths = {side: tokenizer_file(data_dir, lang) for lang, side in SIDES.items()}
    if not all(path.is_file() for path in paths.values()):
        raise UserError(f"no prepared data in {data_dir}: run `translator prepare` first")
    if not stats_file(data_dir).is_file():  # written last: a missing one means interrupted
        raise UserError(f"`translator prepare` did not finish in {data_dir}: run it again")
    src_tok = load_tokenizer(paths["src"])
    prepared_with = has_placeholders(src_tok)
    if config.data.placeholders != prepared_with:
        state = {True: "on", False: "off"}
        raise UserError(
            f"data.placeholders is {state[config.data.placeholders]} but {data_dir} was "
            f"prepared with it {state[prepared_with]}: run `translator prepare` again"
        )
    sampling = SubwordSampling.of(config.data)
    if not up_to_date(data_dir, sampling):
        log.info("encoding the splits of %s with its tokenizers (once)", data_dir)
        encode_splits(data_dir, worker_count(config.data.workers), sampling)

    prefix = source_prefix(src_tok, config.data.src_prefix)

    def batches(split: str, **options) -> Batches:
        src, tgt = open_ids(data_dir, split, "en"), open_ids(data_dir, split, "zh")
        limits = config.model.max_positions, config.train.max_tokens
        return Batches(src, tgt, *limits, src_prefix=prefix, **options)

    corpus, weights = train_corpora(config, data_dir)
    samples = sampled_encodings(data_dir, sampling)
    train = batches(
        "train",
        corpus=corpus,
        weights=weights,
        seed=config.train.seed,
        pad_to_multiple=max(1, config.train.pad_to_multiple),  # 0 (automatic): the Trainer's
        **samples,
    )
    if train.weighted:
        log.info("corpus weights %s: %d examples an epoch", weights, train.epoch(0).pairs)
    if not train.pairs:
        raise UserError(f"no usable training pairs in {data_dir}")
    bleu_src, bleu_refs = group_references(*read_split(data_dir, "valid"))
    n = config.train.bleu_samples
    return TrainData(
        tokenizer_paths={k: str(p) for k, p in paths.items()},
        tokenizer_models={k: p.read_bytes() for k, p in paths.items()},
        source_words=known_words.words_blob(english_words(data_dir)),
        train=train,
        valid=batches("valid"),
        bleu_src=bleu_src[:n],
        bleu_refs=bleu_refs[:n],
        train_pairs=train.unique_pairs,
        dropped=train.dropped,
    )


def english_words(data_dir: Path) -> Counter[str]:
    """The train split's English words and their counts (words.en; counted here for a
    directory prepared before it was written)."""
    if words_file(data_dir).is_file():
        return known_words.read_counts(words_file(data_dir))
    return known_words.count(
        chain.from_iterable(read_chunks(split_file(data_dir, "train", "en"), 200_000))
    )


def sampled_encodings(data_dir: Path, sampling: SubwordSampling) -> dict:
    """Batches' `samples` argument: the k-th sampled encoding of each sampled side, with
    the deterministic one of a side that is not sampled."""
    if not sampling.count:
        return {}

    def side(lang: str, k: int) -> Ids:
        return open_ids(data_dir, "train", lang, k if lang in sampling.langs else 0)

    return {"samples": [(side("en", k), side("zh", k)) for k in range(1, sampling.count + 1)]}


def train_corpora(config: Config, data_dir: Path) -> tuple[np.ndarray | None, list[float]]:
    """Each train pair's corpus number, and each corpus's weight: from data.inputs when it
    names the corpora the data was prepared from (so a weight can change without preparing
    again), else as recorded; (None, [1.0]) for data prepared before corpora were numbered."""
    path = corpus_file(data_dir)
    if not path.is_file():
        return None, [1.0]
    recorded = json.loads(stats_file(data_dir).read_text(encoding="utf-8")).get("inputs", [])
    weights = [float(c.get("weight", 1.0)) for c in recorded]
    configured = config.data.inputs
    resolved = lambda paths: [Path(p).resolve() for p in paths]  # noqa: E731
    same = [resolved(c.paths) for c in configured] == [resolved(c["paths"]) for c in recorded]
    if configured and same:
        weights = [c.weight for c in configured]
    return np.load(path, mmap_mode="r"), weights
