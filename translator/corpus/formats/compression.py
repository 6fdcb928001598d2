"""Compressed corpus files, read directly: gzip, bzip2, xz and Zstandard, told by their
first bytes (not by the file name), decompressed as a stream, never unpacked to disk; and
the files inside a zip archive (archive.py). A damaged archive is one error for the whole
input: the rows before the damage are not used as if the file had ended there.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO
from zipfile import BadZipFile

from translator.corpus.formats.archive import is_zip, open_member
from translator.errors import UserError

MAGIC = {
    b"\x1f\x8b": "gzip",
    b"BZh": "bzip2",
    b"\xfd7zXZ\x00": "xz",
    b"\x28\xb5\x2f\xfd": "zstd",
}


def compression(path: Path) -> str | None:
    """gzip, bzip2, xz or zstd from the file's first bytes; None for a plain file."""
    with path.open("rb") as f:
        head = f.read(8)
    return next((kind for magic, kind in MAGIC.items() if head.startswith(magic)), None)


def open_input(path: Path, member: str | None = None) -> BinaryIO:
    """The file's bytes, decompressed if it is compressed; with `member`, the bytes of that
    file inside the zip archive at `path`. Read it inside `reading(path)`."""
    if member is not None:
        return open_member(path, member)
    kind = compression(path)
    if kind == "zstd":
        return _zstd_reader(path)
    if kind:
        return {"gzip": gzip.open, "bzip2": bz2.open, "xz": lzma.open}[kind](path, "rb")
    return path.open("rb")


@contextmanager
def reading(path: Path) -> Iterator[None]:
    """Turn a decompressor's complaint while reading `path` into one error line."""
    try:
        yield
    except (EOFError, OSError, lzma.LZMAError, zlib.error, _ZstdError, BadZipFile) as exc:
        kind = "zip" if is_zip(path) else compression(path) or "file"
        what = "truncated" if isinstance(exc, EOFError) else "corrupt"
        raise UserError(
            f"{path}: the {kind} data is {what} ({_reason(exc)}); nothing was prepared from "
            f"it — download or copy it again"
        ) from None


def _zstd_reader(path: Path) -> BinaryIO:
    try:
        import zstandard
    except ImportError:
        raise UserError(
            f"{path} is Zstandard-compressed: install the zstandard package "
            f"(pip install 'translator[zstd]') or decompress it first"
        ) from None
    return io.BufferedReader(_ZstdFrames(path, zstandard), 1 << 20)  # type: ignore[return-value]


class _ZstdFrames(io.RawIOBase):
    """The decompressed bytes of every frame of a .zst file. zstandard's own stream reader
    stops quietly at a cut-off frame; this one raises EOFError there, as gzip does."""

    def __init__(self, path: Path, zstandard):
        self.file, self.zstd = path.open("rb"), zstandard
        self.frame, self.pending = zstandard.ZstdDecompressor().decompressobj(), b""
        self.started = False  # the current frame has had input

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self.pending:
            data = self.file.read(1 << 20)
            if not data:
                if not self.frame.eof and self.started:
                    raise EOFError("Zstandard data ended inside a frame")
                return 0
            self.pending = self._decompress(data)
        n = min(len(buffer), len(self.pending))
        buffer[:n], self.pending = self.pending[:n], self.pending[n:]
        return n

    def _decompress(self, data: bytes) -> bytes:
        out = []
        while data:
            self.started = True
            out.append(self.frame.decompress(data))
            data = self.frame.unused_data if self.frame.eof else b""
            if self.frame.eof:  # the next frame, if any, with a fresh decompressor
                self.frame = self.zstd.ZstdDecompressor().decompressobj()
                self.started = bool(data)
        return b"".join(out)

    def close(self) -> None:
        self.file.close()
        super().close()


def _reason(exc: BaseException) -> str:
    return (str(exc).strip() or type(exc).__name__)[:120]


try:  # the zstandard package's error class, when it is installed
    from zstandard import ZstdError as _ZstdError
except ImportError:  # pragma: no cover - depends on the extra

    class _ZstdError(Exception):  # type: ignore[no-redef]
        pass
