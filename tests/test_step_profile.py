"""scripts/step_profile.py --variants runs end to end on the CPU (--device cpu), so the GPU
profiling cannot rot between the rare sessions that have a GPU: it prepares the data, times
the variants, profiles a window and compares autocast with fp32, and writes its table. Its
--lever-cost runs are each lever alone on a plain config, reading data of their own."""

from types import SimpleNamespace

from conftest import run_script
from step_profile import lever_variants
from test_cli import CONFIG

from translator.runtime import BF16_OVERRIDE


def test_the_variants_run_on_the_cpu(tmp_path, corpus):
    (tmp_path / "small.toml").write_text(CONFIG.replace('"corpus.tsv"', f'"{corpus}"'))
    args = ["-c", "small.toml", "--device", "cpu", "--warmup-steps", "1", "--steps", "2"]
    args += ["--profile-steps", "2", "--compare-steps", "2"]
    args += ["--variants", "max_tokens x4", "static shapes", "--out", "out"]
    bf16 = {BF16_OVERRIDE: "1"}  # the comparison runs, as on CUDA (tiny: cheap)
    result = run_script("step_profile.py", *args, cwd=tmp_path, env=bf16)
    assert result.returncode == 0, result.stdout + result.stderr
    table = (tmp_path / "out/step_profile.md").read_text()
    assert "| as configured |" in table and "| max_tokens x4 |" in table
    assert "bf16 vs fp32, 2 updates" in table
    assert "| static shapes |" in table
    assert (tmp_path / "out/profile-small-as_configured.txt").stat().st_size > 0
    best = (tmp_path / "out/best-small.txt").read_text().splitlines()
    assert best in (["train.max_tokens=2048"], ["train.pad_to_multiple=8"])
    profiled = "max_tokens_x4" if best[0].startswith("train.max_tokens") else "static_shapes"
    assert (tmp_path / f"out/profile-small-{profiled}.txt").stat().st_size > 0
    assert (tmp_path / "prepared").is_dir()  # prepared from the config's input first


def test_each_quality_lever_is_measured_alone_on_the_plain_config():
    off = ["train.ema=0", "train.final='best'", "data.subword_sampling=0"]
    sampled = SimpleNamespace(dir="d", subword_sampling=4)  # the config samples: plain apart
    runs = lever_variants(sampled, 4, 0.999)
    assert runs == {
        "plain": [*off, "data.dir=d-plain"],
        "ema 0.999": [*off, "data.dir=d-plain", "train.ema=0.999"],
        "subword sampling 4": [*off, "data.dir=d", "data.subword_sampling=4"],
    }
    plain = SimpleNamespace(dir="d", subword_sampling=0)  # sampling reads data of its own
    runs = lever_variants(plain, 4, 0.999)
    assert runs["plain"] == [*off, "data.dir=d"]
    assert runs["subword sampling 4"] == [*off, "data.dir=d-sw4", "data.subword_sampling=4"]
