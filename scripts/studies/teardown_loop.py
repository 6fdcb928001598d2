"""Launch two-process training (torchrun, gloo on the CPU) again and again, and count the
workers that die after their work is done: the distributed teardown abort ("terminate
called without an active exception", SIGABRT) that once failed one test run in six.

    python scripts/studies/teardown_loop.py                   # 100 loops, two busy processes beside
    python scripts/studies/teardown_loop.py --loops 20 --load 0

Each loop runs the launches of tests/test_distributed.py's resume test on a tiny model
(dropout on): a run straight through one epoch, the same cut by its time budget after the
first update, and that one resumed to the end. `--load` busy processes (default: one per
core) spin beside them the whole time, since the abort is a race that a loaded machine
makes likelier. A launch passes when torchrun exits 0; one whose output holds "terminate
called" or a SIGABRT is counted as an abort; anything else as another failure (its last
lines printed). Ends with one line: "loops N, launches N, aborts N, other failures N".
"""

from __future__ import annotations

import argparse
import importlib.util
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the project

# scripts/common.py, loaded by its path (a study's folder is first on the module path)
_spec = importlib.util.spec_from_file_location("common", Path(__file__).parents[1] / "common.py")
common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(common)

TORCHRUN = Path(sys.executable).with_name("torchrun")
ABORT_SIGNS = ("terminate called", "SIGABRT", "Signal 6")
SETTINGS = [  # configs/tiny.toml on the bundled sample, shrunk to seconds a launch
    "model.encoder_layers=1",
    "model.decoder_layers=1",
    "model.d_model=32",
    "model.heads=2",
    "model.ff_dim=64",
    "model.dropout=0.3",
    "train.max_epochs=1",
    "train.max_tokens=512",
    "train.bleu_samples=8",
    "train.device='cpu'",
]


def spin() -> None:
    """A busy process: one core's worth of load until it is terminated."""
    while True:
        pass


def launch(config: Path, work: Path, run: str, *options: str) -> subprocess.CompletedProcess:
    sets = [
        arg for value in [*SETTINGS, f"train.run_dir='{work / run}'"] for arg in ("--set", value)
    ]
    command = [str(TORCHRUN), "--standalone", "--nproc_per_node", "2", "-m", "translator"]
    command += ["train", "-c", str(config), *sets, *options]
    env = os.environ | {"OMP_NUM_THREADS": "1"}
    # in a session of its own: past the timeout, or on Ctrl-C, torchrun's workers are ended
    # with it (subprocess.run would kill torchrun alone and leave them running)
    return common.captured(command, timeout=600, cwd=ROOT, env=env)


def one_loop(config: Path, work: Path) -> list[subprocess.CompletedProcess]:
    """The resume test's three launches: straight, cut after the first update, resumed."""
    return [
        launch(config, work, "straight", "--overwrite"),
        launch(config, work, "cut", "--overwrite", "--max-minutes", "1e-6"),
        launch(config, work, "cut", "--resume", "--max-minutes", "0"),
    ]


def verdict(result: subprocess.CompletedProcess) -> str:
    if result.returncode == 0:
        return "ok"
    output = result.stdout + result.stderr
    return "abort" if any(sign in output for sign in ABORT_SIGNS) else "failure"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loops", type=int, default=100)
    parser.add_argument("--load", type=int, default=os.cpu_count() or 1, help="busy processes")
    parser.add_argument("-c", "--config", type=Path, default=ROOT / "configs/tiny.toml")
    args = parser.parse_args()
    common.end_on_sigterm()  # SIGTERM, as Ctrl-C, ends the launches and the spinners
    if not TORCHRUN.exists():
        sys.exit(f"error: torchrun is not installed beside {sys.executable}")

    subprocess.run(
        [sys.executable, "-m", "translator", "prepare", "-c", str(args.config)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    spinners = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.load)]
    for process in spinners:
        process.start()
    counts = {"ok": 0, "abort": 0, "failure": 0}
    started = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for loop in range(1, args.loops + 1):
                for result in one_loop(args.config, Path(tmp)):
                    kind = verdict(result)
                    counts[kind] += 1
                    if kind != "ok":
                        print(f"loop {loop}: {kind}, exit {result.returncode}:", flush=True)
                        print("\n".join(result.stderr.splitlines()[-12:]), flush=True)
                if loop % 10 == 0:
                    seconds = time.perf_counter() - started
                    print(f"{loop} loops in {seconds:.0f} s: {counts}", flush=True)
    finally:
        for process in spinners:
            process.terminate()
    launches = sum(counts.values())
    print(
        f"loops {args.loops}, launches {launches}, aborts {counts['abort']}, "
        f"other failures {counts['failure']}"
    )


if __name__ == "__main__":
    main()
