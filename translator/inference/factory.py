"""Opening an engine: the one `decode.engine` names (registry.py), or under `auto` the first
that takes the checkpoint, those with an `auto_rank` asked the highest first (CTranslate2:
an export of that very checkpoint beside it). text.py's `Translator.open` is the one caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from translator.config import Config
from translator.errors import UserError
from translator.inference.engine import Engine
from translator.inference.registry import ENGINES


@dataclass(frozen=True)
class Choice:
    engine: str  # its name in the registry
    model_dir: str  # the directory it reads, for an engine that reads one
    reason: str  # why, as the engine line reads it


def choose_engine(config: Config, checkpoint: Path) -> Choice:
    """The engine `decode.engine` means for `checkpoint`."""
    decode = config.decode
    if decode.engine != "auto":
        engine = ENGINES.get(decode.engine)
        if engine.reads_dir and not decode.model_dir:
            raise UserError(
                f"the {decode.engine} engine needs decode.model_dir (--model DIR), the "
                "directory it reads"
            )
        return Choice(decode.engine, decode.model_dir, f"decode.engine = {decode.engine}")
    taking = [(name, e) for name, e in ENGINES.loaded().items() if e.auto_rank is not None]
    refused = ""
    for name, engine in sorted(taking, key=lambda pair: -pair[1].auto_rank):
        model_dir, reason = engine.auto(checkpoint)
        if model_dir is not None:
            return Choice(name, model_dir, f"decode.engine auto: {refused or reason}")
        refused = refused or reason
    raise UserError(f"decode.engine auto: no engine takes {checkpoint} ({refused})")


def open_engine(config: Config, checkpoint: Path) -> Engine:
    """The engine `choose_engine` picks, opened for `checkpoint` as `[decode]` says."""
    choice = choose_engine(config, checkpoint)
    return ENGINES.get(choice.engine).open(config, checkpoint, choice.model_dir, choice.reason)
