"""scripts/bench_data.py runs end to end on a small corpus: it prepares, then stops training
at the log line of the first update. It must not rot (it once waited for a line the trainer
no longer wrote, until training ended)."""

import subprocess
import sys
from pathlib import Path

from test_cli import CONFIG

BENCH_DATA = Path(__file__).resolve().parents[1] / "scripts" / "bench_data.py"


def test_bench_data_prepares_and_times_the_first_update(tmp_path, corpus):
    (tmp_path / "tiny.toml").write_text(CONFIG.replace("max_epochs = 2", "max_epochs = 50"))
    command = [sys.executable, str(BENCH_DATA), "--sizes", "400", "--repeats", "1"]
    command += ["-c", str(tmp_path / "tiny.toml"), "--source", str(corpus)]
    command += ["--work", str(tmp_path / "work")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    row = result.stdout.strip().splitlines()[-1]
    assert row.startswith("| 400 |") and row.count("|") == 8, row
    assert "epoch 1" not in (tmp_path / "work/train-400.log").read_text()  # stopped at once


def test_bench_data_compares_prepare_with_sampled_encodings(tmp_path, corpus):
    (tmp_path / "tiny.toml").write_text(CONFIG)
    command = [sys.executable, str(BENCH_DATA), "--sizes", "400", "--subword-sampling", "2"]
    command += ["--prepare-repeats", "1", "-c", str(tmp_path / "tiny.toml")]
    command += ["--source", str(corpus), "--work", str(tmp_path / "work")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    row = result.stdout.strip().splitlines()[-1].split("|")[1:-1]
    assert row[0].strip() == "400" and row[1].strip() == "2", row
    disk = float(row[9])
    assert disk > 1.0, row  # the sampled directory holds two more encodings of train
    assert list((tmp_path / "work/prepared-400-sampled").glob("train.zh.s2.ids.bin"))
