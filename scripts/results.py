"""The headline figures from one command, at today's defaults: trains the shipped recipes
asked for, scores each as the README's tour does (`translator eval -c CONFIG`: the run's
model, train.final, with the default engine and precision, both named in the row) and
writes the rows into the results table of docs/quality.md, the figures' one home, and into
the README's copy of it (both between `results:begin` / `results:end` markers; rows of
recipes not asked for are kept as they are).

    python scripts/results.py --minutes 20               # the 20-minute recipe (~21 min)
    python scripts/results.py --minutes 60 --student     # the hour and its student (~95 min)
    python scripts/results.py --minutes 60 --student --reuse   # score runs already trained

Each recipe runs the commands its config's comment shows: `prepare`, `train --overwrite`
(the student: the hour's `distill --overwrite` first). With --reuse a run that recorded
its model (final.json) is scored as it is; the student reuses the hour's run it needs.
Figures move with the machine and the day (a time budget holds as many updates as the
machine gives it): each row names its updates and its machine; run one recipe at a time
on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

from common import ROOT, cpu_name, load_config, translator_command

from translator.model.rundir import RunDir

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


@dataclass(frozen=True)
class Recipe:
    label: str  # the row's first cell: how rows are matched when the table is rewritten
    config: str
    teacher: str = ""  # the config whose [distill] section writes this recipe's data


RECIPES = {
    "20": Recipe("20 minutes on a CPU", "configs/tatoeba-cpu.toml"),
    "60": Recipe("60 minutes on a CPU", "configs/tatoeba-cpu-60.toml"),
    "student": Recipe(
        "distilled student", "configs/student-cpu.toml", teacher="configs/tatoeba-cpu-60.toml"
    ),
}


@dataclass
class Row:
    """One recipe as scored: what the tour's `eval` printed and what its run recorded."""

    recipe: Recipe
    bleu: float
    chrf: float
    bleu_1ref: float
    model: str  # the checkpoint eval decoded, relative to the run, and why
    engine: str  # eval's engine line, without its reasons
    decode: str  # the search, from the config
    epochs: int
    updates: int
    minutes: float
    machine: str

    def quality_cells(self) -> list[str]:
        commands = "<br>".join(f"`{' '.join(c)}`" for c in tour(self.recipe))
        scores = (
            f"**{self.bleu:.2f}**, chrF {self.chrf:.2f}, 1 ref {self.bleu_1ref:.2f} ({self.decode})"
        )
        run = f"{self.updates:,} updates in {self.minutes:.0f} min ({self.epochs} epochs)"
        decoded = f"{self.model}; {self.engine}"
        return [self.recipe.label, commands, scores, run, decoded, self.machine]

    def readme_cells(self) -> list[str]:
        command = " ".join(tour(self.recipe)[-2])  # its train command
        return [self.recipe.label, f"`{command}`", f"{self.bleu:.2f}", self.machine]


def tour(recipe: Recipe) -> list[list[str]]:
    """The commands that train and score `recipe`, as its config's comment shows them."""
    steps = [] if recipe.teacher else [["translator", "prepare", "-c", recipe.config]]
    if recipe.teacher:
        steps.append(["translator", "distill", "-c", recipe.teacher])
    steps.append(["translator", "train", "-c", recipe.config])
    steps.append(["translator", "eval", "-c", recipe.config])
    return steps


def run(args: list[str], log: Path) -> subprocess.CompletedProcess:
    """`translator ARGS…` from the project root, its output kept in `log`; a failure ends
    the script with the log's last lines."""
    done = subprocess.run(translator_command(*args), cwd=ROOT, capture_output=True, text=True)
    log.write_text(done.stdout + done.stderr, encoding="utf-8")
    if done.returncode:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-5:])
        sys.exit(f"translator {' '.join(args)} failed (log: {log}):\n{tail}")
    return done


def train(recipe: Recipe, logs: Path) -> None:
    for step in tour(recipe)[:-1]:
        name, extra = step[1], ["--overwrite"] if step[1] in ("train", "distill") else []
        print(f"  {' '.join(step)}", flush=True)
        run([*step[1:], *extra], logs / f"{Path(recipe.config).stem}.{name}.log")


def score(recipe: Recipe, logs: Path) -> Row:
    """`translator eval -c CONFIG` on the recipe's trained run, read into a Row."""
    config = load_config(ROOT / recipe.config)
    run_dir = RunDir(ROOT / config.train.run_dir)
    if not run_dir.final_record.is_file():
        sys.exit(f"{run_dir.path} records no model (final.json): train it (without --reuse)")
    log = logs / f"{Path(recipe.config).stem}.eval.log"
    done = run(["eval", "-c", recipe.config], log)
    try:
        return read_row(recipe, done.stdout, done.stderr, run_dir, config.decode.beam)
    except LookupError as missing:
        sys.exit(f"eval's output (log: {log}) lacks {missing}")


