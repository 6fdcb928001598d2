"""Prepared splits → what training consumes: tokenizers, the batches of the train and valid
splits (encoded once), and the validation sentences that are translated for BLEU (each
distinct English sentence once, scored against all its translations)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from translator.config import Config
from translator.data.batching import Batch, encode_pairs, make_batches
from translator.data.layout import group_references, read_split, tokenizer_file
from translator.data.tokenizer import load_tokenizer
from translator.errors import UserError


@dataclass
class TrainData:
    tokenizer_paths: dict[str, str]
    tokenizer_models: dict[str, bytes]
    train: list[Batch]
    valid: list[Batch]
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
    src_tok, tgt_tok = load_tokenizer(paths["src"]), load_tokenizer(paths["tgt"])
    limit = config.model.max_positions

    def batches(src: list[str], tgt: list[str]) -> tuple[list[Batch], int, int]:
        src_ids, tgt_ids, dropped = encode_pairs(src, tgt, src_tok, tgt_tok, limit)
        if not src_ids:
            raise UserError(f"no usable training pairs in {data_dir}")
        return make_batches(src_ids, tgt_ids, config.train.max_tokens), len(src_ids), dropped

    train, train_pairs, dropped = batches(*read_split(data_dir, "train"))
    valid_pairs = read_split(data_dir, "valid")
    valid, _, _ = batches(*valid_pairs)
    bleu_src, bleu_refs = group_references(*valid_pairs)
    n = config.train.bleu_samples
    return TrainData(
        tokenizer_paths={k: str(p) for k, p in paths.items()},
        tokenizer_models={k: p.read_bytes() for k, p in paths.items()},
        train=train,
        valid=valid,
        bleu_src=bleu_src[:n],
        bleu_refs=bleu_refs[:n],
        train_pairs=train_pairs,
        dropped=dropped,
    )
