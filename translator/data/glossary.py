"""A user's glossary: English terms and the Chinese each must be translated as, from a file
(`english<TAB>chinese` or CSV, the files DeepL and Google Cloud Translation take) or a mapping.

Matching (`find`) is one pass over the sentence's words, never a loop over the entries, so a
glossary of a million entries matches as fast as one of ten (the rules:
docs/translating.md#glossaries). A file that cannot be read is one UserError naming the line.
"""

from __future__ import annotations

import csv
import functools
import re
from collections import ChainMap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from translator.data.normalization import normalize_en
from translator.data.spans import overlapping
from translator.data.tokenizer import Tokenizer
from translator.errors import UserError

_WORD_START = "\u2581"  # SentencePiece's mark of a piece that begins a word
_TOKEN = re.compile(r"\w+|[^\w\s]")  # a word, or one mark that is not a space
_PLAIN = re.compile(r"\w+(?: \w+)*")
_PLAIN_BYTES = b"abcdefghijklmnopqrstuvwxyz0123456789_ \n"
_SKIP_FIRST = "# \t\f\v"
# first lines taken for a header, not an entry (case-insensitive, either column)
_HEADER_SOURCE = {"en", "en-us", "en-gb", "english", "source", "src", "term", "source term"}
_HEADER_TARGET = {
    "zh", "zh-cn", "zh-hans", "zh_cn", "cmn", "chinese", "target", "tgt", "translation",
    "target term",
}  # fmt: skip


@dataclass(frozen=True, order=True)
class Match:
    """An entry found in a sentence: where its English stands, and its Chinese."""

    start: int
    end: int
    chinese: str

    def identity(self, text: str) -> bool:
        """Whether the entry keeps its English (`Python → Python`: a name to carry through)."""
        return self.chinese.lower() == text[self.start : self.end].lower()


def key(english: str) -> tuple[str, int]:
    """An entry's English as it is looked up, and its length in tokens: normalised as
    translate normalises input, lower-cased, its words and marks separated by one space
    where the text has any ("Node.js" → "node.js", "credit  card" → "credit card")."""
    text = normalize_en(english).lower()
    if _PLAIN.fullmatch(text):  # words and single spaces: most entries, and the fast way
        return text, text.count(" ") + 1 if text else 0
    tokens = list(_TOKEN.finditer(text))
    joined = "".join(
        (" " if i and tokens[i - 1].end() < t.start() else "") + t.group(0)
        for i, t in enumerate(tokens)
    )
    return joined, len(tokens)


def singulars(word: str) -> list[str]:
    """The forms a regular English plural may come from: cards → card, boxes → box (and
    boxe), batteries → battery. Nothing for a word that does not end in s."""
    if len(word) < 3 or not word.endswith("s") or word.endswith("ss") or not word.isalpha():
        return []
    forms = []
    if word.endswith("ies") and len(word) > 4:
        forms.append(word[:-3] + "y")
    if word.endswith("es"):
        forms.append(word[:-2])
    forms.append(word[:-1])
    return forms


class Glossary:
    """English → Chinese entries, looked up by `key`; `origin` names their source in messages."""

    def __init__(self, entries: Mapping[str, str], origin: str = "glossary", longest: int = 0):
        self.entries = entries  # key(english) → chinese
        self.origin = origin
        # the most tokens an entry has: how far `find` looks from each word
        self.longest = longest or max((key(k)[1] for k in entries), default=0)

    def __len__(self) -> int:
        return len(self.entries)

    def __bool__(self) -> bool:
        return bool(self.entries)

    @classmethod
    def load(cls, path: str | Path) -> Glossary:
        """A TSV or CSV glossary file, read, checked and added a chunk of lines at a time, so
        memory beyond the entries themselves stays bounded."""
        path = Path(path)
        try:
            handle = path.open("rb")
        except FileNotFoundError:
            raise UserError(f"glossary file not found: {path}") from None
        except OSError as exc:
            raise UserError(f"cannot read the glossary {path}: {exc.strerror}") from None
        table = _Table(str(path))
        with handle:
            number = 1  # the line number of the chunk's first line
            while chunk := handle.readlines(_CHUNK_BYTES):
                table.add(number, _decoded(chunk, path, number))
                number += len(chunk)
        return cls(table.entries, str(path), table.longest)

    @classmethod
    def of(cls, mapping: Mapping[str, str], origin: str = "glossary") -> Glossary:
        """A glossary from a mapping English → Chinese, checked as a file is."""
        if not all(isinstance(v, str) for pair in mapping.items() for v in pair):
            raise UserError(f"{origin}: every entry must map an English string to a Chinese one")
        rows = ((i, [english, chinese]) for i, (english, chinese) in enumerate(mapping.items(), 1))
        entries, longest = _entries(rows, origin, named=True)
        return cls(entries, origin, longest)

    @classmethod
    def open(cls, given: Glossary | Mapping[str, str] | str | Path | None) -> Glossary | None:
        """A path, a mapping, a Glossary or None, as the Python API and the CLI accept them."""
        if given is None or isinstance(given, Glossary):
            return given
        if isinstance(given, Mapping):
            return cls.of(given)
        return cls.load(given)

    def over(self, base: Glossary | None) -> Glossary:
        """This glossary laid over `base`: its entries win where both have one (looked up in
        both, not copied: a request's few entries over a server's million cost nothing)."""
        if not base:
            return self
        return Glossary(
            ChainMap(self.entries, base.entries),  # type: ignore[arg-type]
            f"{self.origin} over {base.origin}",
            max(self.longest, base.longest),
        )

    def find(self, text: str, exclude: Sequence[tuple[int, int]] = ()) -> list[Match]:
        """The entries in `text`, left to right, the longest first where two start at one
        word; none that overlaps an `exclude` range (protected spans)."""
        if not self.entries:
            return []
        tokens = [(m.start(), m.end(), m.group(0).lower()) for m in _TOKEN.finditer(text)]
        found, i = [], 0
        overlaps = overlapping(exclude)
        while i < len(tokens):
            hit = self._longest_at(tokens, i)
            if hit is None:
                i += 1
                continue
            length, chinese = hit
            start, end = tokens[i][0], tokens[i + length - 1][1]
            if not overlaps(start, end):
                found.append(Match(start, end, chinese))
            i += length
        return found

    def _longest_at(self, tokens: list[tuple[int, int, str]], i: int) -> tuple[int, str] | None:
        """The longest entry starting at token `i`: (its length in tokens, its Chinese)."""
        keys, key_ = [], ""
        for j in range(i, min(len(tokens), i + self.longest)):
            gap = " " if j > i and tokens[j - 1][1] < tokens[j][0] else ""
            key_ += gap + tokens[j][2]
            keys.append((key_, gap))
        for n in range(len(keys), 0, -1):
            whole, gap = keys[n - 1]
            if (chinese := self.entries.get(whole)) is not None:
                return n, chinese
            head = keys[n - 2][0] + gap if n > 1 else ""
            for singular in singulars(tokens[i + n - 1][2]):
                if (chinese := self.entries.get(head + singular)) is not None:
                    return n, chinese
        return None


