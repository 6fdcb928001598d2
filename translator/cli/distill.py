"""Teaching a small model with a big one: translator distill."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from translator import config as config_module
from translator.cli.common import (
    ConfigOpt,
    DeviceOpt,
    SetOpt,
    command,
    config_options,
    decode_options,
    setup_process,
)


@command()
@config_options("distill", "distill")
@decode_options("engine", exclude=("model_dir",), include=("batch_size", "length_penalty"))
def distill(
    config_file: ConfigOpt = config_module.DEFAULT_CONFIG,
    data: Annotated[
        Path | None,
        typer.Option(
            "--data",
            help="Prepared directory whose train split is translated "
            "(default: the config's data.dir; its filters are the config's).",
        ),
    ] = None,
    device: DeviceOpt = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue after the last whole shard in OUT.")
    ] = False,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Start again, replacing OUT.")
    ] = False,
    set_: SetOpt = None,
    select: Annotated[str | None, typer.Option("--select", hidden=True)] = None,  # removed
    decode: dict | None = None,
    distill: dict | None = None,
):
    """Translate the train split with a teacher and write a prepared directory whose train
    targets are its translations (sequence-level knowledge distillation); valid and test
    keep their human references. Train a student on it with data.dir = OUT. Every option
    is also a key of the config's distill section (distill.teacher, distill.nbest, …)."""
    from translator.distill.distiller import distill as run_distill

    values = {"data.dir": data and str(data), "train.device": device, "distill.select": select}
    config = config_module.load(config_file, set_ or [], values | decode | distill)
    setup_process()
    result = run_distill(config, resume, overwrite)
    made = result.stats["distilled"]
    dropped = ", ".join(f"{count:,} {reason}" for reason, count in made["dropped"].items())
    typer.echo(
        f"translated {made['translated']:,} train sentences ({result.shards_translated} shards "
        f"this run, {result.seconds:.0f} s); kept {made['kept']:,}, dropped {dropped}"
    )
    if made["original_pairs"]:
        typer.echo(
            f"and {made['original_pairs']:,} human pairs at weight {made['keep_original']:g}"
        )
    typer.echo(
        f"wrote a prepared directory to {result.dir}: train with --set data.dir={result.dir}"
    )
