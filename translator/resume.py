"""The checkpoint side of training: what last.pt holds, and putting a Trainer back into
that state. Collective under torch.distributed (every rank's random state is gathered),
so every rank calls `training_payload`; only rank 0 writes it."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

import torch

from translator import distributed
from translator.config import from_dict
from translator.errors import UserError
from translator.state import TrainState, random_state, set_random_state

if TYPE_CHECKING:
    from translator.train import Trainer


def training_payload(trainer: Trainer) -> dict:
    """Everything `--resume` needs; the loss so far summed over all ranks."""
    state = trainer.state
    state.epoch_loss = distributed.sum_all(trainer.epoch_loss, trainer.ranks).item()
    trainer.check_finite(state.epoch_loss)
    state.elapsed = trainer.elapsed()
    return {
        "config": trainer.config.to_dict(),
        "tokenizers": trainer.data.tokenizer_paths,
        "tokenizer_models": trainer.data.tokenizer_models,
        "model": trainer.model.state_dict(),
        "optimizer": trainer.optimizer.state_dict(),
        "schedule": trainer.schedule.state_dict(),
        "train_state": asdict(state),
        "rng": distributed.gather(random_state(), trainer.ranks),  # one per rank
    }


def restore(trainer: Trainer) -> None:
    path = trainer.run_dir.last
    payload = trainer.run_dir.load()
    if from_dict(payload["config"]).model != trainer.config.model:
        raise UserError(
            f"cannot resume {path}: the config's [model] section differs from "
            "the one it was trained with"
        )
    if payload["tokenizer_models"] != trainer.data.tokenizer_models:
        raise UserError(
            f"cannot resume {path}: the tokenizers in {trainer.config.data.dir} "
            "differ from the ones it was trained with (was prepare re-run?)"
        )
    groups = len(trainer.optimizer.param_groups)
    if "schedule" not in payload or len(payload["optimizer"]["param_groups"]) != groups:
        raise UserError(f"cannot resume {path}: it was written by an older version")
    trainer.model.load_state_dict(payload["model"])
    trainer.optimizer.load_state_dict(payload["optimizer"])
    trainer.schedule.load_state_dict(payload["schedule"])
    trainer.state = TrainState(**payload["train_state"])
    main = trainer.ranks.main  # the loss so far counts once, on rank 0
    loss = trainer.state.epoch_loss if main else 0.0
    trainer.epoch_loss = torch.tensor(loss, device=trainer.device)
    trainer.session_elapsed = trainer.state.elapsed
    states = payload["rng"]
    set_random_state(states[trainer.ranks.rank % len(states)])
    if main:
        trainer.run_dir.write_metrics(trainer.state.history)  # drop rows after last.pt
