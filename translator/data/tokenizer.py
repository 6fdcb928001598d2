"""SentencePiece BPE, one model per language (why with our normaliser, and byte fallback:
docs/data.md#prepare).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import sentencepiece as spm

from translator.errors import UserError

PAD, UNK, BOS, EOS = 0, 1, 2, 3

Tokenizer = spm.SentencePieceProcessor
log = logging.getLogger(__name__)


@dataclass
class Sample:
    """What SentencePiece trains on: a seeded random sample of at most `sentences` lines
    (a larger corpus adds little to a BPE vocabulary and costs time and memory: 2 million
    Chinese lines took 20 s and 1.8 GB, half a million 5 s and 0.5 GB)."""

    sentences: int = 1_000_000
    seed: int = 1
    threads: int = field(default_factory=lambda: os.cpu_count() or 1)


class _VocabularyTooSmall(Exception):
    def __init__(self, needed: int):
        self.needed = needed


def train_tokenizer(
    text_file: Path,
    prefix: Path,
    vocab_size: int,
    character_coverage: float,
    config_key: str,
    byte_fallback: bool = False,
    sample: Sample | None = None,
    symbols: tuple[str, ...] = (),
) -> int:
    """Train a BPE model on one sentence a line; writes `<prefix>.model` and `.vocab`.
    Returns the vocabulary size used: `vocab_size`, or more if the characters need it.
    `symbols`: pieces always kept whole (data.placeholders' ⦅n⦆)."""
    sample = sample or Sample()
    options = dict(
        input=str(text_file),
        model_prefix=str(prefix),
        model_type="bpe",
        character_coverage=character_coverage,
        byte_fallback=byte_fallback,
        normalization_rule_name="identity",  # nmt_nfkc would fold ？，！ into ASCII
        pad_id=PAD,
        unk_id=UNK,
        bos_id=BOS,
        eos_id=EOS,
        input_sentence_size=sample.sentences,
        shuffle_input_sentence=True,
        num_threads=sample.threads,
        user_defined_symbols=list(symbols),
        minloglevel=2,
    )
    try:
        _train(options, vocab_size, config_key, sample.seed)
        return vocab_size
    except _VocabularyTooSmall as small:
        needed = small.needed
    log.warning(
        "warning: %s = %d is too small for the characters of %s; using %d, the least that "
        "holds them (set it to at least that to silence this)",
        config_key,
        vocab_size,
        text_file,
        needed,
    )
    _train(options, needed, config_key, sample.seed)
    return needed


def _train(options: dict, vocab_size: int, config_key: str, seed: int) -> None:
    spm.set_random_generator_seed(seed)
    try:
        spm.SentencePieceTrainer.train(**options, vocab_size=vocab_size)
    except RuntimeError as exc:
        message = str(exc)
        needed = re.search(r"smaller than required_chars\. \d+ vs (\d+)", message)
        if needed:
            raise _VocabularyTooSmall(int(needed.group(1))) from None
        limit = re.search(r"value <= (\d+)", message)
        if limit:
            raise UserError(
                f"{config_key} = {vocab_size} is too large for this corpus; "
                f"SentencePiece allows at most {limit.group(1)}"
            ) from None
        raise UserError(f"SentencePiece training failed on {options['input']}: {message}") from None


def encode(lines: Sequence[str], tokenizer: Tokenizer) -> list[np.ndarray]:
    """Each line → int32 array of its piece ids followed by EOS."""
    return [np.array(ids + [EOS], dtype=np.int32) for ids in tokenizer.encode(list(lines))]


def load_tokenizer(model: Path | bytes) -> Tokenizer:
    """Load from a `.model` file or from the serialized bytes kept in a checkpoint."""
    if isinstance(model, bytes):
        return spm.SentencePieceProcessor(model_proto=model)
    if not Path(model).is_file():
        raise UserError(f"tokenizer model not found: {model} (run `translator prepare` first)")
    return spm.SentencePieceProcessor(model_file=str(model))


def source_prefix(tokenizer: Tokenizer, piece: str) -> np.ndarray:
    """The ids put before every source (data.src_prefix, e.g. OPUS-MT's >>cmn_Hans<<: one
    piece of the vocabulary, given as its id, since SentencePiece would split the text)."""
    if not piece:
        return np.zeros(0, dtype=np.int32)
    found = tokenizer.piece_to_id(piece)
    if found == tokenizer.unk_id() and piece != tokenizer.id_to_piece(found):
        raise UserError(f"data.src_prefix {piece!r} is not a piece of the source vocabulary")
    return np.array([found], dtype=np.int32)
