"""Real corpora to download for English–Chinese: OPUS's corpora (found through OPUS's public
API) and the WMT training data, fetched with the progress, resumption and checksummed cache
of fetcher.py, and kept as published: a Moses-format zip (OPUS) or a gzipped TSV (WMT),
which `translator prepare --input` reads as they are (sources.py), so nothing is unpacked.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from translator.corpus.fetcher import fetch
from translator.errors import UserError

OPUS_API = "https://opus.nlpl.eu/opusapi/"
OPUS_API_VARIABLE = "TRANSLATOR_OPUS_API"  # another endpoint, instead of --base-url
WMT_BASE = "https://data.statmt.org"
WMT_BASE_VARIABLE = "TRANSLATOR_WMT_URL"  # a mirror, instead of --base-url
WMT = {  # name → (path under WMT_BASE, what it is); each a gzipped `en <TAB> zh` file
    "news-commentary-v18": (
        "news-commentary/v18.1/training/news-commentary-v18.en-zh.tsv.gz",
        "WMT News Commentary v18.1 (news opinion articles)",
    ),
}


@dataclass
class Listing:
    source: str  # opus | wmt
    corpus: str
    version: str
    pairs: int | None  # aligned pairs, where the source says
    size: int | None  # bytes to download, where known
    url: str


@dataclass
class Fetched:
    path: Path
    pairs: int | None
    fetched: bool  # False: it came from the cache


def opus_corpora(api: str | None = None, corpus: str | None = None, version: str = "latest"):
    """OPUS's English–Chinese corpora in Moses format (one corpus with `corpus`)."""
    api = api or os.environ.get(OPUS_API_VARIABLE) or OPUS_API
    query = {"source": "en", "target": "zh", "preprocessing": "moses", "version": version}
    if corpus:
        query["corpus"] = corpus
    url = api + ("&" if "?" in api else "?") + urllib.parse.urlencode(query)
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            entries = json.load(response)["corpora"]
    except urllib.error.HTTPError as exc:
        raise UserError(f"{url}: OPUS answered {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise UserError(f"cannot reach OPUS at {api} ({exc.reason}): offline?") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{url}: not an OPUS API answer ({exc})") from None
    return [
        Listing(
            "opus",
            e["corpus"],
            e["version"],
            _int(e.get("alignment_pairs")),
            _int(e.get("size"), 1024),
            e["url"],
        )
        for e in entries
        if e.get("url", "").endswith(".zip")
    ]


def wmt_corpora(base: str | None = None) -> list[Listing]:
    """The WMT training corpora we know, each with its size from a HEAD request."""
    base = (base or os.environ.get(WMT_BASE_VARIABLE) or WMT_BASE).rstrip("/")
    return [
        Listing("wmt", name, path.split("/")[1], None, _size(f"{base}/{path}"), f"{base}/{path}")
        for name, (path, _) in WMT.items()
    ]


def fetch_corpus(
    source: str, corpus: str, out: Path, base_url: str | None, version: str, progress: bool
) -> Fetched:
    """Download one corpus into `out` (cached: a second call fetches nothing)."""
    if source == "wmt":
        if corpus not in WMT:
            raise UserError(f"unknown WMT corpus {corpus!r} (known: {', '.join(WMT)})")
        (entry,) = [e for e in wmt_corpora(base_url) if e.corpus == corpus]
    else:
        found = opus_corpora(base_url, corpus, version)
        found = [e for e in found if e.corpus.lower() == corpus.lower()]
        if not found:
            raise UserError(
                f"OPUS has no English–Chinese Moses files for {corpus!r} version {version} "
                "(see translator download --list)"
            )
        entry = found[0]
    name = entry.url.rsplit("/", 1)[-1]
    if source == "opus":
        name = f"{entry.corpus}-{entry.version}.{name}"
    return Fetched(out / name, entry.pairs, fetch(entry.url, out / name, progress))


def _size(url: str) -> int | None:
    try:
        request = urllib.request.Request(url, method="HEAD", headers={"User-Agent": "translator"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return _int(response.headers.get("Content-Length"))
    except (urllib.error.URLError, OSError):
        return None


def _int(value, scale: int = 1) -> int | None:
    try:
        return int(value) * scale
    except (TypeError, ValueError):
        return None
