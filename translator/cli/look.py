"""Looking at a run: plot, info."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from translator.cli.common import app, user_errors


@app.command()
@user_errors
def plot(
    run_dir: Annotated[Path, typer.Argument(help="A run directory (it holds metrics.tsv).")],
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="PNG to write (default: RUN_DIR/training.png)."),
    ] = None,
):
    """Draw training and validation loss, validation BLEU and the learning rate per epoch
    (needs matplotlib: pip install "translator[plot]")."""
    from translator.plot import plot_run

    written = plot_run(run_dir, out or run_dir / "training.png")
    typer.echo(f"wrote {written}")


@app.command()
@user_errors
def info(
    source: Annotated[Path, typer.Argument(help="A run directory or a checkpoint.")],
):
    """Parameter count, config, data statistics, epochs and updates trained, best epoch."""
    from translator.info import describe

    for line in describe(source):
        typer.echo(line)
