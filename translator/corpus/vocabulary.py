"""The tokenizers of a prepared directory: SentencePiece models trained on its train split,
or, with `data.tokenizers_from`, the models a trained checkpoint carries, so that a model
can be fine-tuned on the new data (a vocabulary rebuilt from the new text would no longer
fit its embeddings).
"""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path

from translator.config import DataConfig
from translator.data.ids import BYTE, Encoded, piece_kinds
from translator.data.layout import LANGS, SIDES, split_file, tokenizer_file
from translator.data.spans import PLACEHOLDERS, has_placeholders
from translator.data.tokenizer import Sample, load_tokenizer, train_tokenizer
from translator.errors import UserError

log = logging.getLogger(__name__)

POOR_COVERAGE = 0.01  # warn when more than 1 % of a side's pieces are <unk> or bytes
NAMES = {"en": "English", "zh": "Chinese"}


def make_tokenizers(data_cfg: DataConfig, out: Path, workers: int) -> dict[str, int]:
    """spm.{en,zh}.model in `out`, trained or taken from data.tokenizers_from; their sizes."""
    symbols = PLACEHOLDERS if data_cfg.placeholders else ()
    if data_cfg.tokenizers_from:
        sizes = copy_tokenizers(data_cfg.tokenizers_from, out)
        borrowed = (load_tokenizer(tokenizer_file(out, lang)) for lang in LANGS)
        if symbols and not all(map(has_placeholders, borrowed)):
            raise UserError(
                f"data.placeholders needs tokenizers made with it; those of "
                f"{data_cfg.tokenizers_from} have no ⦅n⦆ pieces (data.tokenizers_from)"
            )
        return sizes
    sample = Sample(data_cfg.tokenizer_sentences, data_cfg.seed, workers)
    train = partial(train_tokenizer, sample=sample, symbols=symbols)
    en, zh = (split_file(out, "train", lang) for lang in LANGS)
    return {
        "en": train(en, out / "spm.en", data_cfg.src_vocab_size, 1.0, "data.src_vocab_size"),
        "zh": train(
            zh,
            out / "spm.zh",
            data_cfg.tgt_vocab_size,
            0.9995,
            "data.tgt_vocab_size",
            byte_fallback=data_cfg.byte_fallback,
        ),
    }


def copy_tokenizers(source: str | Path, out: Path) -> dict[str, int]:
    """Write the SentencePiece models carried by the checkpoint `source` (or a run
    directory's model: train.final) into `out`, byte for byte."""
    from translator.model.checkpoint import load  # torch: only when borrowing
    from translator.model.rundir import checkpoint_in

    path = checkpoint_in(source)
    models = load(path).get("tokenizer_models")
    if not isinstance(models, dict) or set(models) != set(SIDES.values()):
        raise UserError(f"{path} carries no tokenizers (data.tokenizers_from)")
    for lang in LANGS:
        tokenizer_file(out, lang).write_bytes(models[SIDES[lang]])
    return {lang: load_tokenizer(models[SIDES[lang]]).get_piece_size() for lang in LANGS}


def has_byte_fallback(out: Path) -> bool:
    """Whether the Chinese tokenizer in `out` writes rare characters as bytes."""
    return bool((piece_kinds(load_tokenizer(tokenizer_file(out, "zh"))) == BYTE).any())


def coverage(encoded: Encoded, source: str) -> dict[str, dict]:
    """Per language: pieces, <unk> and byte pieces and their share (`fallback`); warns when
    borrowed tokenizers (`source`, "" for trained ones) cover the new text poorly."""
    found = {lang: encoded.coverage(lang) for lang in LANGS}
    poor = [lang for lang in LANGS if found[lang]["fallback"] > POOR_COVERAGE]
    if source and poor:
        shares = " and ".join(
            f"{found[lang]['fallback']:.1%} of the {NAMES[lang]} pieces" for lang in poor
        )
        log.warning(
            "warning: the tokenizers of %s cover this text poorly: %s are <unk> or single "
            "bytes (over %.0f%%). The model will see these as unknown or "
            "byte by byte; fine-tuning still works, but a model trained with a vocabulary "
            "from text like this would read it better",
            source,
            shares,
            POOR_COVERAGE * 100,
        )
    return found
