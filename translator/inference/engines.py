"""Choosing the engine: the one place that knows both. `decode.engine` names it — our model
from a checkpoint (torch_engine.py) or a directory written by `translator export`
(ct2_engine.py) — and both answer through the same text path (text.py)."""

from __future__ import annotations

from pathlib import Path

from translator.config import Config
from translator.inference.text import TextTranslator
from translator.inference.torch_engine import Translator
from translator.runtime import pick_device


def open_translator(config: Config, checkpoint: Path) -> TextTranslator:
    """The engine `decode.engine` names: our model from `checkpoint` (on `train.device`),
    or the CTranslate2 directory `decode.model_dir`; decoding settings from `[decode]`."""
    device = pick_device(config.train.device)
    if config.decode.engine == "ctranslate2":
        from translator.inference.ct2_engine import CTranslate2Translator

        return CTranslate2Translator.from_dir(
            config.decode.model_dir,
            config.decode,
            device=device.type,
            threads=config.decode.threads,
            workers=config.decode.workers,
        )
    return Translator.from_checkpoint(checkpoint, device, config.decode)


def output_origin(config: Config, checkpoint: Path) -> Path:
    """What the engine decodes from: eval writes its hypotheses beside it, serve names it."""
    return Path(config.decode.model_dir) if config.decode.engine == "ctranslate2" else checkpoint
