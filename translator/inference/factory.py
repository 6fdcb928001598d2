"""Opening an engine: the one place that knows both. `decode.engine` names it — our model
from a checkpoint (torch_engine.py), a directory written by `translator export`
(ct2_engine.py), or `auto`: the export beside the checkpoint (`beside`) where there is one
of that very checkpoint and `ctranslate2` is installed, else ours; in the precision
`decode.precision` chooses (precision.py). The text path (text.py's `Translator.open`) is
the one caller: the Python API and every command open a model through it.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

from translator.config import Config
from translator.inference.ct2_engine import METADATA, CTranslate2Engine
from translator.inference.engine import Engine
from translator.inference.torch_engine import TorchEngine
from translator.model.checkpoint import digest
from translator.runtime import pick_device


@dataclass(frozen=True)
class Choice:
    engine: str  # "torch" or "ctranslate2"
    model_dir: str  # the exported directory, for ctranslate2
    reason: str  # why, as the engine line reads it


def beside(checkpoint: Path) -> Path:
    """Where `translator export` writes by default, and where `auto` looks: the checkpoint's
    name with `.ct2` (runs/x/checkpoints/average5.pt → runs/x/checkpoints/average5.ct2)."""
    return checkpoint.with_suffix(".ct2")


def export_of(directory: Path, checkpoint: Path) -> bool:
    """`directory` holds an export of exactly this checkpoint (the SHA-256 it recorded):
    a checkpoint trained further or replaced since is not decoded by its old export."""
    meta_file = directory / METADATA
    if not (meta_file.is_file() and checkpoint.is_file()):
        return False
    meta = json.loads(meta_file.read_text(encoding="utf-8"))
    recorded = meta.get("checkpoint_sha256")
    return bool(recorded) and recorded == digest(checkpoint)


def choose_engine(config: Config, checkpoint: Path) -> Choice:
    """The engine `decode.engine` means for `checkpoint`."""
    decode = config.decode
    if decode.engine == "ctranslate2":
        return Choice("ctranslate2", decode.model_dir, "decode.engine = ctranslate2")
    if decode.engine == "torch":
        return Choice("torch", "", "decode.engine = torch")
    exported = beside(checkpoint)
    if not exported.is_dir():
        return Choice("torch", "", "decode.engine auto: no export beside the checkpoint")
    if importlib.util.find_spec("ctranslate2") is None:
        return Choice("torch", "", f"decode.engine auto: {exported} needs ctranslate2")
    if not export_of(exported, checkpoint):
        return Choice("torch", "", f"decode.engine auto: {exported} is of another checkpoint")
    return Choice("ctranslate2", str(exported), f"decode.engine auto: {exported}")


def open_engine(config: Config, checkpoint: Path) -> Engine:
    """The engine `choose_engine` picks: our model from `checkpoint` (on `train.device`),
    or a CTranslate2 directory; `[decode]` says in which precision. Its `about` says which
    engine and precision decode, and why."""
    choice = choose_engine(config, checkpoint)
    device = pick_device(config.train.device)
    if choice.engine == "ctranslate2":
        return CTranslate2Engine.from_dir(
            choice.model_dir,
            config.decode,
            device=device.type,
            threads=config.decode.threads,
            workers=config.decode.workers,
            reason=choice.reason,
        )
    return TorchEngine.from_checkpoint(checkpoint, device, config.decode, choice.reason)
