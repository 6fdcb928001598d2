"""Beam size and length penalty chosen on the validation split: each checkpoint decodes the
prepared valid split (all its references) with every beam size and GNMT length penalty
alpha of a grid; the best pair by mean validation BLEU over the checkpoints is marked, and
with --test the test split's BLEU is reported beside it (reported, not chosen by).

    python scripts/studies/decode_sweep.py --data data/prepared/tatoeba-3k-sw4 \\
        runs/a/checkpoints/ema.pt runs/b/checkpoints/ema.pt \\
        --beams 5 10 --alphas 0.6 1.0 1.5 2.0 --test [--device cuda]

Prints one markdown table row a (beam, alpha) pair. `length` is the output's length over
the references' (sacrebleu's sys_len / ref_len, mean over the checkpoints, valid split):
below 1, BLEU's brevity penalty is paid.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sacrebleu.metrics import BLEU

from translator.data.layout import read_references
from translator.evaluation.scoring import reference_streams
from translator.inference.text import Translator
from translator.model.rundir import checkpoint_in


def bleu_and_length(hypotheses: list[str], references: list[list[str]]) -> tuple[float, float]:
    """Multi-reference BLEU (tok zh, as `translator eval`) and sys_len / ref_len."""
    result = BLEU(tokenize="zh").corpus_score(hypotheses, reference_streams(references))
    return result.score, result.sys_len / result.ref_len


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoints", type=Path, nargs="+")
    parser.add_argument("--data", type=Path, required=True, help="a prepared directory")
    parser.add_argument("--beams", type=int, nargs="+", default=[5])
    parser.add_argument("--alphas", type=float, nargs="+", default=[0.0, 0.6, 1.0, 1.5, 2.0])
    parser.add_argument("--test", action="store_true", help="also score the test split")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, … (default: cpu)")
    args = parser.parse_args()
    splits = ["valid", "test"] if args.test else ["valid"]
    sets = {split: read_references(args.data, split) for split in splits}
    models = [
        Translator.from_checkpoint(checkpoint_in(c), args.device, engine="torch")
        for c in args.checkpoints
    ]
    names = [f"{c.parent.parent.name}/{c.name}" for c in args.checkpoints]
    rows = []
    for beam in args.beams:
        for alpha in args.alphas:
            scores = {split: [] for split in splits}
            lengths = []
            for model in models:
                decoder = model.with_decode(beam=beam, length_penalty=alpha, split=False)
                for split, (sources, references) in sets.items():
                    bleu, length = bleu_and_length(decoder.translate(sources), references)
                    scores[split].append(bleu)
                    if split == "valid":
                        lengths.append(length)
            mean = sum(scores["valid"]) / len(models)
            rows.append((beam, alpha, mean, sum(lengths) / len(lengths), scores))
            print(f"beam {beam}, alpha {alpha:g}: valid {mean:.2f}", file=sys.stderr, flush=True)
    best = max(rows, key=lambda row: row[2])
    columns = [f"{name} {split}" for split in splits for name in names]
    print("| beam | alpha | mean valid BLEU | length | " + " | ".join(columns) + " |")
    print("| --- " * (4 + len(columns)) + "|")
    for row in rows:
        beam, alpha, mean, length, scores = row
        cells = [f"{bleu:.2f}" for split in splits for bleu in scores[split]]
        mark = " (best)" if row is best else ""
        print(f"| {beam} | {alpha:g}{mark} | {mean:.2f} | {length:.3f} | {' | '.join(cells)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
