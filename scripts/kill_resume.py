"""Kill training at random moments, resume it each time, and check nothing was lost.

    python scripts/kill_resume.py              # 20 kills, configs/tiny.toml on the sample
    python scripts/kill_resume.py --kills 5    # quicker

Trains the bundled sample with configs/tiny.toml (dropout on) straight through once, as the
reference. Then trains it again, SIGKILLing the process at a random moment N times (a
checkpoint is written after every update, so some kills land while one is being written:
those leave a temporary file behind, and are counted) and resuming after each kill with
`--resume` (or afresh, if it died before its first checkpoint), then lets it finish.
Passes when the final weights equal the reference's and so does metrics.tsv (all but its
timing columns). Ends with one line: "N/N recovered, identical" or what went wrong.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch
from common import ROOT, end_on_sigterm, session, translator_command

from translator.model import checkpoint
from translator.model.rundir import RunDir

TIMING = ("train_tokens_per_s", "minutes")  # metrics.tsv columns that differ run to run


def run_differences(a: Path, b: Path) -> list[str]:
    """What differs between two finished runs' last.pt weights and metrics.tsv (but its
    timing columns); empty: nothing."""
    problems = []
    wa, wb = (checkpoint.load(RunDir(d).last)["model"] for d in (a, b))
    for name, tensor in wa.items():
        if not torch.equal(tensor, wb[name]):
            problems.append(f"weights {name} differ by {(tensor - wb[name]).abs().max():.3g}")
    rows = [
        [{k: v for k, v in r.items() if k not in TIMING} for r in RunDir(d).metric_rows()]
        for d in (a, b)
    ]
    if rows[0] != rows[1]:
        problems.append("metrics.tsv differs")
    return problems


def command(run_dir: Path, epochs: int, resume: bool) -> list[str]:
    options = ["--resume"] if resume else ["--overwrite"]
    sets = [f"train.run_dir={run_dir}", "train.save_every=1", f"train.max_epochs={epochs}"]
    return translator_command(
        "train", "-c", "configs/tiny.toml", *options, *(x for s in sets for x in ("--set", s))
    )


def launch(run_dir: Path, epochs: int):
    """The training, in a session of its own (common.py's): leaving it kills its group."""
    resume = RunDir(run_dir).last.is_file()
    return session(
        command(run_dir, epochs, resume),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def finish(run_dir: Path, epochs: int) -> None:
    with launch(run_dir, epochs) as proc:
        _, err = proc.communicate()
    if proc.returncode:
        sys.exit(f"error: training in {run_dir} failed: {err.decode()[-500:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument(
        "--epochs", type=int, default=120, help="long enough to outlive the kills (~3 s each)"
    )
    parser.add_argument("--most", type=float, default=5.0, help="longest life of a run, s")
    parser.add_argument("--seed", type=int, default=0, help="for the kill moments")
    parser.add_argument("--work", type=Path, default=Path("/tmp/translator-kill-resume"))
    args = parser.parse_args()
    end_on_sigterm()  # SIGTERM, as Ctrl-C, ends the processes started below
    rng = random.Random(args.seed)
    work = args.work.resolve()
    prepared = subprocess.run(
        translator_command("prepare", "-c", "configs/tiny.toml"),
        cwd=ROOT,
        capture_output=True,
    )
    if prepared.returncode:
        sys.exit(f"error: prepare failed: {prepared.stderr.decode()[-500:]}")

    straight, killed = work / "straight", work / "killed"
    for run in (straight, killed):  # a run left by an earlier invocation would be resumed
        shutil.rmtree(run, ignore_errors=True)
    started = time.perf_counter()
    finish(straight, args.epochs)
    seconds = time.perf_counter() - started
    print(f"reference: {args.epochs} epochs in {seconds:.1f} s", flush=True)

    during_write = recovered = 0
    for kill in range(1, args.kills + 1):
        with launch(killed, args.epochs) as proc:
            time.sleep(rng.uniform(1.0, args.most))  # start-up (importing torch) takes ~2 s
            if proc.poll() is not None:
                if proc.returncode:
                    err = proc.stderr.read().decode() if proc.stderr else ""
                    sys.exit(f"error: resuming after kill {kill - 1} failed: {err[-500:]}")
                print(f"kill {kill}: the run had already finished (more --epochs for more kills)")
                break
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        leftovers = list(RunDir(killed).checkpoints.glob(".*.tmp"))
        during_write += bool(leftovers)  # the next start clears them
        recovered += 1
        state = "no checkpoint yet"
        if RunDir(killed).last.is_file():
            s = checkpoint.load(RunDir(killed).last)["train_state"]
            state = f"checkpoint at epoch {s['epoch'] + 1}, update {s['step']}"
        writing = ", while writing a checkpoint" if leftovers else ""
        print(f"kill {kill}: {state}{writing}", flush=True)
    finish(killed, args.epochs)
    problems = run_differences(straight, killed)
    print(f"{during_write} of the kills landed while a checkpoint was being written")
    if problems:
        print(f"{recovered}/{recovered} recovered, NOT identical: " + "; ".join(problems[:5]))
        sys.exit(1)
    print(f"{recovered}/{recovered} kills recovered, identical")


if __name__ == "__main__":
    main()
