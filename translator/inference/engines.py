"""Choosing the engine: the one place that knows both. `decode.engine` names it — our model
from a checkpoint (torch_engine.py), a directory written by `translator export`
(ct2_engine.py), or `auto`: the export beside the checkpoint (`beside`) where there is one
of that very checkpoint and `ctranslate2` is installed, else ours. Both answer through the
same text path (text.py), in the precision `decode.precision` chooses (precision.py).
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass, replace
from pathlib import Path

from translator.config import Config
from translator.inference.ct2_engine import METADATA, CTranslate2Translator
from translator.inference.text import TextTranslator
from translator.inference.torch_engine import Translator
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


def choose(config: Config, checkpoint: Path) -> Choice:
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


def open_translator(config: Config, checkpoint: Path) -> TextTranslator:
    """The engine `choose` picks: our model from `checkpoint` (on `train.device`), or a
    CTranslate2 directory; decoding settings from `[decode]`. Its `.engine_line` says
    which engine and precision decode, and why: each command logs it once its own checks
    have passed (so that a bad input stays the one line it prints)."""
    choice = choose(config, checkpoint)
    device = pick_device(config.train.device)
    decode_cfg = replace(config.decode, engine=choice.engine, model_dir=choice.model_dir)
    if choice.engine == "ctranslate2":
        translator = CTranslate2Translator.from_dir(
            choice.model_dir,
            decode_cfg,
            device=device.type,
            threads=config.decode.threads,
            workers=config.decode.workers,
        )
    else:
        translator = Translator.from_checkpoint(checkpoint, device, decode_cfg)
    translator.engine_name = choice.engine
    translator.origin = Path(choice.model_dir) if choice.engine == "ctranslate2" else checkpoint
    translator.engine_line = (
        f"engine: {choice.engine}, {translator.precision} ({choice.reason}; "
        f"{translator.precision_reason})"
    )
    return translator
