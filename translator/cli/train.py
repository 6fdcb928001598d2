"""Training a model: translator train and translator average."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from translator import config as config_module
from translator.cli.common import ConfigOpt, DeviceOpt, SetOpt, command, setup_process
from translator.errors import UserError


@command()
def train(
    config_file: ConfigOpt = config_module.DEFAULT_CONFIG,
    resume: Annotated[bool, typer.Option("--resume", help="Continue from last.pt.")] = False,
    init_from: Annotated[
        Path | None,
        typer.Option(
            "--init-from",
            metavar="RUN_DIR|CHECKPOINT",
            help="Start a new run from this model's weights (fine-tuning; train.init_from); "
            "the data must be prepared with its tokenizers (prepare --tokenizers-from).",
        ),
    ] = None,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Start again, replacing an existing run.")
    ] = False,
    max_minutes: Annotated[
        float | None, typer.Option("--max-minutes", help="Time budget (default: the config's).")
    ] = None,
    max_updates: Annotated[
        int | None,
        typer.Option("--max-updates", help="Stop after this many updates (train.max_updates)."),
    ] = None,
    device: DeviceOpt = None,
    tensorboard: Annotated[
        bool | None,
        typer.Option("--tensorboard", help="Log to RUN_DIR/tensorboard (train.tensorboard)."),
    ] = None,
    set_: SetOpt = None,
):
    """Train the Transformer on the prepared data; checkpoints go to train.run_dir."""
    from translator.training.trainer import Interrupted
    from translator.training.trainer import train as run_train

    if resume and overwrite:
        raise UserError("--resume and --overwrite contradict each other")
    if resume and init_from:
        raise UserError(
            "--resume and --init-from contradict each other: --resume continues this run "
            "from its last.pt, --init-from starts a new one from another model's weights"
        )
    values = {
        "train.init_from": None if init_from is None else str(init_from),
        "train.device": device,
        "train.max_minutes": max_minutes,
        "train.max_updates": max_updates,
        "train.tensorboard": tensorboard,
    }
    config = config_module.load(config_file, set_ or [], values)
    setup_process()
    try:
        result = run_train(config, resume=resume, overwrite=overwrite)
    except Interrupted as stop:
        typer.echo(str(stop), err=True)
        raise typer.Exit(128 + stop.signum) from None
    state = result.state
    where = f"after epoch {state.epoch}"
    if state.position:
        where = f"in epoch {state.epoch + 1} ({state.position}/{result.batches_per_epoch} batches)"
    typer.echo(f"stopped {where}, {state.step:,} updates: {result.message}")
    typer.echo(
        f"best valid BLEU {result.best_bleu:.2f}; checkpoints and metrics.tsv in {result.run_dir}"
    )
    if result.final is not None:
        typer.echo(f"the run's model: {result.final.path} ({result.final.why})")


@command()
def average(
    run_dir: Annotated[Path, typer.Argument(help="A run directory (train.run_dir).")],
    last: Annotated[int, typer.Option("--last", help="How many newest epochs to average.")] = 5,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help="Default: checkpoints/average<N>.pt (ema-average<N>.pt)."
        ),
    ] = None,
    ema: Annotated[
        bool, typer.Option("--ema", help="Average the epochs' moving averages (train.ema) instead.")
    ] = False,
):
    """Average the weights of a run's last N epochs into one checkpoint."""
    from translator.model.checkpoint import average_last

    path = average_last(run_dir, last, output, "ema" if ema else "model")
    what = "moving averages of the weights" if ema else "weights"
    typer.echo(f"wrote {path}: the mean of the last {last} epochs' {what}")
