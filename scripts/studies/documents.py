"""Document mode against the alternatives, on lines of several sentences.

A WMT test set is one segment per line; here each `--group` consecutive segments become
one line (English joined with a space, each reference with nothing, as Chinese is
written), the way a paragraph reaches `translator translate`. Three ways to translate the
grouped lines, each scored (sacrebleu BLEU, tokenize zh, and chrF) against the grouped
references:

  document mode   translate's default: each line split into sentences (sentencex)
  per segment     the original segments translated one by one and joined back: the
                  baseline with gold sentence boundaries
  whole line      --no-split: each grouped line decoded as one source (before document
                  mode, the only way)

    python scripts/studies/documents.py runs/tatoeba-cpu/checkpoints/average5.pt \\
        --src ../shared/data/wmt/newstest2021.en-zh.en \\
        --ref ../shared/data/wmt/newstest2021.en-zh.refA.zh \\
        --ref ../shared/data/wmt/newstest2021.en-zh.refB.zh --beam 5

Prints one markdown table row a system, and the counts of lines, sentences found and
sentences cut for being longer than the model's positions.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from translator.data.splitting import join
from translator.evaluation.scoring import read_eval_set, score
from translator.inference.sentences import units
from translator.inference.text import Translator
from translator.model.rundir import checkpoint_in


def grouped(sources: list[str], references: list[list[str]], size: int):
    """Lines of `size` consecutive segments (the last may be shorter) and their references."""
    starts = range(0, len(sources), size)
    lines = [" ".join(sources[i : i + size]) for i in starts]
    refs = [["".join(r) for r in zip(*references[i : i + size], strict=True)] for i in starts]
    return lines, refs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", type=Path, help="a checkpoint or run directory")
    parser.add_argument("--src", type=Path, required=True)
    parser.add_argument("--ref", type=Path, action="append", required=True)
    parser.add_argument("--group", type=int, default=3)
    parser.add_argument("--beam", type=int, default=1)
    parser.add_argument("--limit", type=int, default=0, help="only the first N segments")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(message)s")

    sources, references = read_eval_set(args.src, args.ref)
    if args.limit:
        sources, references = sources[: args.limit], references[: args.limit]
    lines, line_refs = grouped(sources, references, args.group)
    translator = Translator.from_checkpoint(
        checkpoint_in(args.checkpoint), "cpu", beam=args.beam, engine="torch"
    )
    found = len(units(lines, split=True)[0])
    print(f"{args.src.name}: {len(sources)} segments in {len(lines)} lines of {args.group}; ")
    print(f"sentencex finds {found} sentences; beam {args.beam}\n")

    def per_segment() -> list[str]:
        alone = translator.translate(sources, split=False)
        return [join(alone[i : i + args.group]) for i in range(0, len(alone), args.group)]

    systems = {
        "document mode (default)": lambda: translator.translate(lines, split=True),
        "per segment, joined (gold boundaries)": per_segment,
        "whole line (--no-split)": lambda: translator.translate(lines, split=False),
    }
    print("| system | BLEU | chrF | seconds |")
    print("| --- | --- | --- | --- |")
    for name, run in systems.items():
        start = time.perf_counter()
        hypotheses = run()
        seconds = time.perf_counter() - start
        s = score(hypotheses, line_refs)
        print(f"| {name} | {s.bleu:.2f} | {s.chrf:.2f} | {seconds:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
