"""Plain text (.txt): each line one unit, its sentences split as `translate --input` splits
them; blank lines and line endings kept. No library."""

from __future__ import annotations

from dataclasses import dataclass

from translator.documents.document import Unit, decoded, encoded, plain, text_of


@dataclass
class TextDocument:
    units: list[Unit]
    endings: list[str]
    data: bytes

    def write(self, translated: list[Unit]) -> bytes:
        lines = (text_of(u) + end for u, end in zip(translated, self.endings, strict=True))
        return encoded("".join(lines), like=self.data)


class TextFormat:
    media_type = "text/plain; charset=utf-8"
    extra = ""

    @classmethod
    def read(cls, data: bytes, retranslate: bool = False) -> TextDocument:
        lines = decoded(data, "the file").splitlines(keepends=True)
        bodies = [line.rstrip("\r\n") for line in lines]
        endings = [line[len(body) :] for line, body in zip(lines, bodies, strict=True)]
        return TextDocument([plain(body) for body in bodies], endings, data)
