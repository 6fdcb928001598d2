"""The checkpoint side of training: what last.pt holds, and checking and loading it back
(`--resume`); and the weights of another model that a new run starts from (`init_from`).

`train.init_from` (`train --init-from`) is fine-tuning: only the weights are taken. The
optimiser, the learning-rate schedule (warm-up again), the step and epoch counters, early
stopping's best and the time budget all start fresh, as fairseq's `--finetune-from-model`
and JoeyNMT's `load_model` with every `reset_*` do. Two checks come first, each one error
line: the architecture in the config's [model] section must be the checkpoint's (every
differing key named; dropout and max_positions may change, they shape no weight), and
the data must have been prepared with the checkpoint's own tokenizers (`prepare
--tokenizers-from`), compared by the SHA-256 digests that ids.json records.

Explicit inputs only: the trainer hands in its model, optimiser, schedule and state, so
this module knows nothing of the Trainer. Under torch.distributed every rank's random
state is gathered into the payload (the caller does that collectively); only rank 0
writes it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from translator.config import Config, from_dict
from translator.data.dataset import TrainData
from translator.data.ids import meta_file
from translator.data.layout import SIDES
from translator.errors import UserError
from translator.model import checkpoint
from translator.model.ema import WeightEMA
from translator.model.rundir import checkpoint_in
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
    ema: WeightEMA | None = None,
) -> dict[str, Any]:
    """Everything `--resume` needs (`rng`: every rank's random state, in rank order), and
    the weights' moving average if there is one."""
    averaged = {"ema": ema.state_dict()} if ema else {}
    return averaged | {
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


# ---- init_from: a new run from another model's weights ---------------------------------
ARCHITECTURE = (
    "encoder_layers",
    "decoder_layers",
    "d_model",
    "heads",
    "ff_dim",
    "norm",
    "tie_embeddings",
)


def resolved(config: Config) -> Config:
    """`config` with train.init_from naming the checkpoint file itself (a run directory
    stands for its best.pt), so config.json and every checkpoint record which one."""
    path = checkpoint_in(config.train.init_from)
    return dataclasses.replace(config, train=dataclasses.replace(config.train, init_from=str(path)))


def initial_weights(config: Config) -> dict[str, Any]:
    """The weights of train.init_from, after checking that they fit `config` and its
    prepared data."""
    path = Path(config.train.init_from)
    payload = checkpoint.load(path)
    differing = model_differences(from_dict(payload["config"]), config)
    if differing:
        raise UserError(
            f"cannot initialise from {path}: the config's [model] section differs from the "
            f"checkpoint's: {'; '.join(differing)}"
        )
    other = tokenizer_differences(payload["tokenizer_models"], config.data.dir)
    if other:
        raise UserError(
            f"cannot initialise from {path}: {config.data.dir} was prepared with other "
            f"tokenizers ({' and '.join(other)} differ from the checkpoint's): prepare it "
            f"with --tokenizers-from {path}"
        )
    return payload["model"]


def model_differences(trained: Config, config: Config) -> list[str]:
    """'model.KEY is A here and B in the checkpoint' for each architecture key that differs."""
    return [
        f"model.{key} is {getattr(config.model, key)!r} here and "
        f"{getattr(trained.model, key)!r} in the checkpoint"
        for key in ARCHITECTURE
        if getattr(config.model, key) != getattr(trained.model, key)
    ]


def tokenizer_differences(models: dict[str, bytes], data_dir: str) -> list[str]:
    """The languages whose tokenizer in `data_dir` (by ids.json's digests) is not the
    checkpoint's."""
    try:
        recorded = json.loads(meta_file(data_dir).read_text(encoding="utf-8"))["tokenizers"]
    except (OSError, ValueError, KeyError):
        raise UserError(
            f"no prepared data in {data_dir} (no ids.json): run `translator prepare` first"
        ) from None
    return [
        lang
        for lang, side in SIDES.items()
        if recorded.get(lang) != hashlib.sha256(models[side]).hexdigest()
    ]
