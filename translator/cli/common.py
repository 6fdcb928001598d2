"""What every subcommand shares: the Typer app, the common options, logging set-up and the
turning of user errors into one line and exit code 2."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
import sys
import typing
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


class _TqdmHandler(logging.Handler):
    """Log lines printed above any progress bar instead of through it."""

    def emit(self, record: logging.LogRecord) -> None:
        tqdm.write(self.format(record), file=sys.stderr)


def setup_process(keep_memory: bool = True) -> None:
    """Log lines on stderr; with `keep_memory`, glibc keeps freed memory (not for a server)."""
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


def command(name: str | None = None):
    """Register a subcommand, its user errors turned into one line (`user_errors`)."""
    return lambda function: app.command(name)(user_errors(function))


def default_checkpoint(config: config_module.Config, given: Path | None) -> Path:
    """--checkpoint (a checkpoint or a run directory), else the config's run's model."""
    from translator.model.rundir import RunDir, checkpoint_in

    return checkpoint_in(given) if given is not None else RunDir(config.train.run_dir).final.path


# ---- config keys as flags, read from their declarations (config.py's `option`) ----

SECTIONS = {
    "decode": {
        "engine": config_module.EngineOptions,
        "search": config_module.SearchOptions,
        "text": config_module.TextOptions,
    },
    "distill": {"distill": config_module.DistillConfig},
}


def config_options(
    section: str, *parts: str, exclude: tuple[str, ...] = (), include: tuple[str, ...] = ()
):
    """A command that takes the keys of `section`'s `parts` (less `exclude`, plus `include`)
    as flags, passed as one argument named for the section: {config key: value or None}."""
    declared = [
        (f, part, typing.get_type_hints(cls)[f.name])
        for part, cls in SECTIONS[section].items()
        for f in dataclasses.fields(cls)
        if (part in parts or f.name in include)
        and f.name not in exclude
        and f.metadata.get("flag") is not None
    ]

    def wrap(command):
        signature = inspect.signature(command, eval_str=True)
        kept = [p for p in signature.parameters.values() if p.name != section]
        added = [_parameter(section, *each) for each in declared]

        @functools.wraps(command)
        def wrapper(*args, **kwargs):
            given = {f"{section}.{f.name}": kwargs.pop(f.name) for f, _, _ in declared}
            return command(*args, **{section: given}, **kwargs)

        wrapper.__signature__ = signature.replace(parameters=kept + added)
        wrapper.__annotations__ = {p.name: p.annotation for p in kept + added}
        return wrapper

    return wrap


decode_options = functools.partial(config_options, "decode")


def _parameter(section: str, declared: dataclasses.Field, part: str, hint) -> inspect.Parameter:
    """The flag of a declared key (`hint`: its type), in its part's panel of the help; None
    when not given."""
    kind = {bool: bool, int: int, float: float}.get(hint, str)
    names = (declared.metadata["flag"] or f"--{declared.name.replace('_', '-')}").split()
    if kind is bool and "/" not in names[0]:
        names[0] = f"{names[0]}/--no-{names[0][2:]}"
    default = declared.default
    text = f"{declared.metadata['help']} ({section}.{declared.name}, default {default!r})"
    panel = None if part == section else f"Decoding: the {part} (a flag overrides its key)"
    option = typer.Option(*names, help=text, show_default=False, rich_help_panel=panel)
    annotation = Annotated[kind | None, option]  # type: ignore[valid-type]
    return inspect.Parameter(
        declared.name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation
    )
