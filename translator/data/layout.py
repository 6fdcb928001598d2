"""The prepared-data layout: which file holds what in `data.dir` (listed in
docs/formats.md#the-prepared-directory), and how to read a split. Training, evaluation and
scripts import this, not the preparation pipeline.
"""

from __future__ import annotations

from pathlib import Path

from translator.data.lines import read_lines
from translator.errors import UserError

SPLITS = ("train", "valid", "test")
LANGS = ("en", "zh")
SIDES = {"en": "src", "zh": "tgt"}  # how a checkpoint names each language's tokenizer


def split_file(data_dir: Path | str, split: str, lang: str) -> Path:
    return Path(data_dir) / f"{split}.{lang}"


def tokenizer_file(data_dir: Path | str, lang: str) -> Path:
    return Path(data_dir) / f"spm.{lang}.model"


def corpus_file(data_dir: Path | str) -> Path:
    return Path(data_dir) / "train.corpus.npy"


def words_file(data_dir: Path | str) -> Path:
    return Path(data_dir) / "words.en"


def stats_file(data_dir: Path | str) -> Path:
    return Path(data_dir) / "stats.json"


def read_split(data_dir: Path | str, split: str) -> tuple[list[str], list[str]]:
    """The (English, Chinese) lines of one prepared split, pair by pair."""
    en, zh = (read_lines(split_file(data_dir, split, lang)) for lang in LANGS)
    if len(en) != len(zh):
        raise UserError(f"{split_file(data_dir, split, 'en')} and its .zh file differ in length")
    return en, zh


def group_references(sources: list[str], targets: list[str]) -> tuple[list[str], list[list[str]]]:
    """Pairs → each distinct source once (in order of first appearance) with all its
    targets as references: what a held-out split is scored on."""
    references: dict[str, list[str]] = {}
    for source, target in zip(sources, targets, strict=True):
        references.setdefault(source, []).append(target)
    return list(references), list(references.values())


def read_references(data_dir: Path | str, split: str) -> tuple[list[str], list[list[str]]]:
    """Each distinct English sentence of a split once, with every Chinese translation."""
    return group_references(*read_split(data_dir, split))
