"""What the document tests share: a stand-in translator that writes Chinese word for word
(deterministic, so a formatted span translated alone reads as it does in its sentence), and
a glossary-obeying real model for the end-to-end checks (the `trained` fixture)."""

from __future__ import annotations

import io
import re
import struct
import zipfile
import zlib

from translator.documents import conversion
from translator.documents.inline import Request

_TOKEN = re.compile(r"[A-Z]{2,3}-\d+|[A-Za-z']+|\d+|[^\sA-Za-z0-9]")
_WORDS = {"hello": "你好", "world": "世界", "the": "", "a": "", "is": "是", "today": "今天"}
CJK = re.compile(r"[\u4e00-\u9fff]")


def word(token: str) -> str:
    """A word's stand-in Chinese: one of _WORDS, else two characters chosen by its CRC."""
    lower = token.lower()
    if lower in _WORDS:
        return _WORDS[lower]
    if not re.fullmatch(r"[a-z']+", lower):
        return token  # digits, marks, stand-ins (QZ-10) as written
    h = zlib.crc32(lower.encode())
    return chr(0x4E00 + h % 20000) + chr(0x4E00 + (h >> 16) % 20000)


def fake_translate(request: Request) -> list[str]:
    """Each text word for word into stand-in Chinese; a term of `request.terms` in it is
    written as its Chinese (as the real search writes glossary terms)."""
    out = []
    for text in request.texts:
        for english, chinese in request.terms.items():
            text = re.sub(re.escape(english), f" {chinese} ", text, flags=re.IGNORECASE)
        out.append("".join(word(t) for t in _TOKEN.findall(text)))
    return out


def translated(data: bytes, name: str, retranslate: bool = False):
    """`data` (format `name`) translated by fake_translate: (bytes, counts)."""
    return conversion.translated(conversion.read(data, name, retranslate), fake_translate)


def png() -> bytes:
    """A 1×1 PNG."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + body))
        return struct.pack(">I", len(body)) + kind + body + crc

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = chunk(b"IDAT", zlib.compress(b"\0\0\0\0"))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + pixels + chunk(b"IEND", b"")


def zipped(files: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    """A zip of `files` (an EPUB's `mimetype` stored, as the format asks)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", method) as archive:
        for name, body in files.items():
            archive.writestr(name, body, zipfile.ZIP_STORED if name == "mimetype" else None)
    return out.getvalue()


def members(data: bytes) -> dict[str, bytes]:
    """A zip's members by name."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def with_extra_part(data: bytes, name: str) -> bytes:
    """`data` (an Office file) with the part `name` (word/embeddings/x.bin), which no
    relationship names (as macros and embedded objects can be), declared in
    [Content_Types].xml."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            body = src.read(info)
            if info.filename == "[Content_Types].xml":
                body = body.replace(
                    b"</Types>",
                    f'<Override PartName="/{name}" '.encode()
                    + b'ContentType="application/vnd.openxmlformats-officedocument.oleObject"/>'
                    b"</Types>",
                )
            dst.writestr(info, body)
        dst.writestr(name, bytes(range(256)) * 4)
    return out.getvalue()
