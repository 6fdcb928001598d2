"""How `prepare`, the start of `train` and `distill` scale with the corpus: one table.

    python scripts/bench_data.py                       # 100k, 1M and 5M pairs
    python scripts/bench_data.py --sizes 20000 100000  # a quick look
    python scripts/bench_data.py --distill             # distill at 100k and 1M pairs

For each size, a corpus is written with scripts/make_corpus.py (not timed), then:
- `translator prepare` on it: wall time, input pairs per second, and the peak resident
  memory of the whole process tree (the command and its worker processes, summed at each
  moment: /proc is polled every 20 ms), and the size of the prepared directory;
- `translator train` on the prepared directory: the time from launching the command to the
  end of its first optimiser update (the log line the trainer writes then), and the tree's
  peak resident memory up to that moment; the median of --repeats launches.

With --subword-sampling K, the same corpus is also prepared with `data.subword_sampling=K`
(BPE-dropout encodings of the train split), alternating with the plain prepare,
--prepare-repeats times each in the same run: the medians of the whole prepare and of its
encode stage, and the prepared directory's size, go in a third table with their ratios.

With --compare-moses, the same pairs are also written as two line-aligned files
(make_corpus.py --out-format moses) and both layouts are prepared in turn, --prepare-repeats
times each, alternating, in the same run: the medians and their ratio go in a second
table. --repeats 0 skips the training launches.

With --distill, `translator distill` is measured instead: a small teacher is trained first,
in WORK (configs/tiny.toml on the bundled sample data, `--teacher-epochs` epochs; not
timed). For each size, the corpus is prepared with configs/tiny.toml's settings (not timed),
then `translator distill` translates its train split with the teacher (`--beam`, default 1:
the memory of a run does not grow with the beam, its time does) and is watched as prepare
is: wall time, sentences/s and the peak resident memory of its process tree. The distilled
directory is checked: as many train pairs as it says it kept, valid and test as prepared.

The stage times `prepare` logs are kept in WORK/prepare-N.log. Linux only (reads /proc).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import (
    ROOT,
    TATOEBA,
    config_home,
    end_on_sigterm,
    session,
    timed_runs,
    translator_command,
)

from translator.data.layout import read_split, split_file

REPEAT_SECONDS = 600.0  # the train-start repeats stop once they have taken this long

FIRST_UPDATE = "after start-up began"  # in the line the trainer logs after its first update
PAGE = os.sysconf("SC_PAGE_SIZE")


def tree_rss(root: int) -> int:
    """Resident bytes of `root` and all its descendants, now."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            with open(f"/proc/{entry}/statm", "rb") as f:
                rss[int(entry)] = int(f.read().split()[1]) * PAGE
        except (OSError, IndexError):
            continue  # the process ended meanwhile
        children.setdefault(int(fields[1]), []).append(int(entry))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo += children.get(pid, [])
    return total


def watch(command: list[str], log: Path, cwd: Path, until: str | None = None) -> tuple[float, int]:
    """Run `command` in `cwd` (stderr and stdout to `log`), polling its tree's memory.
    Returns the seconds until it exits, or until a line containing `until` appears (then
    it is stopped), and the peak resident bytes over that time. It runs in a session of
    its own (common.py's): leaving it, however, kills whatever of its group is left."""
    start = time.perf_counter()
    with (
        log.open("w") as out,
        session(command, stdout=out, stderr=subprocess.STDOUT, cwd=cwd) as proc,
    ):
        peak = 0
        while proc.poll() is None:
            peak = max(peak, tree_rss(proc.pid))
            if until and until in log.read_text(errors="replace"):
                return time.perf_counter() - start, peak
            time.sleep(0.02)
        seconds = time.perf_counter() - start
    if proc.returncode or until:
        sys.exit(f"error: {' '.join(command)} failed (exit {proc.returncode}); see {log}")
    return seconds, peak


def directory_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def make(size: int, out: Path, args: argparse.Namespace, *extra: str) -> None:
    if not (out.with_name(out.name + ".en") if extra else out).exists():
        command = [sys.executable, str(ROOT / "scripts/make_corpus.py"), str(size), str(out)]
        command += ["--source", str(args.source), *extra]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def compare_moses(size: int, corpus: Path, args: argparse.Namespace) -> dict:
    """Median pairs/s of prepare on the TSV and on the same pairs as a Moses pair."""
    moses = args.work / f"corpus-{size}"
    make(size, moses, args, "--out-format", "moses")
    inputs = {
        "tsv": ["--input", str(corpus)],
        "moses": ["--pair", f"{moses}.en", f"{moses}.zh"],
    }
    runs: dict[str, list[tuple[float, int]]] = {"tsv": [], "moses": []}
    for i in range(args.prepare_repeats):
        for name, given in inputs.items():
            command = translator_command("prepare", "-c", str(args.config))
            command += [*given, "--out", str(args.work / f"prepared-{size}-{name}")]
            runs[name].append(
                watch(command, args.work / f"prepare-{size}-{name}-{i}.log", args.home)
            )
    row: dict = {"pairs": size}
    for name, measured in runs.items():
        row[f"{name}_s"] = statistics.median(s for s, _ in measured)
        row[f"{name}_mb"] = statistics.median(p for _, p in measured) / 2**20
    return row


