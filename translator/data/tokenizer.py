"""SentencePiece BPE, one model per language.

Special ids are fixed: pad 0, unk 1, bos 2, eos 3. The normalisation rule is `identity`:
SentencePiece's default (nmt_nfkc) folds full-width punctuation such as ？，！ into ASCII,
so a model trained on it could never write what Chinese references contain. Our own
normaliser (translator.data.normalize) runs before SentencePiece instead, at prepare time
and at translate time alike.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import sentencepiece as spm

from translator.errors import UserError

PAD, UNK, BOS, EOS = 0, 1, 2, 3

Tokenizer = spm.SentencePieceProcessor


def train_tokenizer(
    text_file: Path, prefix: Path, vocab_size: int, character_coverage: float, config_key: str
) -> Path:
    """Train a BPE model on one sentence a line; writes `<prefix>.model` and `.vocab`."""
    try:
        spm.SentencePieceTrainer.train(
            input=str(text_file),
            model_prefix=str(prefix),
            model_type="bpe",
            vocab_size=vocab_size,
            character_coverage=character_coverage,
            normalization_rule_name="identity",
            pad_id=PAD,
            unk_id=UNK,
            bos_id=BOS,
            eos_id=EOS,
            input_sentence_size=2_000_000,
            shuffle_input_sentence=True,
            num_threads=os.cpu_count() or 1,
            minloglevel=2,
        )
    except RuntimeError as exc:
        limit = re.search(r"value <= (\d+)", str(exc))
        if limit:
            raise UserError(
                f"{config_key} = {vocab_size} is too large for this corpus; "
                f"SentencePiece allows at most {limit.group(1)}"
            ) from None
        raise UserError(f"SentencePiece training failed on {text_file}: {exc}") from None
    return prefix.with_suffix(".model")


def load_tokenizer(model: Path | bytes) -> Tokenizer:
    """Load from a `.model` file or from the serialized bytes kept in a checkpoint."""
    if isinstance(model, bytes):
        return spm.SentencePieceProcessor(model_proto=model)
    if not Path(model).is_file():
        raise UserError(f"tokenizer model not found: {model} (run `translator prepare` first)")
    return spm.SentencePieceProcessor(model_file=str(model))
