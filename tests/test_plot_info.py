"""`translator plot` and `translator info`: what a run did, as a picture and as text."""

import builtins
import math

import pytest
from conftest import assert_one_line_error, run_cli

from translator.config import from_dict
from translator.errors import UserError
from translator.inspect.info import describe
from translator.inspect.plot import GRAD_NORMS, plot_run, read_history
from translator.model.checkpoint import load
from translator.model.flops import count_parameters
from translator.model.rundir import RunDir
from translator.model.transformer import Transformer


def fake_run(tmp_path, epochs: int = 6, grad_norms_from: int | None = None):
    """A run's metrics.tsv; with the gradient norm from epoch `grad_norms_from` on (the
    epochs before: trained by a version without it)."""
    rows = [
        {
            "epoch": e,
            "complete": int(e < epochs),  # the last row: a budget cut
            "step": 100 * e,
            "lr": 1e-3 / e,
            "train_loss": 6.0 / e,
            "valid_loss": 5.0 / e + 0.5,
            "valid_bleu": 3.0 * e,
            "train_tokens_per_s": 1000.0,
            "skipped_batches": 0,
            "minutes": 0.5 * e,
        }
        for e in range(1, epochs + 1)
    ]
    if grad_norms_from is not None:
        for row in rows[grad_norms_from - 1 :]:
            row |= {"grad_norm": 3.0 / row["epoch"], "grad_norm_max": 9.0 / row["epoch"]}
    RunDir(tmp_path / "run").write_metrics(rows)
    return tmp_path / "run"


def test_plot_writes_a_png_that_is_not_blank(tmp_path):
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread

    out = plot_run(fake_run(tmp_path), tmp_path / "pictures/curves.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = imread(out)[..., :3]
    assert pixels.shape[0] > 300 and pixels.shape[1] > 1000
    # lines and text: a good share of pixels is far from the white background
    assert (pixels.mean(axis=-1) < 0.8).mean() > 0.01


def test_plot_adds_the_gradient_norm_where_metrics_have_it(tmp_path):
    """A run resumed into this version has it from its resume on; one trained before, not."""
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread

    old, resumed = fake_run(tmp_path / "old"), fake_run(tmp_path / "resumed", grad_norms_from=3)
    assert "grad_norm" not in read_history(old)
    history = read_history(resumed)
    assert all(math.isnan(history[name][i]) for name in GRAD_NORMS for i in (0, 1))
    assert history["grad_norm"][2:] == [1.0, 0.75, 0.6, 0.5]
    assert history["grad_norm_max"][2:] == [3.0, 2.25, 1.8, 1.5]
    width = lambda png: imread(png).shape[1]  # noqa: E731
    three = width(plot_run(old, tmp_path / "old.png"))
    assert width(plot_run(resumed, tmp_path / "resumed.png")) > 1.25 * three  # a fourth panel


def test_plot_without_matplotlib_says_how_to_install(tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(UserError, match=r'pip install "translator\[plot\]"'):
        plot_run(fake_run(tmp_path), tmp_path / "curves.png")


def test_plot_cli_on_a_run_without_metrics_is_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    result = run_cli("plot", "empty", cwd=tmp_path)
    assert_one_line_error(result, "no metrics in empty", "train it first")


def test_plot_cli_writes_beside_the_run_by_default(tmp_path):
    pytest.importorskip("matplotlib")
    fake_run(tmp_path)
    result = run_cli("plot", "run", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "run/training.png").is_file()
    assert "run/training.png" in result.stdout


def test_info_describes_a_run_and_its_checkpoints(trained):
    run_dir = trained.parent.parent
    payload = load(trained)
    config = from_dict(payload["config"])
    state = payload["model"]
    vocab = [state[f"{side}_embed.tokens.weight"].shape[0] for side in ("src", "tgt")]
    model = Transformer(config.model, *vocab)
    for target in (run_dir, trained):
        text = "\n".join(describe(target))
        assert f"{count_parameters(model):,} parameters" in text
        assert "epochs complete" in text and "best: epoch" in text
        assert "pairs from" in text  # the prepared data's stats.json
    history = load(run_dir / "checkpoints/last.pt")["train_state"]["history"]
    best = max(history, key=lambda row: row["valid_bleu"])
    assert f"validation BLEU {best['valid_bleu']:.2f}" in "\n".join(describe(run_dir))


def test_info_cli_errors_are_one_line(tmp_path):
    (tmp_path / "run").mkdir()
    assert_one_line_error(run_cli("info", "run", cwd=tmp_path), "holds no checkpoint")
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    assert_one_line_error(run_cli("info", "bad.pt", cwd=tmp_path), "bad.pt")
