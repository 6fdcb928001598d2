"""`translator distill`: a teacher's translations of the train split → a prepared directory
that a student trains on (sequence-level knowledge distillation, Kim & Rush 2016;
docs/training.md#distillation).

Only train English is translated; valid and test are copied with their human references.
stats.json is written last: its absence means unfinished, as for `prepare`.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections import Counter
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from translator.config import Config, DataConfig, DistillConfig
from translator.data.ids import encode_splits
from translator.data.layout import (
    LANGS,
    SPLITS,
    corpus_file,
    split_file,
    stats_file,
    tokenizer_file,
)
from translator.data.lines import read_chunks
from translator.distill.filters import REASONS, filter_outputs
from translator.distill.selection import teacher_outputs
from translator.distill.shards import read_shards, shard_count, start_work, translate_shards
from translator.distill.teacher import held_out_check, open_teacher
from translator.errors import UserError
from translator.inference.registry import ENGINES
from translator.runtime import worker_count

log = logging.getLogger(__name__)
NOT_DECODING = ("engine", "model_dir", "threads", "workers", "split", "nbest")  # same output


@dataclass
class Distilled:
    dir: Path
    stats: dict
    shards_translated: int  # by this call (the rest by an earlier one, with --resume)
    seconds: float


def distill(
    config: Config, resume: bool = False, overwrite: bool = False, progress: bool = True
) -> Distilled:
    """Distil `config.data.dir` with `distill.teacher` into `distill.out` (module docstring);
    `resume` continues after the last whole shard there, `overwrite` starts again."""
    started = time.perf_counter()
    settings = config.distill
    if not settings.teacher or not settings.out:
        raise UserError(
            "distill needs a teacher and an output directory: --teacher and --out "
            "(distill.teacher and distill.out in the config)"
        )
    if resume and overwrite:
        raise UserError("--resume and --overwrite contradict each other")
    config = teaching(config)
    data_dir, out = Path(config.data.dir), Path(settings.out)
    lines = _check_inputs(data_dir, out)
    teacher = open_teacher(config, Path(settings.teacher))
    checked = held_out_check(teacher, data_dir)
    decode = teacher.translator.decode_cfg
    manifest = {
        "teacher": teacher.describe(),
        "engine": teacher.translator.engine.about.name,  # as decode.engine auto chose it
        "device": config.train.device,
        "data": str(data_dir.resolve()),
        "train_lines": lines,
        "decode": {k: v for k, v in asdict(decode).items() if k not in NOT_DECODING}
        | {"precision": teacher.translator.engine.about.precision},
        "shard_size": settings.shard_size,
    }
    if settings.nbest > 1:  # only then, so that a directory distilled before --nbest resumes
        manifest["nbest"] = settings.nbest
        manifest["select"] = "length"  # one distilled by chrF (no "select") does not resume
    work = start_work(out, manifest, resume, overwrite)
    log.info("teacher: %s", teacher.path)
    log.info(teacher.translator.engine_line)
    stats_file(out).unlink(missing_ok=True)  # an earlier run's: OUT is unfinished from here
    translated = translate_shards(
        teacher_outputs(teacher.translator, settings.nbest),
        split_file(data_dir, "train", "en"),
        split_file(data_dir, "train", "zh"),
        lines,
        work,
        settings.shard_size,
        decode.batch_size,
        progress,
    )
    stats = _write_prepared(config.data, data_dir, out, work, settings, lines)
    origin = {"data": str(data_dir), "teacher": manifest["teacher"], "held_out_check": checked}
    stats["distilled"] |= origin | {"decode": manifest["decode"] | {"engine": manifest["engine"]}}
    text = json.dumps(stats, indent=2, ensure_ascii=False) + "\n"
    stats_file(out).write_text(text, encoding="utf-8")
    return Distilled(out, stats, translated, time.perf_counter() - started)


def teaching(config: Config) -> Config:
    """`config` as the teacher decodes: with distill.beam, each train line whole; with an
    engine named that reads its own directory (an export), the teacher is that directory."""
    settings, engine = config.distill, config.decode.engine
    reads_dir = engine != "auto" and ENGINES.get(engine).reads_dir
    model_dir = settings.teacher if reads_dir else config.decode.model_dir
    decode = replace(config.decode, beam=settings.beam, split=False, nbest=0, model_dir=model_dir)
    return replace(config, decode=decode)


def _check_inputs(data_dir: Path, out: Path) -> int:
    """The number of train lines, after checking that the data is prepared and apart from OUT."""
    if not stats_file(data_dir).is_file() or not tokenizer_file(data_dir, "en").is_file():
        raise UserError(f"no prepared data in {data_dir}: run `translator prepare` first")
    if out.resolve() == data_dir.resolve():
        raise UserError("--out must be a directory other than the data's")
    lines = _count_lines(split_file(data_dir, "train", "en"))
    if lines != _count_lines(split_file(data_dir, "train", "zh")):
        raise UserError(f"the train split of {data_dir} has .en and .zh files of other lengths")
    return lines


def _count_lines(path: Path) -> int:
    count = 0
    with path.open("rb") as f:
        while block := f.read(1 << 24):
            count += block.count(b"\n")
    return count


def _write_prepared(
    data_cfg: DataConfig, data_dir: Path, out: Path, work: Path, settings: DistillConfig, lines: int
) -> dict:
    """Filter the teacher's translations into OUT's train split (with the human pairs after
    them when asked), copy valid, test and the tokenizers, encode; the stats."""
    recorded = json.loads(stats_file(data_dir).read_text(encoding="utf-8"))
    weights = [float(c.get("weight", 1.0)) for c in recorded.get("inputs", [])] or [1.0]
    corpus = _corpus_numbers(data_dir, lines)
    shards = shard_count(lines, settings.shard_size)
    writer = _TrainWriter(out)
    dropped: Counter = Counter()
    sources = read_chunks(split_file(data_dir, "train", "en"), settings.shard_size)
    for k, (english, outputs) in enumerate(zip(sources, read_shards(work, shards), strict=True)):
        pairs, keep, counts = filter_outputs(
            pd.Series(english, dtype=str), pd.Series(outputs, dtype=str), data_cfg
        )
        dropped += counts
        start = k * settings.shard_size
        writer.add(pairs[keep], corpus[start : start + len(outputs)][keep])
    kept = writer.pairs
    if settings.keep_original:
        for en, zh, numbers in _original_chunks(data_dir, corpus):
            writer.add(pd.DataFrame({"en": en, "zh": zh}), numbers + len(weights))
    if not writer.pairs:
        raise UserError(f"the teacher's translations of {data_dir} were all filtered out")
    writer.finish()
    for split in SPLITS[1:]:
        for lang in LANGS:
            shutil.copyfile(split_file(data_dir, split, lang), split_file(out, split, lang))
    for lang in LANGS:
        shutil.copyfile(data_dir / f"spm.{lang}.model", out / f"spm.{lang}.model")
        listing = data_dir / f"spm.{lang}.vocab"  # none where prepare took a model's tokenizers
        if listing.is_file():
            shutil.copyfile(listing, out / listing.name)
    encoded = encode_splits(out, worker_count(data_cfg.workers))
    splits = recorded.get("splits", {}) | {"train": writer.pairs}
    return {
        "distilled": {
            "translated": lines,
            "kept": kept,
            "dropped": {reason: dropped[reason] for reason in REASONS},
            "keep_original": settings.keep_original,
            "nbest": settings.nbest,
            "select": "length" if settings.nbest > 1 else None,
            "original_pairs": writer.pairs - kept,
            "shard_size": settings.shard_size,
        },
        "inputs": _inputs(recorded, weights, settings.keep_original),
        "rows_read": lines,
        "filtered": sum(dropped.values()),
        "pairs": sum(splits.values()),
        "splits": splits,
        "english_sentences": {
            split: count
            for split, count in recorded.get("english_sentences", {}).items()
            if split != "train"
        },
        "vocab_size": recorded.get("vocab_size"),
        "tokens": encoded.tokens,
    }


def _inputs(recorded: dict, weights: list[float], keep_original: float) -> list[dict]:
    """stats.json's inputs: each corpus distilled, and with keep_original its human pairs."""
    names = [c.get("name", f"corpus {i}") for i, c in enumerate(recorded.get("inputs", []))]
    kinds = {"distilled": 1.0} | ({"original": keep_original} if keep_original else {})
    return [
        {"name": f"{kind}: {name}", "paths": [], "weight": factor * weight}
        for kind, factor in kinds.items()
        for name, weight in zip(names or ["train"], weights, strict=True)
    ]


