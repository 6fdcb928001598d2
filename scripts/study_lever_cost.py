r"""What each quality lever costs in time and memory: short training runs of one config side
by side in one command, each lever alone added to the config with every lever off; a table
of training tokens/s and peak resident memory, each as a ratio to that plain run, last.

    python scripts/study_lever_cost.py -c configs/tatoeba-cpu-60.toml --updates 150 \
        --out runs/lever-cost

Each run is its own `translator train --max-updates N` process (so its peak memory is its
own: the `wait4` rusage of that child), one after another; tokens/s is the run's
`train_tokens_per_s` in metrics.tsv (training only, not the validation at the cut). The
plain run has `train.ema=0`, `train.rdrop=0` and `data.subword_sampling=0`; where the
config samples, the plain run reads a prepared directory of its own (`<data.dir>-plain`),
and sampling K where the config does not reads `<data.dir>-sw<K>`, so the config's own
prepared data are never re-encoded. `train.plateau_metric` costs nothing an
update (BLEU is computed each epoch anyway) and is not run. Data are prepared before any
timing. Each run's tokens/s includes its first updates (graph warm-up, page cache), so give
it a hundred updates or more. Quote the ratios, not the absolute figures, and keep the
machine otherwise idle.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
from pathlib import Path

from common import ROOT, config_home, load_config, translator_command

OFF = ["train.ema=0", "train.rdrop=0", "data.subword_sampling=0"]

MAX_MINUTES = 15.0  # each variant's training stops here if its updates take longer


def variants(data, sampling: int, ema: float, rdrop: float) -> dict[str, list[str]]:
    """The plain run and each lever alone, as --set overrides (`data`: the config's [data])."""
    plain_dir = data.dir if data.subword_sampling == 0 else f"{data.dir}-plain"
    sampled_dir = data.dir if data.subword_sampling == sampling else f"{data.dir}-sw{sampling}"
    plain = [*OFF, f"data.dir={plain_dir}"]
    sampled = [f"data.dir={sampled_dir}", f"data.subword_sampling={sampling}"]
    return {
        "plain": plain,
        f"ema {ema:g}": [*plain, f"train.ema={ema}"],
        f"subword sampling {sampling}": [*OFF, *sampled],
        f"rdrop {rdrop:g}": [*plain, f"train.rdrop={rdrop}"],
    }


def sets(overrides: list[str]) -> list[str]:
    return [word for value in overrides for word in ("--set", value)]


def timed_train(
    config: str, overrides: list[str], updates: int, run_dir: Path
) -> tuple[float, float]:
    """Train in a child process; (its training tokens/s, its peak resident memory in MiB)."""
    command = translator_command(
        "train", "-c", config, "--max-updates", str(updates), "--overwrite"
    )
    command += ["--max-minutes", str(MAX_MINUTES)]  # a slow CPU stops at the clock instead
    overrides = [*overrides, f"train.run_dir={run_dir}"]
    child = subprocess.Popen(
        command + sets(overrides), stdout=subprocess.DEVNULL, cwd=config_home(config)
    )
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        sys.exit(f"training with {' '.join(overrides)} failed ({child.returncode})")
    with open(run_dir / "metrics.tsv", newline="") as f:
        last = list(csv.DictReader(f, delimiter="\t"))[-1]
    return float(last["train_tokens_per_s"]), usage.ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-c", "--config", default=str(ROOT / "configs/tatoeba-cpu-60.toml"))
    parser.add_argument("--updates", type=int, default=150)
    parser.add_argument("--out", type=Path, default=Path("runs/lever-cost"))
    parser.add_argument("--subword-sampling", type=int, default=4)
    parser.add_argument("--ema", type=float, default=0.999)
    parser.add_argument("--rdrop", type=float, default=5.0)
    args = parser.parse_args()
    args.config, args.out = str(Path(args.config).resolve()), args.out.resolve()
    data = load_config(args.config).data  # its paths from the project root, as the runs read them
    runs = variants(data, args.subword_sampling, args.ema, args.rdrop)
    for overrides in runs.values():  # untimed: tokenizers and encodings first
        prepare = translator_command("prepare", "-c", args.config) + sets(overrides)
        if (
            subprocess.run(
                prepare, stdout=subprocess.DEVNULL, cwd=config_home(args.config)
            ).returncode
            != 0
        ):
            sys.exit(f"prepare with {' '.join(overrides)} failed")
    rows = []
    for i, (name, overrides) in enumerate(runs.items()):
        run_dir = args.out / f"run{i}"
        tokens_per_s, peak_mib = timed_train(args.config, overrides, args.updates, run_dir)
        rows.append((name, tokens_per_s, peak_mib))
        print(f"{name}: {tokens_per_s:,.0f} tokens/s, peak {peak_mib:,.0f} MiB", flush=True)
    _, base_speed, base_memory = rows[0]
    print(f"\n{args.updates} updates of {args.config} each, one after another")
    print("| run | training tokens/s | × plain | peak memory (MiB) | × plain |")
    print("| --- | --- | --- | --- | --- |")
    for name, speed, memory in rows:
        print(
            f"| {name} | {speed:,.0f} | {speed / base_speed:.2f} | {memory:,.0f} "
            f"| {memory / base_memory:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
