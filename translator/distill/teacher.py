"""The teacher: the engine that translates, what it is (for stats.json and --resume), and
the proof that it never saw this data's held-out sentences: a teacher that trained on a
valid or test sentence of this data would carry it into the student, whose scores would no
longer be held out, so it is refused.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from translator.config import Config
from translator.corpus.fetcher import sha256
from translator.corpus.split import sentence_keys
from translator.data.layout import LANGS, SPLITS, read_split, split_file
from translator.data.lines import read_chunks
from translator.errors import UserError
from translator.inference.text import Translator
from translator.model.checkpoint import load as load_checkpoint
from translator.model.rundir import checkpoint_in

log = logging.getLogger(__name__)
CHUNK = 100_000  # lines of the teacher's train split hashed at a time


@dataclass
class Teacher:
    translator: Translator
    path: Path  # the checkpoint, or the exported directory (ctranslate2)
    digest: str  # SHA-256 of the checkpoint (of model.bin for an exported directory)
    trained_on: Path | None  # its training data, when known

    def describe(self) -> dict:
        return {"path": str(self.path), "sha256": self.digest, "trained_on": str(self.trained_on)}


def open_teacher(config: Config, teacher: Path) -> Teacher:
    """The teacher `config.decode.engine` names: a checkpoint or run directory, or an export."""
    path = Path(config.decode.model_dir) if config.decode.model_dir else checkpoint_in(teacher)
    translator = Translator.open(config, path)
    about = translator.engine.about
    weights = path if path.is_file() else about.weights or path  # an export's: model.bin
    source = path if path.is_file() else about.checkpoint or path  # where it was made from
    payload = load_checkpoint(source, mmap=True) if source.is_file() else None
    trained = None  # unknown; and for one import-hf made, its data.dir is only the default
    if payload and not payload.get("imported"):
        trained = Path(payload["config"]["data"]["dir"])
    return Teacher(translator, path, sha256(weights), trained)


def held_out_check(teacher: Teacher, data_dir: Path) -> dict:
    """Refuse a teacher that trained on a valid or test sentence of `data_dir` (UserError);
    what was checked, for stats.json."""
    trained_on = teacher.trained_on
    if trained_on is None or not split_file(trained_on, "train", "en").is_file():
        log.warning(
            "the teacher's training data (%s) is not here: cannot check that it never saw "
            "the valid and test sentences of %s",
            trained_on or "not recorded",
            data_dir,
        )
        return {"checked": False, "teacher_data": str(trained_on)}
    held_out = {lang: _held_out_keys(data_dir, lang) for lang in LANGS}
    seen = {
        lang: _count_in(split_file(trained_on, "train", lang), held_out[lang]) for lang in LANGS
    }
    if any(seen.values()):
        raise UserError(
            f"the teacher trained on {trained_on}, whose train split holds {seen['en']:,} "
            f"English and {seen['zh']:,} Chinese sentences of the valid or test split of "
            f"{data_dir}: its translations would carry them into the student. Distill with a "
            "teacher trained on this data's train split (the same inputs, sizes and seed)"
        )
    sentences = sum(len(keys) for keys in held_out.values())
    return {"checked": True, "teacher_data": str(trained_on), "held_out_sentences": sentences}


def _held_out_keys(data_dir: Path, lang: str) -> np.ndarray:
    lines = [
        line for split in SPLITS[1:] for line in read_split(data_dir, split)[LANGS.index(lang)]
    ]
    return np.unique(sentence_keys(pd.Series(lines, dtype=str)))


def _count_in(path: Path, keys: np.ndarray) -> int:
    """How many lines of `path` have a key among `keys` (read in chunks)."""
    return sum(
        int(np.isin(sentence_keys(pd.Series(lines, dtype=str)), keys).sum())
        for lines in read_chunks(path, CHUNK)
    )
