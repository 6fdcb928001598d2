"""Getting a file over HTTP(S) the way a long download should go: a progress bar with bytes
and rate, resumption of a cut transfer with an HTTP Range request (within the run, and on
the next run from the partial file left behind), a SHA-256 beside every finished file so
that the cache is checked and reused, and one clear line when offline or when the server
answers an error."""

from __future__ import annotations

import hashlib
import http.client
import urllib.error
import urllib.request
from pathlib import Path

from tqdm import tqdm

from translator.errors import UserError

CHUNK = 1 << 16
ATTEMPTS = 4  # tries within one run; each resumes where the last one stopped


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def cached(dest: Path) -> bool:
    """`dest` was downloaded whole before: its recorded checksum still matches."""
    record = dest.with_name(dest.name + ".sha256")
    return dest.is_file() and record.is_file() and record.read_text().split()[0] == sha256(dest)


def fetch(url: str, dest: Path, progress: bool = True, timeout: float = 60.0) -> bool:
    """Download `url` to `dest` unless the cache has it (returns False then). A cut transfer
    resumes from `dest`.part; the file appears under its name only when complete."""
    if cached(dest):
        return False
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".part")
    for attempt in range(1, ATTEMPTS + 1):
        try:
            _transfer(url, partial, progress, timeout)
            break
        except (http.client.IncompleteRead, OSError) as exc:  # OSError: connection, timeout
            if attempt == ATTEMPTS:
                done = partial.stat().st_size if partial.exists() else 0
                raise UserError(
                    f"download of {url} broke off after {done:,} bytes ({_reason(exc)}); "
                    "run the command again to resume"
                ) from None
    partial.replace(dest)
    dest.with_name(dest.name + ".sha256").write_text(f"{sha256(dest)}  {dest.name}\n")
    return True


def _transfer(url: str, partial: Path, progress: bool, timeout: float) -> None:
    have = partial.stat().st_size if partial.exists() else 0
    request = urllib.request.Request(url, headers={"User-Agent": "translator"})
    if have:
        request.add_header("Range", f"bytes={have}-")
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:  # the partial file is already whole
            return
        raise UserError(f"{url}: the server answered {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise UserError(
            f"cannot reach {url} ({_reason(exc.reason)}): offline? --base-url points at a mirror"
        ) from None
    with response:
        resumed = have and response.status == 206
        length = response.headers.get("Content-Length")
        total = (int(length) + (have if resumed else 0)) if length else None
        with (
            partial.open("ab" if resumed else "wb") as out,
            tqdm(
                total=total,
                initial=have if resumed else 0,
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                desc=url.rsplit("/", 1)[-1],
                disable=not progress,
            ) as bar,
        ):
            received = 0
            while block := response.read(CHUNK):
                out.write(block)
                received += len(block)
                bar.update(len(block))
        if length is not None and received < int(length):
            raise http.client.IncompleteRead(b"", int(length) - received)


def _reason(exc: object) -> str:
    return str(exc) or type(exc).__name__
