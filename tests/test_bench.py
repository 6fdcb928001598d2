"""scripts/bench.py runs end to end (on a generated corpus, for seconds): it must not rot.
The config decodes with beam 5, as configs/tatoeba-cpu.toml does: the benchmark's greedy
must still be greedy (it is checked token for token against the reference's greedy)."""

from pathlib import Path

from conftest import run_script
from test_cli import CONFIG

BENCH = Path(__file__).resolve().parents[1] / "scripts" / "bench.py"


def test_bench_runs_and_ends_with_the_ratios_line(tmp_path, corpus):
    (tmp_path / "bench.toml").write_text(CONFIG.replace("[decode]", "[decode]\nbeam = 5"))
    args = ["-c", "bench.toml", "--train-seconds", "1", "--warmup-seconds", "0.5"]
    result = run_script("bench.py", *args, "--sentences", "30", "--repeats", "1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("ratios: train=") and " greedy=" in last and " mfu=" in last
    assert " train_bf16_vs_fp32=" in last and ", fp32 " in result.stdout
    assert "identical output" in result.stdout
