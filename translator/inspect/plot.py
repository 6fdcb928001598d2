"""`translator plot RUN_DIR`: a PNG of what training did, read from the run's metrics.tsv:
loss, validation BLEU, the learning rate and, where recorded, the gradient norm, per epoch.
matplotlib is an optional extra (`pip install "translator[plot]"`), imported only here.
"""

from __future__ import annotations

from pathlib import Path

from translator.errors import UserError
from translator.model.rundir import RunDir


def require_matplotlib():
    """pyplot with a file-only backend, or one clear line saying how to install it."""
    try:
        import matplotlib
    except ImportError:
        raise UserError('plotting needs matplotlib: pip install "translator[plot]"') from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


GRAD_NORMS = ("grad_norm", "grad_norm_max")  # columns of runs trained since they were added


def read_history(run_dir: Path) -> dict[str, list[float]]:
    """metrics.tsv as columns of floats, GRAD_NORMS where written (NaN in older rows)."""
    rows = RunDir(run_dir).metric_rows()
    if not rows:
        raise UserError(f"no metrics in {run_dir}: train it first (looked for metrics.tsv)")
    names = ("epoch", "train_loss", "valid_loss", "valid_bleu", "lr", "complete")
    names += tuple(name for name in GRAD_NORMS if name in rows[0])
    try:
        return {name: [float(row[name] or "nan") for row in rows] for name in names}
    except (KeyError, ValueError) as exc:
        raise UserError(f"{run_dir}/metrics.tsv is not a metrics file we wrote ({exc})") from None


def plot_run(run_dir: str | Path, out: str | Path) -> Path:
    """Write the panels for `run_dir` to `out` (PNG) and return its path."""
    run_dir, out = Path(run_dir), Path(out)
    history = read_history(run_dir)
    plt = require_matplotlib()
    epochs = history["epoch"]
    panels = 4 if "grad_norm" in history else 3
    fig, axes = plt.subplots(1, panels, figsize=(13 * panels / 3, 3.8), constrained_layout=True)
    loss, bleu, lr = axes[:3]
    loss.plot(epochs, history["train_loss"], marker="o", ms=3, label="train")
    loss.plot(epochs, history["valid_loss"], marker="o", ms=3, label="validation")
    loss.set(title="loss (label-smoothed cross-entropy)", xlabel="epoch", ylabel="nats/token")
    bleu.plot(epochs, history["valid_bleu"], marker="o", ms=3, color="tab:green")
    best = max(range(len(epochs)), key=lambda i: history["valid_bleu"][i])
    bleu.plot(epochs[best], history["valid_bleu"][best], "*", ms=14, color="tab:red")
    best_line = f"best {history['valid_bleu'][best]:.2f} (epoch {epochs[best]:g})"
    bleu.text(0.97, 0.05, best_line, transform=bleu.transAxes, ha="right", color="tab:red")
    bleu.set(title="validation BLEU (greedy)", xlabel="epoch", ylabel="BLEU")
    lr.plot(epochs, history["lr"], marker="o", ms=3, color="tab:purple")
    lr.set(title="learning rate at the epoch's end", xlabel="epoch", yscale="log")
    if panels == 4:
        grad = axes[3]
        grad.plot(epochs, history["grad_norm"], marker="o", ms=3, label="mean")
        grad.plot(epochs, history["grad_norm_max"], marker="o", ms=3, label="largest")
        grad.set(title="gradient norm before clipping", xlabel="epoch", yscale="log")
        ticker = plt.matplotlib.ticker  # plain numbers (2, not 2×10⁰), as many as fit
        grad.yaxis.set_major_formatter(ticker.LogFormatter())
        grad.yaxis.set_minor_formatter(ticker.LogFormatter(labelOnlyBase=False))
        grad.legend()
    for panel in axes:
        panel.grid(alpha=0.3)
    cut = [i for i, done in enumerate(history["complete"]) if not done]
    if cut:
        x, y = [epochs[i] for i in cut], [history["valid_loss"][i] for i in cut]
        loss.plot(x, y, "kx", ms=8, label="cut short (time budget)")
    loss.legend()
    fig.suptitle(f"{run_dir.resolve().name}: {len(epochs)} validations")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
