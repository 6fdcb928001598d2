"""What `translator release` gives for one checkpoint: the file sizes of the run's full
checkpoint, the checkpoint itself and its float32, float16 and bfloat16 releases, and for
each release its greedy translations of a prepared test split against the checkpoint's
own (sentences identical, BLEU). The table in docs/deploy.md comes from:

    python scripts/release_check.py runs/tatoeba-cpu/checkpoints/average5.pt \\
        --data data/prepared/tatoeba-3k-ph3

Releases are written to a temporary directory; nothing in the run changes.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from translator.config import DecodeConfig
from translator.data.layout import read_references
from translator.deploy.release import release
from translator.evaluation.scoring import score
from translator.inference.text import Translator
from translator.model.rundir import checkpoint_in

DTYPES = ("float32", "float16", "bfloat16")


def megabytes(path: Path) -> str:
    return f"{path.stat().st_size / 1e6:.1f} MB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path, help="A checkpoint, or a run directory.")
    parser.add_argument("--data", type=Path, required=True, help="A prepared directory.")
    parser.add_argument("--split", default="test")
    args = parser.parse_args(argv)
    source = checkpoint_in(args.checkpoint)
    sources, references = read_references(args.data, args.split)
    greedy = DecodeConfig(beam=1, precision="fp32")  # the stored weights, as they decode
    baseline = Translator.from_checkpoint(source, "cpu", greedy).translate(sources)
    rows = []
    last = source.parent / "last.pt"
    if last.is_file() and last != source:
        rows.append(("the run's last.pt (training state)", megabytes(last), "", ""))
    bleu = score(baseline, references).bleu
    rows.append((f"{source.name} (the checkpoint)", megabytes(source), "", f"{bleu:.2f}"))
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in DTYPES:
            done = release(source, Path(tmp) / f"{dtype}.pt", dtype)
            out = Translator.from_checkpoint(done.path, "cpu", greedy).translate(sources)
            same = sum(a == b for a, b in zip(out, baseline, strict=True))
            bleu = score(out, references).bleu
            identical = f"{same:,} of {len(out):,}"
            rows.append((f"release, {dtype}", megabytes(done.path), identical, f"{bleu:.2f}"))
    print(f"greedy on {args.data}/{args.split} ({len(sources):,} sentences)\n")
    print("| file | size | greedy output identical to the checkpoint's | greedy BLEU |")
    print("| --- | --- | --- | --- |")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