_CHUNK_BYTES = 4 << 20  # a glossary file is read this much at a time


def _decoded(chunk: list[bytes], path: Path, number: int) -> list[str]:
    """Lines of a file as text, or a UserError naming the first line that is not UTF-8."""
    data = b"".join(chunk)
    try:
        text = data.decode("utf-8-sig" if number == 1 else "utf-8")
    except UnicodeDecodeError as exc:
        line = number + data[: exc.start].count(b"\n")
        raise UserError(
            f"{path}:{line}: not UTF-8 (byte 0x{data[exc.start]:02x}); save the glossary as UTF-8"
        ) from None
    return [line.rstrip("\r") for line in text.split("\n")[: len(chunk)]]


class _Table:
    """A file's entries as its chunks are added: each chunk checked in bulk, and only a chunk
    with something wrong or repeated walked line by line, to name the line."""

    def __init__(self, origin: str):
        self.origin = origin
        self.entries: dict[str, str] = {}
        self.longest = 0
        self.tsv: bool | None = None  # decided by the file's first line of content
        self.started = False  # whether that line has been seen (a header is left out)

    def add(self, first: int, lines: list[str]) -> None:
        """The lines of a chunk, the first of them line `first` of the file."""
        content = [line for line in lines if line and not _skipped(line)]
        if not self.started and content:
            self.started, self.tsv = True, "\t" in content[0]
            names = [f.strip().lower() for f in self._fields(content[0])]
            if len(names) == 2 and names[0] in _HEADER_SOURCE and names[1] in _HEADER_TARGET:
                lines[lines.index(content[0])] = ""  # blank: skipped, the numbering kept
                content = content[1:]
        try:
            keys, chinese, longest = _bulk(content, "\t" if self.tsv else ",")
            chunk = dict(zip(keys, chinese, strict=True))
            if len(chunk) < len(keys) or any(
                self.entries[k] != chunk[k] for k in chunk.keys() & self.entries.keys()
            ):
                raise _Irregular
        except _Irregular:
            rows = [
                (number, self._fields(line))
                for number, line in enumerate(lines, first)
                if line and not _skipped(line)
            ]
            chunk, longest = _entries(rows, self.origin, known=self.entries)
        self.entries.update(chunk)
        self.longest = max(self.longest, longest)

    def _fields(self, line: str) -> list[str]:
        if self.tsv:
            return line.split("\t")
        return line.split(",") if '"' not in line else next(csv.reader([line]), [])


def _skipped(line: str) -> bool:
    """A blank line or a comment (a line of content starts with neither a space nor #,
    which is tested first: most lines)."""
    return line[0] in _SKIP_FIRST and (line[0] == "#" or line.lstrip()[:1] in ("#", ""))


class _Irregular(Exception):
    """A chunk the bulk check cannot take: walked line by line instead."""


