"""`translator train`: prepared splits → a trained Transformer in `train.run_dir`.

    Trainer (trainer.py) → epochs until a stop → at each epoch end: validation, early
    stopping, the schedule, checkpoints (epoch_end.py) → metrics.tsv, best.pt, last.pt

Stops at `max_epochs`, at the time budget (counting earlier sessions of a resumed run),
when validation BLEU has not improved for `patience` epochs, or on SIGINT/SIGTERM. The
whole state, the position in the epoch's batch order and every random generator
included, is saved every `save_every` updates, at every stop and every epoch end, so
`--resume` continues exactly where the run stopped, mid-epoch too. A NaN/inf loss stops
training before anything is saved, so the last checkpoint on disk stays good.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from translator.config import Config
from translator.model.flops import count_parameters
from translator.training import distributed, epoch_end
from translator.training.resume import initial_weights, resolved
from translator.training.state import TrainState
from translator.training.tensorboard import Board
from translator.training.trainer import Trainer

log = logging.getLogger(__name__)


class Interrupted(Exception):
    """SIGINT/SIGTERM: the state was saved; the message says how to continue."""

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.signum = signum


@dataclass
class TrainResult:
    run_dir: Path
    state: TrainState
    stop_reason: str
    batches_per_epoch: int
    history: list[dict] = field(default_factory=list)  # the rows this session added

    @property
    def best_bleu(self) -> float:
        """The best validation BLEU of the run, a budget cut's included (best.pt's)."""
        return max([self.state.best_bleu, *(row["valid_bleu"] for row in self.history)])


def train(
    config: Config, resume: bool = False, overwrite: bool = False, progress: bool = True
) -> TrainResult:
    """A new run in `train.run_dir` (or the one there continued, `resume`), trained until
    it stops; a new run with `train.init_from` starts from that model's weights."""
    weights = None
    if config.train.init_from and not resume:  # checked before anything is loaded or written
        config = resolved(config)
        weights = initial_weights(config)
    trainer = Trainer(config, progress)
    try:
        trainer.run_dir.check(resume, overwrite)
        if trainer.ranks.main:
            trainer.run_dir.start(config.to_dict(), resume)
        distributed.from_main(None, trainer.ranks)  # the others wait for the directory
        if resume:
            trainer.restore()
        elif weights is not None:
            trainer.start_from(weights)
            log.info(
                "weights from %s; optimiser, schedule and counters start fresh",
                config.train.init_from,
            )
        result = run(trainer)
        distributed.wait_for_all(trainer.ranks)
        return result
    finally:
        distributed.finish(trainer.ranks)


def run(trainer: Trainer) -> TrainResult:
    """Train epochs until a stop, SIGINT/SIGTERM asking to stop after the current update."""
    cfg = trainer.cfg
    budget = cfg.max_minutes * 60 if cfg.max_minutes > 0 else math.inf
    trainer.session_start = time.monotonic()
    data = trainer.data
    log.info(
        "model: %s parameters; %d training pairs in %d batches (%d dropped as longer "
        "than %d tokens); device %s",
        f"{count_parameters(trainer.model):,}",
        data.train_pairs,
        len(data.train),
        data.dropped,
        trainer.config.model.max_positions,
        trainer.device,
    )
    history: list[dict] = []
    trainer.board = Board(trainer.run_dir.path, cfg.tensorboard and trainer.ranks.main)
    with trainer.signals:
        try:
            reason = until_stopped(trainer, budget, history)
        finally:
            trainer.board.close()
    return TrainResult(trainer.run_dir.path, trainer.state, reason, len(data.train), history)


def until_stopped(trainer: Trainer, budget: float, history: list[dict]) -> str:
    """Epochs, each ended (or cut by the budget) by epoch_end; returns why it stopped."""
    cfg, state = trainer.cfg, trainer.state  # epoch_end updates the state in place
    while True:
        if state.epoch >= cfg.max_epochs:
            return f"reached train.max_epochs ({cfg.max_epochs})"
        if state.bad_epochs >= cfg.patience:
            return f"early stopping: no better validation BLEU in {cfg.patience} epochs"
        if state.step and trainer.budget_used(budget):  # a new run makes one update
            return budget_reason(trainer)
        stopped = trainer.train_epoch(budget)
        if stopped == "signal":
            interrupt(trainer)
        if stopped == "budget":
            history.append(epoch_end.budget_cut(trainer))
            return budget_reason(trainer)
        history.append(epoch_end.end_of_epoch(trainer))


def budget_reason(trainer: Trainer) -> str:
    cfg = trainer.cfg
    if trainer.updates_used():
        return f"reached train.max_updates ({cfg.max_updates:,})"
    return f"time budget of {cfg.max_minutes:g} minutes used"


def interrupt(trainer: Trainer) -> None:
    """Save the exact state, then stop with a line that says how to continue."""
    trainer.save()
    signal = trainer.signals.requested
    raise Interrupted(
        f"stopped by {signal.name} in epoch {trainer.state.epoch + 1} after step "
        f"{trainer.state.step:,}; saved {trainer.run_dir.last}: continue with --resume",
        int(signal),
    )
