"""`translator download`: English–Mandarin pairs from Tatoeba's public exports (or the
manythings.org Anki file), written in a layout `translator prepare` reads: Tatoeba's
sentence files joined through their links into its sentence-pairs layout, Anki's cmn.txt
as it is.
"""

from __future__ import annotations

import csv
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from translator.atomic import atomic_write
from translator.corpus.fetcher import fetch
from translator.errors import UserError

SOURCES = {
    "tatoeba": "https://downloads.tatoeba.org/exports",
    "anki": "https://www.manythings.org/anki",
}
BASE_URL_VARIABLE = "TRANSLATOR_DOWNLOAD_URL"  # a mirror, instead of --base-url
TATOEBA_FILES = {
    "eng": "per_language/eng/eng_sentences.tsv.bz2",
    "cmn": "per_language/cmn/cmn_sentences.tsv.bz2",
    "links": "per_language/cmn/cmn-eng_links.tsv.bz2",
}


@dataclass
class Downloaded:
    pairs_file: Path
    pairs: int
    fetched: list[str]  # files downloaded now (the others came from the cache)


def download(source: str, out: Path, base_url: str | None = None, progress=True) -> Downloaded:
    if source not in SOURCES:
        raise UserError(f"unknown source {source!r} (use tatoeba, anki, opus or wmt)")
    base = (base_url or os.environ.get(BASE_URL_VARIABLE) or SOURCES[source]).rstrip("/")
    return (_anki if source == "anki" else _tatoeba)(base, out / "downloads", out, progress)


def _tatoeba(base: str, cache: Path, out: Path, progress: bool) -> Downloaded:
    files, fetched = {}, []
    for name, path in TATOEBA_FILES.items():
        files[name] = cache / Path(path).name
        if fetch(f"{base}/{path}", files[name], progress):
            fetched.append(files[name].name)
    links = _read(files["links"], ["zh_id", "en_id"])
    chinese = _read(files["cmn"], ["zh_id", "lang", "zh"], keep=set(links.zh_id))
    english = _read(files["eng"], ["en_id", "lang", "en"], keep=set(links.en_id))
    pairs = links.merge(english[["en_id", "en"]], on="en_id").merge(
        chinese[["zh_id", "zh"]], on="zh_id"
    )
    pairs = pairs.drop_duplicates(["en_id", "zh_id"]).sort_values(["en_id", "zh_id"])
    target = out / "en-cmn.tsv"
    columns = pairs[["en_id", "en", "zh_id", "zh"]]
    tsv = {"sep": "\t", "header": False, "index": False, "quoting": csv.QUOTE_NONE}
    atomic_write(target, lambda tmp: columns.to_csv(tmp, **tsv))
    return Downloaded(target, len(pairs), fetched)


def _read(path: Path, names: list[str], keep: set[int] | None = None) -> pd.DataFrame:
    """A Tatoeba export (bz2 TSV, no quoting), in chunks (the English file holds about two
    million sentences); with `keep`, only those ids."""
    chunks = pd.read_csv(
        path,
        sep="\t",
        header=None,
        names=names,
        usecols=range(len(names)),
        quoting=csv.QUOTE_NONE,
        dtype=str,
        keep_default_na=False,
        chunksize=500_000,
        on_bad_lines="skip",
    )
    ids = [name for name in names if name.endswith("_id")]
    frames = []
    try:
        for chunk in chunks:
            chunk[ids] = chunk[ids].apply(pd.to_numeric, errors="coerce")
            chunk = chunk.dropna(subset=ids)
            if keep is not None:
                chunk = chunk[chunk[ids[0]].isin(keep)]
            frames.append(chunk)
    except (OSError, EOFError, ValueError) as exc:
        raise UserError(f"{path}: not a Tatoeba export we can read ({exc})") from None
    frame = pd.concat(frames) if frames else pd.DataFrame(columns=names)
    return frame.astype({name: "int64" for name in ids})


def _anki(base: str, cache: Path, out: Path, progress: bool) -> Downloaded:
    archive = cache / "cmn-eng.zip"
    fetched = [archive.name] if fetch(f"{base}/cmn-eng.zip", archive, progress) else []
    target = out / "cmn.txt"
    try:
        with zipfile.ZipFile(archive) as z:
            data = z.read("cmn.txt")
    except (zipfile.BadZipFile, KeyError) as exc:
        raise UserError(f"{archive}: not the Anki archive we expected ({exc})") from None
    atomic_write(target, lambda tmp: Path(tmp).write_bytes(data))
    return Downloaded(target, data.count(b"\n"), fetched)
