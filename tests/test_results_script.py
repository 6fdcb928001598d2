"""scripts/results.py: a run scored as the tour scores it, read into a row, and the results
tables rewritten row by row (the recipes' own training is the script's to run, not a test's)."""

import pytest
import results
from conftest import run_cli
from test_cli import CONFIG

from translator.model.rundir import RunDir

TABLE = """# Page

<!-- results:begin -->
| recipe | command | test BLEU | machine |
| --- | --- | --- | --- |
| demo | `make demo` | 22.04 | a laptop |
| 20 minutes on a CPU | `old` | 1.00 | old machine |
<!-- results:end -->

After.
"""


def test_rows_are_replaced_by_recipe_and_the_rest_kept(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(TABLE)
    rows = {"20 minutes on a CPU": ["20 minutes on a CPU", "`new`", "35.00", "here"]}
    rows["60 minutes on a CPU"] = ["60 minutes on a CPU", "`hour`", "37.00", "here"]
    results.rewrite(page, results.README_HEADER, rows)
    text = page.read_text()
    assert "| demo | `make demo` | 22.04 | a laptop |" in text  # not asked for: kept
    assert "| 20 minutes on a CPU | `new` | 35.00 | here |" in text and "old" not in text
    assert text.index("20 minutes") < text.index("60 minutes") < text.index("After.")
    assert text.startswith("# Page\n\n<!-- results:begin -->\n| recipe |")


def test_a_trained_run_is_scored_as_the_tour_scores_it(tmp_path, corpus, monkeypatch):
    """The row reads what `translator eval -c CONFIG` printed: the run's model, the scores
    it wrote, and the run's updates."""
    (tmp_path / "configs").mkdir()
    final = 'max_epochs = 2\nkeep_last = 2\nfinal = "average2"'
    (tmp_path / "configs/tiny.toml").write_text(CONFIG.replace("max_epochs = 2", final))
    for step in ("prepare", "train"):
        assert run_cli(step, cwd=tmp_path).returncode == 0
    scored = run_cli("eval", cwd=tmp_path)
    recipe = results.Recipe("tiny", "configs/tiny.toml")
    run = RunDir(tmp_path / "run")
    monkeypatch.setattr(results, "ROOT", tmp_path)  # where eval's relative paths point
    row = results.read_row(recipe, scored.stdout, scored.stderr, run, beam=1)
    bleu = float(scored.stdout.split("BLEU = ")[1].split()[0])
    assert row.bleu == pytest.approx(bleu, abs=0.005) and row.decode == "greedy"
    assert row.model == "`checkpoints/average2.pt` (train.final = average2)"
    assert row.engine == "torch, fp32" and row.epochs == 2
    assert row.updates == int(run.metric_rows()[-1]["step"]) > 0
    cells = row.quality_cells()
    assert cells[0] == "tiny" and f"**{row.bleu:.2f}**" in cells[2]
    assert "`translator train -c configs/tiny.toml`" in cells[1]
    assert row.readme_cells()[2] == f"{row.bleu:.2f}"
    assert "cores of an" in row.machine and ", torch " in row.machine
