"""What a read skipped: malformed rows counted by kind, the first few kept as examples with
their file and 1-based line number (for TMX, the number of the translation unit)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

MAX_EXAMPLES = 5  # malformed rows kept for the report


@dataclass
class Malformed:
    path: str
    line: int  # 1-based
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


@dataclass
class ReadStats:
    rows: int = 0  # non-blank lines seen, headers included
    malformed: int = 0
    headers: int = 0  # header lines skipped
    kinds: Counter = field(default_factory=Counter)  # malformed rows by kind
    examples: list[Malformed] = field(default_factory=list)

    def skip(self, path: Path, lines: pd.Index, kind: str, reason: str) -> None:
        """Count the rows at line numbers `lines` as malformed, of `kind`, for `reason`."""
        if len(lines) == 0:
            return
        self.malformed += len(lines)
        self.kinds[kind] += len(lines)
        self._keep_first([Malformed(str(path), int(line), reason) for line in lines[:MAX_EXAMPLES]])

    def merge(self, other: ReadStats) -> None:
        """Add the counts of a later part of the read (a later block or file)."""
        self.rows += other.rows
        self.malformed += other.malformed
        self.headers += other.headers
        self.kinds.update(other.kinds)
        self._keep_first(other.examples)

    def _keep_first(self, examples: list[Malformed]) -> None:
        """Keep the first rows of the read (by file, then line) as examples."""
        files = list(dict.fromkeys([m.path for m in self.examples + examples]))
        self.examples += examples
        self.examples.sort(key=lambda m: (files.index(m.path), m.line))
        del self.examples[MAX_EXAMPLES:]
