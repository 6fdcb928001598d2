"""The teacher's translations of a train split, in shards that survive a kill:
OUT/.distill/manifest.json (the teacher, the data, the decoding settings) and
shard-000000.zh, … (the translations of each `shard_size` lines), each written atomically,
so that `--resume` goes on from the first missing one and writes the same files as a run
that was never stopped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

from tqdm import tqdm

from translator.config import REMOVED
from translator.data.lines import read_chunks, read_lines
from translator.errors import UserError
from translator.model.checkpoint import write_text

WORK = ".distill"
MANIFEST = "manifest.json"
PROGRESS_BATCHES = 16  # the bar moves every this many decoding batches


def shard_file(work: Path, index: int) -> Path:
    return work / f"shard-{index:06d}.zh"


def shard_count(lines: int, shard_size: int) -> int:
    return -(-lines // shard_size)


def as_today(manifest: dict) -> dict:
    """An earlier version's manifest without the decode keys since removed whose recorded
    value is what decoding does now (config.REMOVED): such a run resumes."""
    decode = manifest.get("decode")
    if isinstance(decode, dict):
        manifest["decode"] = {
            key: value
            for key, value in decode.items()
            if (removed := REMOVED.get(f"decode.{key}")) is None or removed.kept != value
        }
    return manifest


def start_work(out: Path, manifest: dict, resume: bool, overwrite: bool) -> Path:
    """OUT/.distill, new or (with `resume`) as an earlier run with the same manifest left it."""
    work = out / WORK
    started = (work / MANIFEST).is_file()
    if resume and started:
        before = as_today(json.loads((work / MANIFEST).read_text(encoding="utf-8")))
        differ = sorted(
            key for key in manifest.keys() | before.keys() if before.get(key) != manifest.get(key)
        )
        if differ:
            raise UserError(
                f"{out} was distilled with other settings ({', '.join(differ)} differ): give "
                "the same teacher, data and options to resume, or --overwrite to start again"
            )
        return work
    if out.exists() and any(out.iterdir()) and not overwrite:
        hint = "--resume continues it, " if started else ""
        raise UserError(f"{out} exists and is not empty: {hint}--overwrite starts again")
    if overwrite:
        for old in work.glob("shard-*") if work.is_dir() else ():
            old.unlink()
    work.mkdir(parents=True, exist_ok=True)
    write_text(work / MANIFEST, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return work


def translate_shards(
    translate: Callable[[list[str], list[str]], list[str]],
    source: Path,
    human: Path,
    lines: int,
    work: Path,
    shard_size: int,
    batch_size: int,
    progress: bool = True,
) -> int:
    """Translate `source` (beside its human translations) shard by shard into `work`,
    skipping the shards already there: how many this call translated."""
    shards = shard_count(lines, shard_size)
    done = [shard_file(work, k).is_file() for k in range(shards)]
    first_done = sum(min(shard_size, lines - k * shard_size) for k in range(shards) if done[k])
    translated = 0
    with tqdm(
        total=lines,
        initial=first_done,
        unit="sent",
        desc="distill",
        disable=not progress,
        dynamic_ncols=True,
    ) as bar:
        chunks = zip(read_chunks(source, shard_size), read_chunks(human, shard_size), strict=True)
        for k, (shard, references) in enumerate(chunks):
            if done[k]:
                continue
            outputs: list[str] = []
            step = batch_size * PROGRESS_BATCHES
            for start in range(0, len(shard), step):
                chunk = shard[start : start + step]
                outputs += translate(chunk, references[start : start + step])
                bar.update(len(chunk))
            write_text(shard_file(work, k), "".join(line + "\n" for line in outputs))  # atomic
            translated += 1
    return translated


def read_shards(work: Path, shards: int) -> Iterator[list[str]]:
    """The translations, shard by shard."""
    for k in range(shards):
        yield read_lines(shard_file(work, k))
