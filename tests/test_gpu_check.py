"""scripts/gpu_check.py runs end to end on the CPU (--device cpu), so the GPU correctness
checks cannot rot between the sessions that have a GPU. On the CPU every check must come
out exact (but bf16 against fp32, a real comparison on a CPU too): a resumed run repeats a
straight one bit for bit."""

from pathlib import Path

from conftest import run_script
from test_cli import CONFIG

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu_check.py"


def test_gpu_check_runs_on_the_cpu(tmp_path, corpus):
    (tmp_path / "small.toml").write_text(CONFIG.replace('"corpus.tsv"', f'"{corpus}"'))
    args = ["-c", "small.toml", "--device", "cpu", "--out", "out"]
    args += ["--steps", "4", "--compile-steps", "0", "--epochs", "2", "--sentences", "20"]
    args += ["--graph-steps", "4"]
    result = run_script("gpu_check.py", *args, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = (tmp_path / "out/gpu_check.md").read_text().splitlines()
    assert lines[0].startswith("- CPU, torch ")
    exact = "train loss gap 0.00000, valid loss gap 0.00000, weights 0.00e+00"
    same = "largest per-update gap 0.0000, last 20 updates' mean 0.0000"
    assert lines[1] == f"- CUDA graphs vs eager, 4 updates: {same}"  # off on a CPU: eager twice
    assert lines[3] == f"- resume, 2 epochs, straight vs straight: {exact}"
    assert lines[4] == f"- resume, resumed vs straight: {exact}"
    assert lines[5] == "- cached vs uncached greedy, fp32: 20 of 20 sentences identical (100.0%)"
    assert (tmp_path / "out/resume-resumed/checkpoints/last.pt").is_file()