def read_row(recipe: Recipe, stdout: str, stderr: str, run_dir: RunDir, beam: int) -> Row:
    """A Row from eval's output (its scores.json, named on the line of its scores) and the
    run's metrics.tsv; LookupError names a line that is not there."""
    hypotheses = found(r"^\S.* references; hypotheses in (.+)$", stdout)
    scores = json.loads((ROOT / hypotheses[0]).with_suffix(".scores.json").read_text())
    model = found(r"^model: (.+) \((.*)\)$", stderr)
    engine = found(r"^engine: ([^(]+?) \(", stderr)[0]
    rows = run_dir.metric_rows()
    last = rows[-1]
    checkpoint = Path(model[0])
    return Row(
        recipe,
        scores["bleu"],
        scores["chrf"],
        scores["bleu_1ref"],
        model=f"`{checkpoint.parent.name}/{checkpoint.name}` ({model[1]})",
        engine=engine,
        decode="greedy" if beam == 1 else f"beam {beam}",
        epochs=sum(int(row["complete"]) for row in rows),  # a budget's cut epoch is not one
        updates=int(last["step"]),
        minutes=float(last["minutes"]),
        machine=machine(),
    )


def found(pattern: str, text: str) -> tuple[str, ...]:
    """The groups of `pattern`'s first match in `text`'s lines; LookupError without one."""
    match = re.search(pattern, text, re.M)
    if match is None:
        raise LookupError(pattern)
    return match.groups()


def machine() -> str:
    """The machine as a row names it: cores, CPU, its bf16 instructions, torch."""
    flags = ""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        found = re.search(r"^flags\s*:(.*)$", cpuinfo.read_text(), re.M)
        flags = found.group(1).split() if found else []
    named = (("amx_bf16", "AMX"), ("avx512_bf16", "AVX-512 BF16"))
    kinds = [name for flag, name in named if flag in flags]
    extras = f" with {' and '.join(kinds)}" if kinds else " without bf16 instructions"
    cores = len(os.sched_getaffinity(0))  # the ones this process may use
    name = re.sub(r"\((R|TM)\)", "", cpu_name())  # Intel(R) Xeon(R) → Intel Xeon
    return f"{cores} cores of an {name}{extras}, torch {version('torch')}"


def rewrite(path: Path, header: list[str], rows: dict[str, list[str]]) -> None:
    """The table between the markers of `path`, its rows whose first cell is a key of
    `rows` replaced (new ones appended), the others kept."""
    text = path.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        sys.exit(f"{path} has no results table between {BEGIN} and {END}")
    before, rest = text.split(BEGIN, 1)
    table, after = rest.split(END, 1)
    kept = [line for line in table.strip().splitlines()[2:] if line.startswith("|")]
    lines, seen = [], set()
    for line in kept:
        label = line.split("|")[1].strip()
        seen.add(label)
        lines.append(cells(rows[label]) if label in rows else line)
    lines += [cells(row) for label, row in rows.items() if label not in seen]
    head = [cells(header), cells(["---"] * len(header))]
    body = "\n".join(head + lines)
    path.write_text(f"{before}{BEGIN}\n{body}\n{END}{after}", encoding="utf-8")


def cells(values: list[str]) -> str:
    return "| " + " | ".join(values) + " |"


QUALITY_HEADER = ["recipe", "commands", "test BLEU", "training", "model decoded; engine", "machine"]
README_HEADER = ["recipe", "command", "test BLEU", "machine"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=int, action="append", choices=[20, 60], default=[])
    parser.add_argument("--student", action="store_true", help="the hour's distilled student")
    parser.add_argument("--reuse", action="store_true", help="score runs already trained")
    parser.add_argument("--logs", type=Path, default=ROOT / "runs/results-logs")
    parser.add_argument("--quality", type=Path, default=ROOT / "docs/quality.md")
    parser.add_argument("--readme", type=Path, default=ROOT / "README.md")
    args = parser.parse_args()
    chosen = [RECIPES[str(m)] for m in args.minutes] + ([RECIPES["student"]] * args.student)
    if not chosen:
        parser.error("name a recipe: --minutes 20, --minutes 60, --student")
    args.logs.mkdir(parents=True, exist_ok=True)
    rows = []
    for recipe in chosen:
        print(f"{recipe.label} ({recipe.config})", flush=True)
        if not args.reuse:
            train(recipe, args.logs)
        rows.append(score(recipe, args.logs))
        print(f"  {cells(rows[-1].quality_cells())}", flush=True)
    rewrite(args.quality, QUALITY_HEADER, {r.recipe.label: r.quality_cells() for r in rows})
    rewrite(args.readme, README_HEADER, {r.recipe.label: r.readme_cells() for r in rows})
    print(f"machine: {rows[0].machine}\nwrote {args.quality} and {args.readme}")


if __name__ == "__main__":
    main()
