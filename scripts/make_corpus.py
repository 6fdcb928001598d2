"""Write an N-pair corpus in the Tatoeba export layout, for scale tests and benchmarks.

    python scripts/make_corpus.py 5000000 /tmp/corpus-5m.tsv
    python scripts/make_corpus.py 1000000 /tmp/corpus-1m --out-format moses  # .en + .zh

Built from the sentences of a real corpus (default: the shared Tatoeba file): each row
joins two of its pairs drawn at random, English with a space and Chinese directly, which
gives (27k)² ≈ 7×10⁸ distinct pairs, so a corpus of millions does not collapse under
dedupe. On top of that, so that every path of `prepare` runs: a share of rows with the
first Chinese sentence in traditional script (zhconv `zh-hant`), exact duplicates of the
row before, and malformed rows of each kind the reader counts (wrong column count, an id
that is not a number, a control character, bytes that are not UTF-8). The same seed
writes the same bytes. With `--out-format moses` the same pairs go to two line-aligned
files, OUT.en and OUT.zh (the malformed rows planted are then the two kinds a pair of text
files can have: control characters and bytes that are not UTF-8). Rows are made and
written a chunk at a time with vectorised string operations, so memory stays flat whatever
N; the last line says what was planted.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import zhconv
from common import TATOEBA, read_pairs

from translator.errors import UserError

CHUNK = 200_000
UNDECODABLE = "\udcff"  # written as the lone byte 0xFF by the "surrogateescape" encoder
MALFORMED = ("wrong column count", "id not a number", "control characters", "undecodable")


def load_sentences(source: Path, fmt: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """English, Chinese, and the Chinese in traditional script, one entry per source pair
    (rows with a tab or a newline inside dropped, so that joining them keeps the layout)."""
    frames = list(read_pairs(source, fmt))
    pairs = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["en", "zh"])
    pairs = pairs[~(pairs.en + pairs.zh).str.contains(r"[\t\n\r]")]
    if pairs.empty:
        raise UserError(f"{source} has no usable pair")
    zh = pairs.zh.to_numpy(dtype=object)
    traditional = np.array([zhconv.convert(s, "zh-hant") for s in zh], dtype=object)
    return pairs.en.to_numpy(dtype=object), zh, traditional


def chunk_rows(
    start: int,
    size: int,
    sentences: tuple,
    rates: dict,
    rng: np.random.Generator,
    kinds: tuple = MALFORMED,
) -> tuple[np.ndarray, Counter]:
    """The text lines of rows start+1 … start+size, and what was planted in them."""
    en, zh, traditional = sentences
    first, second = rng.integers(0, len(en), size), rng.integers(0, len(en), size)
    in_traditional = (rng.random(size) < rates["traditional"]) & (traditional[first] != zh[first])
    ids = np.arange(start + 1, start + size + 1)
    rows = pd.DataFrame(
        {
            "en_id": text(ids.astype(str)),
            "en": text(en[first]) + " " + text(en[second]),
            "zh_id": text((ids + 10**9).astype(str)),
            "zh": text(np.where(in_traditional, traditional[first], zh[first])) + text(zh[second]),
        }
    )
    duplicate = rng.random(size) < rates["duplicates"]
    duplicate[0] = False
    source_row = np.maximum.accumulate(np.where(duplicate, 0, np.arange(size)))
    rows = rows.iloc[source_row].reset_index(drop=True)
    lines = np.array(rows.en_id + "\t" + rows.en + "\t" + rows.zh_id + "\t" + rows.zh, dtype=object)
    kind = np.where(rng.random(size) < rates["malformed"], rng.integers(0, 4, size), -1)
    kind[~np.isin(kind, [MALFORMED.index(k) for k in kinds])] = -1  # the same draws either way
    for k, name in enumerate(MALFORMED):
        lines[kind == k] = broken(name, rows[kind == k], lines[kind == k])
    planted = Counter({name: int((kind == k).sum()) for k, name in enumerate(MALFORMED)})
    planted["traditional"] = int((in_traditional[source_row] & (kind < 0)).sum())
    planted["duplicates"] = int((duplicate & (kind < 0) & (kind[source_row] < 0)).sum())
    return lines, planted


def text(values: np.ndarray) -> pd.Series:
    """Python strings (object dtype): pandas 3's default string dtype refuses the lone
    surrogate that stands for an undecodable byte."""
    return pd.Series(values, dtype=object)


def broken(kind: str, rows: pd.DataFrame, lines: np.ndarray) -> np.ndarray:
    """The lines made malformed in the way `kind` names."""
    if kind == "wrong column count":
        return (rows.en_id + "\t" + rows.en + "\t" + rows.zh).to_numpy(object)
    if kind == "id not a number":
        return "x" + lines
    return lines + ("\x07" if kind == "control characters" else UNDECODABLE)


def make_corpus(
    n: int, out: Path, source: Path, fmt: str, seed: int, rates: dict, moses: bool = False
) -> Counter:
    sentences = load_sentences(source, fmt)
    planted: Counter = Counter()
    out.parent.mkdir(parents=True, exist_ok=True)
    paths = [out.with_name(out.name + s) for s in (".en", ".zh")] if moses else [out]
    kinds = MALFORMED[2:] if moses else MALFORMED
    files = [path.open("wb") for path in paths]
    try:
        for chunk, start in enumerate(range(0, n, CHUNK)):
            rng = np.random.default_rng([seed, chunk])
            lines, counts = chunk_rows(start, min(CHUNK, n - start), sentences, rates, rng, kinds)
            columns = [lines]
            if moses:  # every row has its four columns: English is the 2nd, Chinese the 4th
                fields = pd.Series(lines, dtype=object).str.split("\t", expand=True)
                columns = [fields[1].to_numpy(object), fields[3].to_numpy(object)]
            for f, column in zip(files, columns, strict=True):
                f.write(("\n".join(column) + "\n").encode("utf-8", "surrogateescape"))
            planted += counts
            del lines, columns
    finally:
        for f in files:
            f.close()
    return planted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("n", type=int, help="rows to write")
    parser.add_argument("out", type=Path)
    parser.add_argument("--source", type=Path, default=TATOEBA, help="a corpus to draw from")
    parser.add_argument("--format", default="auto", help="the source's: auto, tatoeba, anki, jsonl")
    parser.add_argument(
        "--out-format",
        choices=("tatoeba", "moses"),
        default="tatoeba",
        help="tatoeba: one TSV file; moses: OUT.en and OUT.zh, line-aligned",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--traditional", type=float, default=0.01, help="share of rows")
    parser.add_argument("--duplicates", type=float, default=0.02, help="share of rows")
    parser.add_argument("--malformed", type=float, default=0.001, help="share of rows")
    args = parser.parse_args()
    if args.n < 1:
        parser.error("n must be at least 1")
    if not args.source.is_file():
        parser.error(f"no source corpus at {args.source} (give one with --source)")
    rates = {k: getattr(args, k) for k in ("traditional", "duplicates", "malformed")}
    try:
        moses = args.out_format == "moses"
        planted = make_corpus(args.n, args.out, args.source, args.format, args.seed, rates, moses)
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    summary = ", ".join(f"{name} {count:,}" for name, count in sorted(planted.items()))
    where = f"{args.out}.en and .zh" if args.out_format == "moses" else args.out
    print(f"wrote {args.n:,} rows to {where}; planted: {summary}")


if __name__ == "__main__":
    main()
