"""Deprecated address of the training API. The run now lives whole in trainer.py (the
Trainer and `train`); this alias keeps code written against the old address working, such
as tests/test_compat.py. Import from translator.training.trainer instead."""

import warnings

from translator.training.trainer import Interrupted, TrainResult, train

__all__ = ["Interrupted", "TrainResult", "train"]

warnings.warn(
    "translator.training.loop is deprecated: import train, Interrupted and TrainResult from "
    "translator.training.trainer",
    DeprecationWarning,
    stacklevel=2,
)