def _corpus_numbers(data_dir: Path, lines: int) -> np.ndarray:
    path = corpus_file(data_dir)
    if not path.is_file():
        return np.zeros(lines, dtype=np.uint16)
    numbers = np.load(path, mmap_mode="r")
    if len(numbers) != lines:
        raise UserError(f"{path} does not match the train split: prepare again")
    return numbers


def _original_chunks(data_dir: Path, corpus: np.ndarray, size: int = 100_000):
    """The human train pairs, in chunks: (English, Chinese, corpus numbers)."""
    en, zh = (read_chunks(split_file(data_dir, "train", lang), size) for lang in LANGS)
    for k, (english, chinese) in enumerate(zip(en, zh, strict=True)):
        yield english, chinese, np.asarray(corpus[k * size : k * size + len(english)])


class _TrainWriter:
    """OUT's train split, appended chunk by chunk and put in place together by `finish`."""

    def __init__(self, out: Path):
        self.out = out
        self.partial = {
            lang: split_file(out, "train", lang).with_suffix(f".{lang}.partial") for lang in LANGS
        }
        self.files = {
            lang: path.open("w", encoding="utf-8", newline="\n")
            for lang, path in self.partial.items()
        }
        self.numbers: list[np.ndarray] = []
        self.pairs = 0

    def add(self, pairs: pd.DataFrame, numbers: np.ndarray) -> None:
        for lang in LANGS:
            self.files[lang].write("".join(line + "\n" for line in pairs[lang]))
        self.numbers.append(np.asarray(numbers, dtype=np.uint16))
        self.pairs += len(pairs)

    def finish(self) -> None:
        for lang in LANGS:
            self.files[lang].close()
            os.replace(self.partial[lang], split_file(self.out, "train", lang))
        np.save(corpus_file(self.out), np.concatenate(self.numbers))
