"""What a training run must remember to continue exactly: the counters and the position in
the epoch's batch order (TrainState), and every random generator a step draws from."""

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
    skipped: int = 0  # batches skipped after running out of memory
    history: list[dict[str, Any]] = field(default_factory=list)  # metrics.tsv rows

    def start_next_epoch(self) -> None:
        self.epoch += 1
        self.position = 0
        self.epoch_loss, self.epoch_tokens, self.epoch_seconds = 0.0, 0, 0.0

    def improved_by(self, bleu: float, loss: float) -> bool:
        """Better validation BLEU than the best so far, ties broken by validation loss."""
        return (bleu, -loss) > (self.best_bleu, -self.best_loss)

    def finish_epoch(self, row: dict[str, Any], improved: bool, average_best: bool) -> None:
        """A whole epoch validated (`row`, its metrics): the next one starts, and early
        stopping keeps the bests so far and counts the epochs since either the weights
        (`improved`) or their average (`average_best`) last got better."""
        self.start_next_epoch()
        if improved:
            self.best_bleu, self.best_loss = row["valid_bleu"], row["valid_loss"]
        if average_best:
            self.best_ema_bleu = row["ema_valid_bleu"]
        self.bad_epochs = 0 if improved or average_best else self.bad_epochs + 1
        self.history.append(row)


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