def encode_seconds(log: Path) -> float:
    """The encode stage's seconds from prepare's last line ("took … encode 12.3 s …")."""
    match = re.search(r"encode ([0-9.]+) s", log.read_text(encoding="utf-8"))
    return float(match.group(1)) if match else float("nan")


def compare_sampling(size: int, corpus: Path, args: argparse.Namespace) -> dict:
    """Median prepare and encode seconds and the prepared size, plain and sampled."""
    sets = {"plain": [], "sampled": ["--set", f"data.subword_sampling={args.subword_sampling}"]}
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in sets}
    row: dict = {"pairs": size, "k": args.subword_sampling}
    for i in range(args.prepare_repeats):
        for name, extra in sets.items():
            out = args.work / f"prepared-{size}-{name}"
            command = [sys.executable, "-m", "translator", "prepare", "-c", str(args.config)]
            command += ["--input", str(corpus), "--out", str(out), *extra]
            log = args.work / f"prepare-{size}-{name}-{i}.log"
            seconds, _ = watch(command, log, args.home)
            runs[name].append((seconds, encode_seconds(log)))
            row[f"{name}_mb"] = directory_bytes(out) / 2**20
    for name, measured in runs.items():
        row[f"{name}_s"] = statistics.median(s for s, _ in measured)
        row[f"{name}_encode_s"] = statistics.median(e for _, e in measured)
    return row


def sampling_table(rows: list[dict]) -> str:
    lines = [
        "| pairs | K | prepare, plain | prepare, sampled | ratio | encode, plain "
        "| encode, sampled | prepared dir, plain | prepared dir, sampled | ratio |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['pairs']:,} | {r['k']} | {r['plain_s']:.1f} s | {r['sampled_s']:.1f} s "
            f"| {r['sampled_s'] / r['plain_s']:.2f} | {r['plain_encode_s']:.1f} s "
            f"| {r['sampled_encode_s']:.1f} s | {r['plain_mb']:,.0f} MB "
            f"| {r['sampled_mb']:,.0f} MB | {r['sampled_mb'] / r['plain_mb']:.2f} |"
        )
    return "\n".join(lines)


def bench(size: int, args: argparse.Namespace) -> dict:
    corpus = args.work / f"corpus-{size}.tsv"
    make(size, corpus, args)
    if args.subword_sampling:  # the comparison alone
        return {"sampling": compare_sampling(size, corpus, args)}
    if args.compare_moses and not args.repeats:  # the comparison alone
        return {"moses": compare_moses(size, corpus, args)}
    prepared = args.work / f"prepared-{size}"
    prepare = translator_command("prepare", "-c", str(args.config), "--input", str(corpus))
    prepare += ["--out", str(prepared)]
    seconds, peak = watch(prepare, args.work / f"prepare-{size}.log", args.home)
    row = {
        "pairs": size,
        "prepare_s": seconds,
        "pairs_per_s": size / seconds,
        "prepare_peak_mb": peak / 2**20,
        "prepared_mb": directory_bytes(prepared) / 2**20,
    }
    if args.compare_moses:
        row["moses"] = compare_moses(size, corpus, args)
    if not args.repeats:
        row["first_update_s"] = row["train_peak_mb"] = float("nan")
        return row
    train = translator_command("train", "-c", str(args.config), "--overwrite")
    train += ["--set", f"data.dir={prepared}", "--set", f"train.run_dir={args.work}/run-{size}"]
    log, starts = args.work / f"train-{size}.log", []
    timed_runs(  # the repeats stop once REPEAT_SECONDS have passed
        lambda: starts.append(watch(train, log, args.home, until=FIRST_UPDATE)),
        args.repeats,
        REPEAT_SECONDS,
    )
    row["first_update_s"] = statistics.median(s for s, _ in starts)
    row["train_peak_mb"] = statistics.median(p for _, p in starts) / 2**20
    return row


