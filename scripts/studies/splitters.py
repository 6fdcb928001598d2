"""Which English sentence splitter document mode uses: accuracy on real multi-sentence lines.

Each line is three consecutive segments of WMT newstest2019 (a development year: never a
test set) joined with a space, as a paragraph of a news article reads; the segment
boundaries are the gold sentence boundaries. Lines whose segments do not each end like a
sentence (headlines, captions) are left out, so a splitter is not asked to find a boundary
that has no punctuation. Each splitter (the installed ones of pysbd, sentencex,
sentence-splitter, and a one-regex baseline) splits every line; reported: lines split
exactly right, boundary precision and recall, and the time per line.

    python scripts/studies/splitters.py [--lines 60] [--show-errors]

The candidates are not dependencies of translator: `make splitters` installs them and runs
this script. Needs ../shared/data/wmt (skips with a message when it is absent).
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
import time
from pathlib import Path

# scripts/common.py, the helpers every script shares, loaded by its path: Python puts the
# study's own folder first on the module path, not scripts/ (docs/architecture.md#the-scripts)
_spec = importlib.util.spec_from_file_location("common", Path(__file__).parents[1] / "common.py")
common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(common)


SOURCE = common.WMT / "newstest2019.en-zh.en"
UNCOUNTED = re.compile(r"[\s\"'“”‘’]")
ENDS_LIKE_A_SENTENCE = re.compile(r"[.!?][\"'”’)]*$")


def gold_lines(path: Path, count: int, group: int = 3) -> list[list[str]]:
    """`count` lines of `group` consecutive segments, spread over the file."""
    segments = [s.strip() for s in path.read_text(encoding="utf-8").splitlines()]
    candidates = [
        segments[i : i + group]
        for i in range(0, len(segments) - group + 1, group)
        if all(ENDS_LIKE_A_SENTENCE.search(s) for s in segments[i : i + group])
    ]
    step = max(1, len(candidates) // count)
    return candidates[::step][:count]


def splitters() -> dict:
    found = {"regex baseline": _regex}
    if importlib.util.find_spec("pysbd"):
        import pysbd

        segmenter = pysbd.Segmenter(language="en", clean=False)
        found["pysbd 0.3.4"] = segmenter.segment
    if importlib.util.find_spec("sentencex"):
        from sentencex import segment

        found["sentencex"] = lambda text: list(segment("en", text))
    if importlib.util.find_spec("sentence_splitter"):
        from sentence_splitter import SentenceSplitter

        found["sentence-splitter (Moses)"] = SentenceSplitter(language="en").split
    return found


def _regex(text: str) -> list[str]:
    return re.split(r"(?<=[.!?\"'”’)])\s+(?=[\"'“‘(]?[A-Z0-9])", text)


def boundaries(sentences: list[str]) -> set[int]:
    """Where sentences end, as offsets in the text without spaces and quotation marks (a
    closing quote put with either sentence is the same boundary)."""
    ends, position = set(), 0
    for sentence in sentences[:-1]:
        position += len(UNCOUNTED.sub("", sentence))
        ends.add(position)
    return ends


def score(split, lines: list[list[str]], show_errors: bool) -> tuple[float, float, float, float]:
    exact = found = right = wanted = 0
    start = time.perf_counter()
    outputs = [[s for s in split(" ".join(line)) if s.strip()] for line in lines]
    per_line = (time.perf_counter() - start) / len(lines)
    for line, output in zip(lines, outputs, strict=True):
        gold, got = boundaries(line), boundaries(output)
        exact += gold == got
        right += len(gold & got)
        found += len(got)
        wanted += len(gold)
        if show_errors and gold != got:
            print("   ", " | ".join(s.strip() for s in output))
    return exact / len(lines), right / max(found, 1), right / wanted, per_line


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=60)
    parser.add_argument("--show-errors", action="store_true")
    args = parser.parse_args()
    if not SOURCE.is_file():
        print(f"skipped: {SOURCE} is absent")
        return 0
    lines = gold_lines(SOURCE, args.lines)
    print(f"{len(lines)} lines of 3 newstest2019 segments ({sum(map(len, lines))} sentences)\n")
    print("| splitter | lines exactly right | boundary precision | boundary recall | ms/line |")
    print("| --- | --- | --- | --- | --- |")
    for name, split in splitters().items():
        if args.show_errors:
            print(f"{name}:")
        exact, precision, recall, seconds = score(split, lines, args.show_errors)
        print(f"| {name} | {exact:.0%} | {precision:.1%} | {recall:.1%} | {seconds * 1e3:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
