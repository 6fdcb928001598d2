"""When a run stops, and the line that says why (StopReason); SIGINT/SIGTERM (Interrupted)
and a NaN/inf loss or gradient norm (TrainingDiverged)."""

from __future__ import annotations

import math
import time
from enum import Enum
from pathlib import Path
from typing import Any

from translator.config import Config, TrainConfig
from translator.errors import UserError
from translator.runtime import StopSignals
from translator.training import distributed
from translator.training.state import TrainState


class StopReason(Enum):
    """Why a run stopped. Each value is the line the user sees, filled in by `message`."""

    MAX_EPOCHS = "reached train.max_epochs ({max_epochs})"
    EARLY_STOPPING = "early stopping: no better validation BLEU in {patience} epochs"
    MAX_UPDATES = "reached train.max_updates ({max_updates:,})"
    TIME_BUDGET = "time budget of {max_minutes:g} minutes used"
    SIGNAL = (
        "stopped by {signal} in epoch {epoch} after step {step:,}; saved {last}: "
        "continue with --resume"
    )

    def message(self, config: Config, **facts: Any) -> str:
        """The line, from the [train] settings and `facts` (SIGNAL: signal, epoch, step, last)."""
        return self.value.format(**vars(config.train), **facts)


class TrainingDiverged(UserError):
    pass


class Interrupted(Exception):
    """SIGINT/SIGTERM: the state was saved; the message says how to continue."""

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.signum = signum


class StopRule:
    """Whether the run stops now, and why; and the run's clock, every session together."""

    def __init__(self, train_cfg: TrainConfig, ranks: distributed.Ranks, signals: StopSignals):
        self.train_cfg, self.ranks, self.signals = train_cfg, ranks, signals
        self.budget_s = train_cfg.max_minutes * 60 if train_cfg.max_minutes > 0 else math.inf
        self.session_start = time.monotonic()  # fit() starts the clock again
        self.session_elapsed = 0.0  # state.elapsed when this session began

    def elapsed(self) -> float:
        """Seconds of the run so far, every session together."""
        return self.session_elapsed + time.monotonic() - self.session_start

    def reason(self, state: TrainState, mid_epoch: bool = False) -> StopReason | None:
        """Whether the run stops now, and why: between epochs, at train.max_epochs, early
        stopping or past the budget; mid-epoch, on a signal or past it. Any rank's wish wins."""
        train_cfg = self.train_cfg
        if not mid_epoch and state.epoch >= train_cfg.max_epochs:
            return StopReason.MAX_EPOCHS
        if not mid_epoch and state.bad_epochs >= train_cfg.patience:
            return StopReason.EARLY_STOPPING
        updates_used = 0 < train_cfg.max_updates <= state.step
        signalled = mid_epoch and self.signals.requested is not None
        over_budget = (mid_epoch or state.step > 0) and (
            self.elapsed() > self.budget_s or updates_used
        )
        decided = distributed.highest(2 if signalled else int(over_budget), self.ranks)
        if decided == 2:
            return StopReason.SIGNAL
        if decided == 1:
            return StopReason.MAX_UPDATES if updates_used else StopReason.TIME_BUDGET
        return None


def check_finite(state: TrainState, last: Path, loss: float, grad_norm: float = 0.0) -> None:
    """Stop with TrainingDiverged on a NaN/inf loss or gradient norm."""
    if math.isfinite(loss) and math.isfinite(grad_norm):
        return
    what = f"loss is {loss}" if not math.isfinite(loss) else f"gradient norm is {grad_norm}"
    kept = f"the last good checkpoint is {last}" if last.exists() else "nothing was saved"
    raise TrainingDiverged(
        f"training diverged: {what} at epoch {state.epoch + 1}, step {state.step}; {kept}. "
        "Try a lower train.lr or more train.warmup_steps"
    )
