"""The corpora of `data.inputs`: each entry one corpus, with its files and its weight.

    "tatoeba.tsv"                                    one file (any format prepare reads)
    { path = "tatoeba.tsv", weight = 0.5 }           the same, weighted
    { src = "news.en", tgt = "news.zh", weight = 3 } two line-aligned files (Moses style)
    { path = "general.tsv", weight = 0.3, train_only = true }

Weights and `train_only`: docs/data.md#several-corpora-weights-and-decontamination.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from translator.errors import UserError

_KEYS = {"path", "src", "tgt", "weight", "train_only"}


@dataclass(frozen=True)
class Corpus:
    paths: tuple[str, ...]  # one file, or the English and the Chinese file of a pair
    weight: float = 1.0
    train_only: bool = False  # never in valid or test (nor anything linked to it)

    @property
    def name(self) -> str:
        """How stats.json and the summary name it: the file, or both files joined by " + "."""
        return " + ".join(self.paths)

    def entry(self) -> str | dict[str, Any]:
        """The corpus as a `data.inputs` entry (what config.json records)."""
        if len(self.paths) == 1 and self.weight == 1.0 and not self.train_only:
            return self.paths[0]
        one = len(self.paths) == 1
        files = {"path": self.paths[0]} if one else {"src": self.paths[0], "tgt": self.paths[1]}
        return files | {"weight": self.weight} | ({"train_only": True} if self.train_only else {})


def parse_corpus(key: str, entry: Any) -> Corpus:
    """One `data.inputs` entry (`key` names it in errors, e.g. "data.inputs[2]")."""
    if isinstance(entry, Corpus):
        return entry
    if isinstance(entry, str):
        return Corpus((entry,))
    if not isinstance(entry, dict):
        raise UserError(f"config key '{key}' must be a file name or a table, got {entry!r}")
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        raise UserError(f"unknown key '{key}.{unknown[0]}' (known: {', '.join(sorted(_KEYS))})")
    files = {k: entry[k] for k in ("path", "src", "tgt") if k in entry}
    for name, value in files.items():
        if not isinstance(value, str) or not value:
            raise UserError(f"config key '{key}.{name}' must be a file name, got {value!r}")
    weight = entry.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not weight > 0:
        raise UserError(f"config key '{key}.weight' must be a number above 0, got {weight!r}")
    train_only = entry.get("train_only", False)
    if not isinstance(train_only, bool):
        raise UserError(f"config key '{key}.train_only' must be true or false, got {train_only!r}")
    if set(files) in ({"path"}, {"src", "tgt"}):  # in that order
        return Corpus(tuple(files.values()), float(weight), train_only)
    raise UserError(
        f"config key '{key}' needs either path = FILE or both src = FILE and tgt = FILE, "
        f"got {', '.join(sorted(files)) or 'neither'}"
    )


def parse_corpora(inputs: list) -> list[Corpus]:
    return [parse_corpus(f"data.inputs[{i}]", entry) for i, entry in enumerate(inputs)]


def rebase_entry(entry: Any, base: Path) -> Any:
    """The entry with its relative file names made relative to `base`."""
    if isinstance(entry, str):
        return str(base / entry)
    if isinstance(entry, dict):
        files = {k: str(base / v) for k, v in entry.items() if k != "weight" and isinstance(v, str)}
        return entry | files
    return entry
