"""scripts/studies/decode_step.py: where the decoder step's time goes and each variant's speed,
in one table whose rows compare outputs with the eager decoder's."""

from conftest import run_script


def test_the_study_profiles_and_compares_each_variant_with_eager(trained):
    data = trained.parents[2] / "prepared"
    args = [str(trained), "--data", str(data), "--sentences", "12", "--no-compile", "--rounds", "1"]
    done = run_script("scripts/studies/decode_step.py", *args, cwd=trained.parent)
    assert done.returncode == 0, done.stderr
    profile = next(line for line in done.stdout.splitlines() if line.startswith("eager greedy"))
    parts = profile.split(": ", 1)[1].split(", ")
    shares = [int(part.rsplit(" ", 1)[1].rstrip("%")) for part in parts]
    assert len(shares) == 4 and 97 <= sum(shares) <= 103  # every op counted once (rounding)
    lines = done.stdout.splitlines()
    rows = [line.strip("|").split("|") for line in lines if line.startswith("| ")]
    cells = [[cell.strip() for cell in row] for row in rows[2:]]
    assert [(r[0], r[1]) for r in cells] == [
        ("eager", "greedy"), ("eager", "beam 5"), ("mkl", "greedy"), ("mkl", "beam 5"),
    ]  # fmt: skip
    assert all(r[4] == "1.00" and r[5] == "12/12" for r in cells[:2])
    assert done.stdout.rstrip().splitlines()[-1].startswith("ratios: mkl_greedy=")


def test_a_missing_checkpoint_is_one_line(tmp_path):
    done = run_script("scripts/studies/decode_step.py", str(tmp_path / "none.pt"), cwd=tmp_path)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert done.stderr.strip() == f"error: no checkpoint at {tmp_path / 'none.pt'}"