def table(rows: list[dict]) -> str:
    lines = [
        "| pairs | prepare | pairs/s | prepare peak RSS (all processes) | prepared dir "
        "| train start → first update | train peak RSS to then |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['pairs']:,} | {r['prepare_s']:.1f} s | {r['pairs_per_s']:,.0f} "
            f"| {r['prepare_peak_mb']:,.0f} MB | {r['prepared_mb']:,.0f} MB "
            f"| {r['first_update_s']:.1f} s | {r['train_peak_mb']:,.0f} MB |"
        )
    return "\n".join(lines)


def moses_table(rows: list[dict]) -> str:
    lines = [
        "| pairs | TSV prepare | TSV pairs/s | TSV peak RSS | Moses prepare | Moses pairs/s "
        "| Moses peak RSS | Moses ÷ TSV pairs/s |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        n, tsv, pair = r["pairs"], r["tsv_s"], r["moses_s"]
        lines.append(
            f"| {n:,} | {tsv:.1f} s | {n / tsv:,.0f} | {r['tsv_mb']:,.0f} MB | {pair:.1f} s "
            f"| {n / pair:,.0f} | {r['moses_mb']:,.0f} MB | {tsv / pair:.2f} |"
        )
    return "\n".join(lines)


# ---- --distill -----------------------------------------------------------------------------------


def line_count(path: Path) -> int:
    with path.open("rb") as f:
        return sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 24), b""))


def teacher(args: argparse.Namespace) -> Path:
    """The small teacher's best.pt, trained once in WORK (--distill)."""
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


def bench_distill(size: int, best: Path, args: argparse.Namespace) -> dict:
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


def distill_table(rows: list[dict]) -> str:
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
    parser.add_argument(
        "--sizes", type=int, nargs="+", help="corpus pairs (100k, 1M and 5M; --distill: 100k, 1M)"
    )
    parser.add_argument(
        "-c",
        "--config",
        type=Path,
        default=ROOT / "configs/tatoeba-cpu.toml",
        help="what prepare and train read (--distill: configs/tiny.toml, the teacher's)",
    )
    parser.add_argument("--source", type=Path, default=TATOEBA, help="sentences to recombine")
    parser.add_argument(
        "--work",
        type=Path,
        help="default /tmp/translator-bench-data (--distill: /tmp/translator-bench-distill)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="train launches per size (0: none)")
    parser.add_argument(
        "--compare-moses", action="store_true", help="also prepare the pairs as .en + .zh"
    )
    parser.add_argument(
        "--prepare-repeats", type=int, default=2, help="with --compare-moses or --subword-sampling"
    )
    parser.add_argument(
        "--subword-sampling",
        type=int,
        default=0,
        help="K: compare prepare with K sampled encodings",
    )
    distill = parser.add_argument_group("--distill: `translator distill` instead")
    distill.add_argument("--distill", action="store_true")
    distill.add_argument("--beam", type=int, default=1)
    distill.add_argument("--teacher-epochs", type=int, default=30)
    args = parser.parse_args()
    end_on_sigterm()  # SIGTERM, as Ctrl-C, ends the processes started below
    if not args.source.is_file():
        sys.exit(f"error: source corpus not found: {args.source} (pass --source)")
    if args.distill:
        args.sizes = args.sizes or [100_000, 1_000_000]
        args.work = args.work or Path("/tmp/translator-bench-distill")
        args.work, args.source = args.work.resolve(), args.source.resolve()
        args.work.mkdir(parents=True, exist_ok=True)
        best = teacher(args)
        rows = []
        for size in args.sizes:
            rows.append(bench_distill(size, best, args))
            print(distill_table(rows[-1:]).splitlines()[-1], flush=True)
        print(f"\n{os.cpu_count()} CPU cores; teacher {best} (beam {args.beam})\n")
        print(distill_table(rows))
        return
    args.sizes = args.sizes or [100_000, 1_000_000, 5_000_000]
    args.work = args.work or Path("/tmp/translator-bench-data")
    args.config, args.work = args.config.resolve(), args.work.resolve()
    args.source, args.home = args.source.resolve(), config_home(args.config)
    args.work.mkdir(parents=True, exist_ok=True)
    rows = []
    for size in args.sizes:
        rows.append(bench(size, args))
        if "prepare_s" in rows[-1]:
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    print(f"\n{os.cpu_count()} CPU cores; config {args.config}\n")
    if any("prepare_s" in r for r in rows):
        print(table([r for r in rows if "prepare_s" in r]))
    compared = [r["moses"] for r in rows if "moses" in r]
    if compared:
        print(f"\nthe same pairs as a Moses pair (median of {args.prepare_repeats} each):\n")
        print(moses_table(compared))
    sampled = [r["sampling"] for r in rows if "sampling" in r]
    if sampled:
        print(f"\nplain against sampled (median of {args.prepare_repeats} each):\n")
        print(sampling_table(sampled))


if __name__ == "__main__":
    main()
