"""The learning-rate schedule: linear warm-up to `train.lr` over `train.warmup_steps`
updates, then ReduceLROnPlateau on `train.plateau_metric` (validation loss or BLEU) down to
`min_lr` (fairseq's inverse square root lost to it: docs/studies.md)."""

from __future__ import annotations

from typing import Any

import torch

from translator.config import TrainConfig
from translator.errors import UserError


class LRSchedule:
    def __init__(self, optimizer: torch.optim.Optimizer, train_cfg: TrainConfig):
        self.optimizer = optimizer
        self.peak = train_cfg.lr
        self.warmup = train_cfg.warmup_steps
        self.metric = train_cfg.plateau_metric
        self.plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer,
            mode="max" if self.metric == "bleu" else "min",
            factor=train_cfg.plateau_factor,
            patience=train_cfg.plateau_patience,
            min_lr=train_cfg.min_lr,
        )

    def before_update(self, update: int) -> None:
        """Set the rate for update number `update` (1-based) while warming up."""
        if update <= self.warmup:
            self._set(self.peak * update / max(1, self.warmup))

    def after_epoch(self, valid_loss: float, valid_bleu: float, update: int) -> None:
        """The plateau rule, once warm-up is over."""
        if update >= self.warmup:
            self.plateau.step(valid_bleu if self.metric == "bleu" else valid_loss)

    @property
    def lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    def _set(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def state_dict(self) -> dict[str, Any]:
        return {"plateau": self.plateau.state_dict(), "lr": self.lr}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["plateau"]["mode"] != self.plateau.mode:
            raise UserError(
                f"cannot resume: the run's plateau rule followed the other metric than "
                f"train.plateau_metric = {self.metric!r} (start a new run to change it)"
            )
        self.plateau.load_state_dict(state["plateau"])
        self._set(state["lr"])
