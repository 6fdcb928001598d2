"""The checkpoint side of training: what last.pt holds, and checking and loading it back.

Explicit inputs only: the trainer hands in its model, optimiser, schedule and state, so
this module knows nothing of the Trainer. Under torch.distributed every rank's random
state is gathered into the payload (the caller does that collectively); only rank 0
writes it.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from translator.config import Config, from_dict
from translator.data.dataset import TrainData
from translator.errors import UserError
from translator.training.schedule import LRSchedule
from translator.training.state import TrainState


def training_payload(
    config: Config,
    data: TrainData,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    schedule: LRSchedule,
    state: TrainState,
    rng: list[dict[str, Any]],
) -> dict[str, Any]:
    """Everything `--resume` needs (`rng`: every rank's random state, in rank order)."""
    return {
        "config": config.to_dict(),
        "tokenizers": data.tokenizer_paths,
        "tokenizer_models": data.tokenizer_models,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "schedule": schedule.state_dict(),
        "train_state": asdict(state),
        "rng": rng,
    }


def check_resumable(
    path: Path, payload: dict[str, Any], config: Config, tokenizer_models: dict, groups: int
) -> None:
    """One clear line if `payload` (read from `path`) cannot continue under `config`, with
    the prepared data's tokenizers and an optimiser of `groups` parameter groups."""
    if from_dict(payload["config"]).model != config.model:
        raise UserError(
            f"cannot resume {path}: the config's [model] section differs from "
            "the one it was trained with"
        )
    if payload["tokenizer_models"] != tokenizer_models:
        raise UserError(
            f"cannot resume {path}: the tokenizers in {config.data.dir} "
            "differ from the ones it was trained with (was prepare re-run?)"
        )
    if "schedule" not in payload or len(payload["optimizer"]["param_groups"]) != groups:
        raise UserError(f"cannot resume {path}: it was written by an older version")


def load_training_state(
    payload: dict[str, Any],
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    schedule: LRSchedule,
) -> TrainState:
    """Put the weights, optimiser and schedule back as saved; returns the saved state."""
    model.load_state_dict(payload["model"])
    optimizer.load_state_dict(payload["optimizer"])
    schedule.load_state_dict(payload["schedule"])
    return TrainState(**payload["train_state"])
