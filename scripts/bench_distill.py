"""How `translator distill` scales with the corpus: wall time, sentences/s and the peak
memory of the process, one row per size.

    python scripts/bench_distill.py                      # 100k and 1M pairs
    python scripts/bench_distill.py --sizes 20000        # a quick look

A small teacher is trained first, in WORK (configs/tiny.toml on the bundled sample data,
`--teacher-epochs` epochs; not timed). For each size, a corpus is written with
scripts/make_corpus.py and prepared with configs/tiny.toml's settings (not timed), then
`translator distill` translates its train split with the teacher (`--beam`, default 1: the
memory of a run does not grow with the beam, its time does) and is watched as
scripts/bench_data.py watches prepare: the peak resident memory of its process tree,
/proc polled every 20 ms. The distilled directory is checked: as many train pairs as it
says it kept, valid and test as prepared. Linux only (reads /proc).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from bench_data import make, watch
from common import ROOT, TATOEBA, translator_command

from translator.data.layout import read_split, split_file


def line_count(path: Path) -> int:
    with path.open("rb") as f:
        return sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 24), b""))


def teacher(args: argparse.Namespace) -> Path:
    """The small teacher's best.pt, trained once in WORK."""
    run, data = args.work / "teacher", args.work / "sample"
    best = run / "checkpoints/best.pt"
    if not best.is_file():
        steps = [
            ["prepare", "-c", "configs/tiny.toml", "--out", str(data)],
            ["train", "-c", "configs/tiny.toml", "--overwrite", "--set", f"data.dir={data}"]
            + ["--set", f"train.run_dir={run}", "--set", f"train.max_epochs={args.teacher_epochs}"],
        ]
        for step in steps:
            watch(translator_command(*step), args.work / f"{step[0]}-teacher.log", ROOT)
    return best


def bench(size: int, best: Path, args: argparse.Namespace) -> dict:
    corpus = args.work / f"corpus-{size}.tsv"
    make(size, corpus, args)
    prepared, out = args.work / f"prepared-{size}", args.work / f"distilled-{size}"
    if not (prepared / "stats.json").is_file():
        command = ["prepare", "-c", "configs/tiny.toml", "--input", str(corpus), "--out"]
        watch(translator_command(*command, str(prepared)), args.work / f"prepare-{size}.log", ROOT)
    command = ["distill", "-c", "configs/tiny.toml", "--data", str(prepared), "--teacher"]
    command += [str(best), "--out", str(out), "--overwrite", "--beam", str(args.beam)]
    seconds, peak = watch(translator_command(*command), args.work / f"distill-{size}.log", ROOT)
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    made = stats["distilled"]
    assert line_count(split_file(out, "train", "zh")) == made["kept"], "train.zh is not as counted"
    for split in ("valid", "test"):
        assert read_split(out, split) == read_split(prepared, split), f"{split} changed"
    return {
        "pairs": size,
        "translated": made["translated"],
        "seconds": seconds,
        "per_s": made["translated"] / seconds,
        "peak_mb": peak / 2**20,
        "kept": made["kept"],
        "dropped": made["dropped"],
    }


def table(rows: list[dict]) -> str:
    lines = [
        "| corpus pairs | train sentences translated | distill, s | sentences/s | peak RSS, MB "
        "| kept | dropped (empty / loop / too long / length ratio) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        dropped = " / ".join(f"{n:,}" for n in r["dropped"].values())
        lines.append(
            f"| {r['pairs']:,} | {r['translated']:,} | {r['seconds']:.0f} | {r['per_s']:,.0f} "
            f"| {r['peak_mb']:,.0f} | {r['kept']:,} | {dropped} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--source", type=Path, default=TATOEBA, help="sentences to recombine")
    parser.add_argument("--work", type=Path, default=Path("/tmp/translator-bench-distill"))
    parser.add_argument("--beam", type=int, default=1)
    parser.add_argument("--teacher-epochs", type=int, default=30)
    args = parser.parse_args()
    if not args.source.is_file():
        sys.exit(f"error: source corpus not found: {args.source} (pass --source)")
    args.work, args.source = args.work.resolve(), args.source.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    best = teacher(args)
    rows = []
    for size in args.sizes:
        rows.append(bench(size, best, args))
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    print(f"\n{os.cpu_count()} CPU cores; teacher {best} (beam {args.beam})\n")
    print(table(rows))


if __name__ == "__main__":
    main()
