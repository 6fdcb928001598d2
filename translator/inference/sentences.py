"""Document mode: lines of running text in, one translation per line out.

A model trained on single sentences turns three sentences on one line into one muddled
sentence, and a line over its positions would lose everything after the cut; here each
sentence is translated as what it is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from translator.data.splitting import sentences
from translator.data.tokenizer import EOS, Tokenizer, encode, source_prefix

CLAUSE_END = re.compile(r"[.!?,;:)\]}\u2013\u2014]$")  # a piece that may end a clause
_WORD_START = "\u2581"  # SentencePiece's mark of a piece that begins a word


@dataclass
class Pieces:
    """What the engine translates for a document, and where each piece goes back."""

    sources: list[np.ndarray]  # source ids, each ending in EOS, at most the model's positions
    line: list[int]  # the input line of each piece (pieces of a line are consecutive)
    cut: int  # sentences (or lines) longer than the model's positions, translated in pieces


class Cutter:
    """Cuts a source longer than the model's positions, at a clause end or a word start."""

    def __init__(self, tokenizer: Tokenizer, positions: int, prefix: str = ""):
        pieces = [tokenizer.id_to_piece(i) for i in range(tokenizer.get_piece_size())]
        self.clause_end = np.array([bool(CLAUSE_END.search(p)) for p in pieces])
        self.word_start = np.array([p.startswith(_WORD_START) for p in pieces])
        self.prefix = source_prefix(tokenizer, prefix)
        self.room = positions - 1 - len(self.prefix)  # tokens a piece may have before its EOS
        self.tokenizer = tokenizer

    def pieces(self, texts: Sequence[str], lines: Sequence[int]) -> Pieces:
        """`texts` (sentences or whole lines, of input line `lines[i]`) → pieces."""
        sources, owners, cut = [], [], 0
        for ids, line in zip(encode(texts, self.tokenizer), lines, strict=True):
            parts = [ids] if len(ids) <= self.room + 1 else self.cut(ids[:-1])
            cut += len(parts) > 1
            if len(self.prefix):
                parts = [np.concatenate([self.prefix, p]).astype(p.dtype) for p in parts]
            sources += parts
            owners += [line] * len(parts)
        return Pieces(sources, owners, cut)

    def cut(self, ids: np.ndarray) -> list[np.ndarray]:
        """Ids (no EOS) longer than `room` → pieces of at most `room` ids, each + EOS: the
        longest prefix that ends a clause, again and again, else equal pieces."""
        parts, start = [], 0
        while len(ids) - start > self.room:
            window = ids[start : start + self.room]
            ends = np.flatnonzero(self.clause_end[window])
            length = int(ends[-1]) + 1 if ends.size else self.equal_share(ids[start:])
            parts.append(ids[start : start + length])
            start += length
        parts.append(ids[start:])
        return [np.append(p, EOS).astype(ids.dtype) for p in parts]

    def equal_share(self, ids: np.ndarray) -> int:
        """How long the first of equal pieces of `ids` is, moved back to a word start when
        one is near (within a quarter of the piece)."""
        count = -(-len(ids) // self.room)
        size = -(-len(ids) // count)
        starts = np.flatnonzero(self.word_start[ids[size * 3 // 4 : size + 1]])
        return size * 3 // 4 + int(starts[-1]) if starts.size and starts[-1] > 0 else size


def units(texts: Sequence[str], split: bool) -> tuple[list[str], list[int]]:
    """The texts to translate for each of `texts` (its sentences, or itself), and the
    index of the line each belongs to. Blank lines have none."""
    out, owners = [], []
    for i, text in enumerate(texts):
        parts = sentences(text) if split else [text] if text else []
        out += parts
        owners += [i] * len(parts)
    return out, owners
