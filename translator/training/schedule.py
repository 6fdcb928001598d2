"""The learning-rate schedule: linear warm-up to `train.lr` over `train.warmup_steps`
updates, then ReduceLROnPlateau on the validation loss (×`plateau_factor` after
`plateau_patience` epochs without a better loss, down to `min_lr`). One object, saved and
restored with the rest of the training state."""

from __future__ import annotations

from typing import Any

import torch

from translator.config import TrainConfig


class LRSchedule:
    def __init__(self, optimizer: torch.optim.Optimizer, cfg: TrainConfig):
        self.optimizer = optimizer
        self.peak = cfg.lr
        self.warmup = cfg.warmup_steps
        self.plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer,
            factor=cfg.plateau_factor,
            patience=cfg.plateau_patience,
            min_lr=cfg.min_lr,
        )

    def before_update(self, update: int) -> None:
        """Set the rate for update number `update` (1-based) while warming up."""
        if update <= self.warmup:
            self._set(self.peak * update / max(1, self.warmup))

    def after_epoch(self, valid_loss: float, update: int) -> None:
        """The plateau rule, once warm-up is over."""
        if update >= self.warmup:
            self.plateau.step(valid_loss)

    @property
    def lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    def _set(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def state_dict(self) -> dict[str, Any]:
        return {"plateau": self.plateau.state_dict(), "lr": self.lr}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.plateau.load_state_dict(state["plateau"])
        self._set(state["lr"])
