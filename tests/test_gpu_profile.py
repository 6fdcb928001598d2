"""scripts/gpu_profile.py runs end to end on the CPU (--device cpu), so the GPU profiling
script cannot rot between the rare sessions that have a GPU: it prepares the data, times
the variants, profiles a window and compares autocast with fp32, and writes its table."""

from pathlib import Path

from conftest import run_script
from test_cli import CONFIG

from translator.runtime import BF16_OVERRIDE

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu_profile.py"


def test_gpu_profile_runs_on_the_cpu(tmp_path, corpus):
    (tmp_path / "small.toml").write_text(CONFIG.replace('"corpus.tsv"', f'"{corpus}"'))
    args = ["-c", "small.toml", "--device", "cpu"]
    args += ["--warmup", "1", "--steps", "2", "--profile-steps", "2", "--compare-steps", "2"]
    args += ["--variants", "max_tokens x4", "static shapes", "--out", "out"]
    bf16 = {BF16_OVERRIDE: "1"}  # the comparison runs, as on CUDA (tiny: cheap)
    result = run_script("gpu_profile.py", *args, cwd=tmp_path, env=bf16)
    assert result.returncode == 0, result.stdout + result.stderr
    table = (tmp_path / "out/gpu_profile.md").read_text()
    assert "| as configured |" in table and "| max_tokens x4 |" in table
    assert "bf16 vs fp32, 2 updates" in table
    assert "| static shapes |" in table
    assert (tmp_path / "out/profile-small-as_configured.txt").stat().st_size > 0
    best = (tmp_path / "out/best-small.txt").read_text().splitlines()
    assert best in (["train.max_tokens=2048"], ["train.pad_to_multiple=8"])
    profiled = "max_tokens_x4" if best[0].startswith("train.max_tokens") else "static_shapes"
    assert (tmp_path / f"out/profile-small-{profiled}.txt").stat().st_size > 0
    assert (tmp_path / "prepared").is_dir()  # prepared from the config's input first