def _bulk(lines: list[str], sep: str) -> tuple[list[str], list[str], int]:
    """The keys, Chinese and the most tokens of lines that are all `english<sep>chinese` with
    both sides filled (no quoted CSV field), worked on as one string; _Irregular otherwise."""
    body = "\n".join(lines)
    if body.count(sep) != len(lines) or (sep == "," and '"' in body):
        raise _Irregular
    parts = body.replace("\n", sep).split(sep)
    english, chinese = parts[0::2], parts[1::2]
    if _loose(body, sep):  # a space at either end of a field
        english, chinese = [e.strip() for e in english], [c.strip() for c in chinese]
    if not all(english) or not all(chinese):
        raise _Irregular
    if "  " in body:
        chinese = [" ".join(c.split()) for c in chinese]
    low = "\n".join(english).lower()
    if _plain(low):  # words and single spaces
        keys = low.split("\n")
        return keys, chinese, max((k.count(" ") for k in keys), default=-1) + 1
    keyed = [key(text) for text in english]
    if not all(term for term, _ in keyed):
        raise _Irregular
    return [term for term, _ in keyed], chinese, max((n for _, n in keyed), default=0)


def _loose(body: str, sep: str) -> bool:
    """Whether a field of `body` (lines of `english<sep>chinese`) starts or ends in a space."""
    ends = (f" {sep}", f"{sep} ", " \n", "\n ", f"\t{sep}", f"{sep}\t", "\t\n", "\n\t")
    return body[:1].isspace() or body[-1:].isspace() or any(end in body for end in ends)


def _plain(lines: str) -> bool:
    """Whether `lines` are ASCII words separated by single spaces: their keys are themselves."""
    if not lines.isascii() or "  " in lines or " \n" in lines or "\n " in lines:
        return False
    return not lines.encode("ascii").translate(None, _PLAIN_BYTES)


def _entries(
    rows: Iterable[tuple[int, list[str]]],
    origin: str,
    named: bool = False,
    known: Mapping[str, str] | None = None,
) -> tuple[dict[str, str], int]:
    """The rows checked one by one and keyed, and the most tokens an entry has; `known`:
    the entries of earlier chunks, which a row may not contradict. `named`: rows are a
    mapping's entries, named by their English in messages instead of a line number."""
    entries: dict[str, str] = {}
    known = known or {}
    longest = 0
    for number, fields in rows:
        where = f"{origin}: entry {fields[0]!r}" if named else f"{origin}:{number}"
        if len(fields) < 2:
            raise UserError(
                f"{where}: no tab or comma between the English and the Chinese "
                "(one `english<TAB>chinese` entry a line)"
            )
        if len(fields) > 2 and any(f.strip() for f in fields[2:]):
            raise UserError(f"{where}: {len(fields)} columns; an entry is two: english, chinese")
        english, chinese = fields[0].strip(), " ".join(fields[1].split())
        if not english or not chinese:
            side = "English" if not english else "Chinese"
            raise UserError(f"{where}: the {side} side is empty")
        term, tokens = key(english)
        if not term:
            raise UserError(f"{where}: the English side {english!r} has no word to match")
        before = known.get(term) or entries.setdefault(term, chinese)
        if before != chinese:
            raise UserError(
                f"{where}: {english!r} is given twice with different Chinese "
                f"(before: {before}; here: {chinese})"
            )
        longest = max(longest, tokens)
    return entries, longest


def term_ids(tokenizer: Tokenizer, chinese: str) -> list[int] | None:
    """A term's Chinese as target ids the way a translation writes it mid-sentence: without
    the word-start mark SentencePiece puts before the first piece of a text (▁显卡 → 显卡);
    a first piece that does not exist without it is written character by character (as
    bytes, where the tokenizer has byte fallback). None where the tokenizer cannot write
    the term (a character it has no piece or byte for)."""
    pieces = tokenizer.encode(chinese, out_type=str)
    if pieces and pieces[0].startswith(_WORD_START):
        head = pieces[0][len(_WORD_START) :]
        if not head or tokenizer.piece_to_id(head) != tokenizer.unk_id():
            pieces = ([head] if head else []) + pieces[1:]
        else:
            pieces = [*_characters(tokenizer, head), *pieces[1:]]
    ids = [tokenizer.piece_to_id(p) for p in pieces]
    return ids if ids and tokenizer.unk_id() not in ids else None


def _characters(tokenizer: Tokenizer, text: str) -> list[str]:
    """`text` one piece a character, or its UTF-8 bytes where the character is no piece."""
    pieces = []
    for char in text:
        if tokenizer.piece_to_id(char) != tokenizer.unk_id():
            pieces.append(char)
        else:
            pieces += [f"<0x{byte:02X}>" for byte in char.encode("utf-8")]
    return pieces


_SENTENCE_ENDS = ("。", "？", "！")  # marks that end a Chinese sentence


@functools.lru_cache(maxsize=8)  # a loaded tokenizer's, read once by every engine
def sentence_ends(tokenizer: Tokenizer) -> frozenset[int]:
    """The target pieces that end with a mark that ends a sentence (。？！): what a
    translation may not write before every term is in it (a term put after the sentence,
    "…过敏。花生。", reads as an afterthought)."""
    pieces = (tokenizer.id_to_piece(i) for i in range(tokenizer.get_piece_size()))
    return frozenset(i for i, piece in enumerate(pieces) if piece.endswith(_SENTENCE_ENDS))
