"""Teaching a small model with a big one: translator distill."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from translator import config as config_module
from translator.cli.common import (
    DEFAULT_CONFIG,
    ConfigOpt,
    DeviceOpt,
    PenaltyOpt,
    SetOpt,
    app,
    setup_process,
    user_errors,
)
from translator.errors import UserError

ENGINES = {"auto": "auto", "torch": "torch", "ct2": "ctranslate2", "ctranslate2": "ctranslate2"}


@app.command()
@user_errors
def distill(
    teacher: Annotated[
        Path | None,
        typer.Option(
            "--teacher",
            metavar="RUN_DIR|CHECKPOINT",
            help="The teacher (distill.teacher): a checkpoint or run directory (its model, "
            "train.final); with --engine ct2, a directory written by `translator export`.",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="The prepared directory to write (distill.out)."),
    ] = None,
    config_file: ConfigOpt = DEFAULT_CONFIG,
    data: Annotated[
        Path | None,
        typer.Option(
            "--data",
            help="Prepared directory whose train split is translated "
            "(default: the config's data.dir; its filters are the config's).",
        ),
    ] = None,
    beam: Annotated[
        int | None, typer.Option("--beam", help="The teacher's beam size (distill.beam: 5).")
    ] = None,
    nbest: Annotated[
        int | None,
        typer.Option(
            "--nbest",
            help="1: the teacher's best translation. N > 1: of its N best, the one --select "
            "picks by the human translation (N at most the beam; distill.nbest).",
        ),
    ] = None,
    select: Annotated[
        str | None,
        typer.Option(
            "--select",
            help="With --nbest N > 1: chrf, the closest to the human translation by chrF "
            "(sequence-level interpolation); length, the teacher's best at least as long "
            "as the human translation, else its longest (distill.select).",
        ),
    ] = None,
    length_penalty: PenaltyOpt = None,
    device: DeviceOpt = None,
    batch_size: Annotated[
        int | None,
        typer.Option("--batch-size", help="Sentences a decoding batch (decode.batch_size)."),
    ] = None,
    engine: Annotated[
        str,
        typer.Option(
            "--engine",
            help="auto: the teacher checkpoint's CTranslate2 export beside it if there is one, "
            "else the checkpoint; torch: the checkpoint; ct2: an exported model.",
        ),
    ] = "auto",
    shard_size: Annotated[
        int | None,
        typer.Option(
            "--shard-size", help="Train lines a shard, each written when done (distill.shard_size)."
        ),
    ] = None,
    keep_original: Annotated[
        float | None,
        typer.Option(
            "--keep-original",
            metavar="WEIGHT",
            help="Mix the human pairs back in, each seen WEIGHT times an epoch (0: not at "
            "all; distill.keep_original).",
        ),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue after the last whole shard in OUT.")
    ] = False,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Start again, replacing OUT.")
    ] = False,
    set_: SetOpt = None,
):
    """Translate the train split with a teacher and write a prepared directory whose train
    targets are its translations (sequence-level knowledge distillation); valid and test
    keep their human references. Train a student on it with data.dir = OUT. Every option
    is also a key of the config's distill section (distill.teacher, distill.nbest, …)."""
    if engine not in ENGINES:
        raise UserError(f"--engine must be auto, torch or ct2, got {engine!r}")
    from translator.distill.distiller import distill as run_distill

    values = {
        "data.dir": None if data is None else str(data),
        "train.device": device,
        "decode.length_penalty": length_penalty,
        "decode.batch_size": batch_size,
        "decode.engine": ENGINES[engine],
        # the exported teacher is the engine's model: the config's ctranslate2 rule wants it
        "decode.model_dir": str(teacher) if teacher and ENGINES[engine] == "ctranslate2" else None,
        "distill.teacher": None if teacher is None else str(teacher),
        "distill.out": None if out is None else str(out),
        "distill.beam": beam,
        "distill.nbest": nbest,
        "distill.select": select,
        "distill.shard_size": shard_size,
        "distill.keep_original": keep_original,
    }
    config = config_module.load(config_file, set_ or [], values)
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
