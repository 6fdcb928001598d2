"""Looking at a run and a model: plot, info, attention."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from translator import config as config_module
from translator.cli.common import (
    CheckpointOpt,
    ConfigOpt,
    DeviceOpt,
    SetOpt,
    command,
    decode_options,
    default_checkpoint,
    setup_process,
)


@command()
def plot(
    run_dir: Annotated[Path, typer.Argument(help="A run directory (it holds metrics.tsv).")],
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="PNG to write (default: RUN_DIR/training.png)."),
    ] = None,
):
    """Draw training and validation loss, validation BLEU and the learning rate per epoch
    (needs matplotlib: pip install "translator\\[plot]")."""
    from translator.inspect.plot import plot_run

    typer.echo(f"wrote {plot_run(run_dir, out or run_dir / 'training.png')}")


@command()
def info(source: Annotated[Path, typer.Argument(help="A run directory or a checkpoint.")]):
    """Parameter count, config, data statistics, epochs and updates trained, best epoch."""
    from translator.inspect.info import describe

    for line in describe(source):
        typer.echo(line)


@command()
@decode_options(include=("beam",))
def attention(
    text: Annotated[str, typer.Argument(help="One English sentence.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="PNG to write.")] = Path("attn.png"),
    layer: Annotated[
        int | None,
        typer.Option("--layer", help="Decoder layer, 1-based (default: mean over layers)."),
    ] = None,
    config_file: ConfigOpt = config_module.DEFAULT_CONFIG,
    checkpoint: CheckpointOpt = None,
    device: DeviceOpt = None,
    set_: SetOpt = None,
    decode: dict | None = None,
):
    """Translate one sentence and draw the decoder's cross-attention as a heatmap: the
    pieces it wrote against the source pieces (needs matplotlib)."""
    from translator.inference.text import Translator
    from translator.inference.torch_engine import NAME as OURS
    from translator.inspect.attention import cross_attention, plot_attention
    from translator.inspect.plot import require_matplotlib

    require_matplotlib()
    config = config_module.load(config_file, set_ or [], {"train.device": device} | decode)
    setup_process()
    config.decode.engine = OURS  # the weights are what it reads
    translator = Translator.open(config, default_checkpoint(config, checkpoint))
    found = cross_attention(translator, text)
    written = plot_attention(found, out, layer)
    typer.echo(f"{found.translation}\nwrote {written}")
    typer.echo(translator.model_line, err=True)
