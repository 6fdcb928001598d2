"""What a training run must remember to continue exactly: the counters and the position in
the epoch (TrainState), the sums on the device (DeviceSums) and every random generator."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch


@dataclass
class TrainState:
    epoch: int = 0  # epochs completed
    step: int = 0  # optimiser updates made
    position: int = 0  # batches of the current epoch's order already trained on
    best_bleu: float = -1.0
    best_loss: float = math.inf  # validation loss at the best BLEU (breaks ties)
    best_ema_bleu: float = -1.0  # validation BLEU of the best weights' average (train.ema)
    bad_epochs: int = 0  # epochs since the best (of the weights or their average)
    elapsed: float = 0.0  # seconds of the run so far, every session together
    epoch_loss: float = 0.0  # summed training loss of the current epoch so far ...
    epoch_tokens: int = 0  # ... over this many target tokens ...
    epoch_seconds: float = 0.0  # ... in this much training time
    epoch_updates: int = 0  # updates made in the current epoch (skipped ones not counted) ...
    epoch_grad_norm: float = 0.0  # ... their gradient norms before clipping, summed ...
    epoch_grad_norm_max: float = 0.0  # ... and the largest
    window_loss: float = 0.0  # summed training loss since the last log ...
    window_tokens: int = 0  # ... over this many target tokens ...
    window_updates: int = 0  # ... in this many updates ...
    window_grad_norm: float = 0.0  # ... their gradient norms before clipping, summed ...
    window_grad_norm_max: float = 0.0  # ... and the largest
    skipped: int = 0  # batches skipped after running out of memory
    history: list[dict[str, Any]] = field(default_factory=list)  # metrics.tsv rows

    def start_next_epoch(self) -> None:
        self.epoch += 1
        self.position = 0
        self.epoch_loss, self.epoch_tokens, self.epoch_seconds = 0.0, 0, 0.0
        self.epoch_updates, self.epoch_grad_norm, self.epoch_grad_norm_max = 0, 0.0, 0.0

    def start_window(self) -> None:
        """The updates since the last log begin again (after the log has read them)."""
        self.window_loss, self.window_tokens, self.window_updates = 0.0, 0, 0
        self.window_grad_norm, self.window_grad_norm_max = 0.0, 0.0

    def improved_by(self, bleu: float, loss: float) -> bool:
        """Better validation BLEU than the best so far, ties broken by validation loss."""
        return (bleu, -loss) > (self.best_bleu, -self.best_loss)

    def finish_epoch(self, row: dict[str, Any], improved: bool, average_best: bool) -> None:
        """A whole epoch validated (`row`): the next one starts, early stopping counts on."""
        self.start_next_epoch()
        if improved:
            self.best_bleu, self.best_loss = row["valid_bleu"], row["valid_loss"]
        if average_best:
            self.best_ema_bleu = row["ema_valid_bleu"]
        self.bad_epochs = 0 if improved or average_best else self.bad_epochs + 1
        self.history.append(row)


# TrainState's fields summed on the device: the epoch's row and the window's since the log
SUMMED = (
    ("epoch_loss", "epoch_grad_norm", "epoch_grad_norm_max"),
    ("window_loss", "window_grad_norm", "window_grad_norm_max"),
)
EPOCH, WINDOW = 0, 1  # SUMMED's rows


class DeviceSums:
    """TrainState's SUMMED fields added up on the device, so that an update reads nothing."""

    def __init__(self, state: TrainState, device: torch.device, counted: bool = True):
        """`state`'s sums on `device`; zeros where not `counted` (all ranks but one, so that
        the sum over ranks counts them once)."""
        values = [[getattr(state, name) if counted else 0.0 for name in row] for row in SUMMED]
        self.values = torch.tensor(values, dtype=torch.float32, device=device)

    def add(self, loss: torch.Tensor, grad_norm: torch.Tensor) -> None:
        """One update's summed loss and gradient norm, into the epoch's and the window's."""
        self.values[:, :2] += torch.stack((loss, grad_norm))
        self.values[:, 2] = torch.maximum(self.values[:, 2], grad_norm)

    def zero(self, row: int) -> None:
        """EPOCH's or WINDOW's sums start again."""
        self.values[row].zero_()

    def shared(self, main: bool) -> torch.Tensor:
        """The sums as this rank adds them to the other ranks': its own loss, and the
        gradient norms from the main rank alone (every rank clips the same gradients)."""
        if main:
            return self.values
        mine = self.values.clone()
        mine[:, 1:] = 0.0
        return mine

    @staticmethod
    def into(state: TrainState, values: list[list[float]]) -> None:
        """Sums read on the host (summed over ranks) into `state`'s SUMMED fields."""
        for names, row in zip(SUMMED, values, strict=True):
            for name, value in zip(names, row, strict=True):
                setattr(state, name, value)


def random_state() -> dict[str, Any]:
    """Every generator training draws from: Python's, NumPy's, torch's CPU and CUDA ones."""
    name, keys, position, has_gauss, cached = np.random.get_state()
    return {
        "python": random.getstate(),
        "numpy": [name, torch.from_numpy(keys.astype(np.int64)), position, has_gauss, cached],
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def set_random_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    name, keys, position, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), position, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # CUDA generators too
