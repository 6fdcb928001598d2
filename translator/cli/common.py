"""What every subcommand shares: the Typer app, the common options, logging set-up and the
turning of user errors into one line and exit code 2."""

from __future__ import annotations

import functools
import logging
import sys
from pathlib import Path
from typing import Annotated

import typer
from tqdm import tqdm

from translator import config as config_module
from translator.errors import UserError
from translator.runtime import keep_freed_memory

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="English→Chinese neural machine translation: prepare → train → translate → eval.",
)

ConfigOpt = Annotated[
    Path,
    typer.Option(
        "--config", "-c", help="TOML config; paths in it are relative to the current directory."
    ),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override a config value, e.g. --set train.lr=5e-4 (repeatable)."),
]
DeviceOpt = Annotated[
    str | None, typer.Option("--device", help="auto, cpu, cuda or cuda:N (default: the config's).")
]
SourceArg = Annotated[
    Path, typer.Argument(help="A checkpoint, or a run directory (its model: train.final).")
]
CheckpointOpt = Annotated[
    Path | None,
    typer.Option(
        "--checkpoint",
        help="A checkpoint or run directory (default: the config's run's model, train.final).",
    ),
]
BeamOpt = Annotated[
    int | None, typer.Option("--beam", help="Beam size; 1 is greedy (default: decode.beam).")
]
PenaltyOpt = Annotated[
    float | None,
    typer.Option("--length-penalty", help="GNMT length penalty alpha for beam search."),
]
EngineOpt = Annotated[
    str | None,
    typer.Option(
        "--engine",
        help="auto: the CTranslate2 export beside the checkpoint if there is one (translator "
        "export), else ours; torch: ours; ctranslate2: the export --model names.",
    ),
]
PrecisionOpt = Annotated[
    str | None,
    typer.Option(
        "--precision",
        help="Weights in auto (ours: bf16 on CPUs with bf16 instructions, else fp32; "
        "CTranslate2: int8 on a CPU), fp32, bf16 or int8 (decode.precision).",
    ),
]
ModelDirOpt = Annotated[
    Path | None,
    typer.Option("--model", help="A directory written by `translator export` (ctranslate2)."),
]
GlossaryOpt = Annotated[
    Path | None,
    typer.Option(
        "--glossary",
        help="TSV or CSV of English terms and the Chinese each must be translated as "
        "(decode.glossary).",
    ),
]
DEFAULT_CONFIG = config_module.DEFAULT_CONFIG


class _TqdmHandler(logging.Handler):
    """Log lines printed above any progress bar instead of through it."""

    def emit(self, record: logging.LogRecord) -> None:
        tqdm.write(self.format(record), file=sys.stderr)


def setup_process(keep_memory: bool = True) -> None:
    """Log lines on stderr; also, `keep_memory`, glibc's malloc keeps what is freed (faster
    training steps; a server wants its memory back after a peak instead)."""
    if keep_memory:
        keep_freed_memory()
    handler = _TqdmHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger("translator")
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    root.propagate = False


def user_errors(command):
    """Turn UserError (and Ctrl-C) into one line on stderr and a non-zero exit."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except UserError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            typer.echo("interrupted", err=True)
            raise typer.Exit(130) from None

    return wrapper


def default_checkpoint(config: config_module.Config, given: Path | None) -> Path:
    """--checkpoint (a checkpoint or a run directory), else the model of the config's run
    (train.final, final.json). The commands name it beside the engine line, once their
    checks have passed (`Translator.model_line`)."""
    from translator.model.rundir import RunDir, checkpoint_in

    return checkpoint_in(given) if given is not None else RunDir(config.train.run_dir).final.path


def run_options(
    device: str | None,
    beam: int | None,
    length_penalty: float | None,
    engine: str | None = None,
    model_dir: Path | None = None,
    glossary: Path | None = None,
    precision: str | None = None,
) -> dict[str, object]:
    """The flags of translate, eval and serve, as the config keys they set."""
    return {
        "train.device": device,
        "decode.beam": beam,
        "decode.length_penalty": length_penalty,
        "decode.engine": engine,
        "decode.model_dir": None if model_dir is None else str(model_dir),
        "decode.glossary": None if glossary is None else str(glossary),
        "decode.precision": precision,
    }
