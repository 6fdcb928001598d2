"""Zip archives holding a corpus (OPUS ships its Moses-format corpora this way): which files
are in one, and each member read as a stream, decompressed as it is read, never unpacked.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import BinaryIO

from translator.errors import UserError

_EN = re.compile(r"\.(en|eng|en[-_][a-z]+)$", re.IGNORECASE)
_ZH = re.compile(r"\.(zh|cmn|zho|chi|zh[-_][a-z]+)$", re.IGNORECASE)
_SINGLE = re.compile(r"\.(tsv|txt|tmx|jsonl|json)$", re.IGNORECASE)
_IGNORED = re.compile(r"(^|/)(readme|license)[^/]*$|\.(ids|xml|md)$", re.IGNORECASE)


def is_zip(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(4) == b"PK\x03\x04"


def corpus_members(path: Path) -> tuple[str, ...]:
    """The member names of the corpus in the zip at `path`: (english, chinese) or (file,);
    README, LICENSE and OPUS's `.ids`/`.xml` alignment files are ignored."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = [i.filename for i in archive.infolist() if not i.is_dir()]
    except (zipfile.BadZipFile, OSError) as exc:
        raise UserError(f"{path}: the zip archive is truncated or corrupt ({exc})") from None
    data = [n for n in names if not _IGNORED.search(n)]
    en = [n for n in data if _EN.search(n)]
    zh = [n for n in data if _ZH.search(n)]
    if len(en) == 1 and len(zh) == 1:
        return en[0], zh[0]
    single = [n for n in data if _SINGLE.search(n)]
    if not en and not zh and len(single) == 1:
        return (single[0],)
    listed = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
    raise UserError(
        f"{path}: cannot tell which files of the zip archive are the corpus (it holds "
        f"{listed or 'nothing'}); expected one *.en and one *.zh file, or one .tsv, .txt, "
        f".tmx or .jsonl file"
    )


def open_member(path: Path, member: str) -> BinaryIO:
    """A stream of the member's bytes. The archive's file stays open until the stream is
    closed (zipfile counts the references to it)."""
    with zipfile.ZipFile(path) as archive:
        return archive.open(member)  # type: ignore[return-value]
