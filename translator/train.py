"""`translator train`: prepared splits → trained Transformer in `train.run_dir`.

    memory-mapped batches → per epoch: a seeded order of batches, `train.update_freq` of
    them per update (label-smoothed cross-entropy over their target tokens, AdamW,
    warm-up then ReduceLROnPlateau, clipping) → validation loss + greedy BLEU
    → metrics.tsv row → checkpoints (rundir.py)

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
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from tqdm import tqdm

from translator import distributed, epoch_end, oom, resume
from translator.config import Config
from translator.data.batching import Batch, epoch_order
from translator.data.dataset import load_training_data
from translator.data.tokenizer import load_tokenizer
from translator.errors import UserError
from translator.evaluate import Validation, validate
from translator.flops import count_parameters
from translator.inference import Translator
from translator.loss import sequence_loss
from translator.model import Transformer
from translator.optim import build_optimizer
from translator.rundir import RunDir
from translator.runtime import StopSignals, pick_device
from translator.schedule import LRSchedule
from translator.state import TrainState, seed_everything
from translator.tensorboard import Board

log = logging.getLogger(__name__)


class TrainingDiverged(UserError):
    pass


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


class Trainer:
    def __init__(self, config: Config, progress: bool = True):
        self.config, self.cfg = config, config.train
        self.ranks, self.device = distributed.init(pick_device(self.cfg.device))
        self.progress = progress and self.ranks.main
        self.created = time.perf_counter()
        self.run_dir = RunDir(self.cfg.run_dir)
        seed_everything(self.cfg.seed)
        self.data = load_training_data(config)
        self.src_tok = load_tokenizer(self.data.tokenizer_models["src"])
        self.tgt_tok = load_tokenizer(self.data.tokenizer_models["tgt"])
        vocab = (self.src_tok.get_piece_size(), self.tgt_tok.get_piece_size())
        self.model = Transformer(config.model, *vocab).to(self.device)
        replicated = self.model
        if self.ranks.active:  # parameters start as rank 0's; dropout differs per rank
            ids = [self.device.index] if self.device.type == "cuda" else None
            replicated = torch.nn.parallel.DistributedDataParallel(self.model, device_ids=ids)
            torch.manual_seed(self.cfg.seed + self.ranks.rank)
            log.setLevel(logging.INFO if self.ranks.main else logging.WARNING)
        self.optimizer = build_optimizer(self.model, self.cfg)
        self.schedule = LRSchedule(self.optimizer, self.cfg)
        self.state = TrainState()
        # the compiled module shares the model's parameters; checkpoints save the model
        self.forward = torch.compile(replicated, dynamic=True) if self.cfg.compile else replicated
        self.replicated = replicated
        cuda = self.device.type == "cuda"
        self.autocast = torch.autocast("cuda", dtype=torch.bfloat16) if cuda else nullcontext()
        self.epoch_loss = torch.zeros((), device=self.device)  # summed on the device: no sync
        self.session_start = time.monotonic()
        self.session_elapsed = 0.0  # state.elapsed when this session began
        self.signals = StopSignals()
        self.ooms_in_a_row = 0
        self.board = Board(self.run_dir.path, enabled=False)  # run() opens the real one

    # ---- checkpoints -------------------------------------------------------------------
    def payload(self) -> dict:
        return resume.training_payload(self)

    def save(self) -> dict:
        """last.pt, then metrics.tsv from the history it holds (rank 0 writes). Returns
        what was saved."""
        payload = self.payload()
        if self.ranks.main:
            self.run_dir.save(payload)
            self.run_dir.write_metrics(self.state.history)
        return payload

    def restore(self) -> None:
        resume.restore(self)

    def elapsed(self) -> float:
        return self.session_elapsed + time.monotonic() - self.session_start

    def check_finite(self, loss: float) -> None:
        if not math.isfinite(loss):
            last = self.run_dir.last
            kept = f"the last good checkpoint is {last}" if last.exists() else "nothing was saved"
            raise TrainingDiverged(
                f"training diverged: loss is {loss} at epoch {self.state.epoch + 1}, step "
                f"{self.state.step}; {kept}. Try a lower train.lr or more train.warmup_steps"
            )

    # ---- updates -----------------------------------------------------------------------
    def train_step(
        self, batches: list[Batch], tokens: int | None = None, counted: bool = True
    ) -> torch.Tensor:
        """One optimiser update over this rank's `batches`, the loss normalised by the
        `tokens` of the whole update (all ranks; default: these batches'). `counted` False:
        a stand-in batch for a rank with no share of this update, its loss multiplied by 0,
        so the rank still joins the gradient all-reduce. Returns the summed loss, left on
        the device (no sync)."""
        self.state.step += 1
        self.schedule.before_update(self.state.step)
        tokens = tokens or sum(b.n_tokens for b in batches)
        total = torch.zeros((), device=self.device)
        for j, batch in enumerate(batches):
            batch = batch.to(self.device, non_blocking=True)
            last = j == len(batches) - 1
            with self.replicated.no_sync() if self.ranks.active and not last else nullcontext():
                with self.autocast:
                    logits = self.forward(batch.src, batch.tgt_in, batch.src_mask)
                loss_sum = sequence_loss(logits, batch.tgt_out, self.cfg.label_smoothing)
                # DDP averages gradients over ranks: × world makes them the update's sum
                (loss_sum / tokens * self.ranks.world * counted).backward()
            total += loss_sum.detach() * counted
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.clip_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return total

    def train_epoch(self, budget: float) -> str | None:
        """Train from the saved position to the end of the epoch. Returns None when the epoch
        is done, "budget" or "signal" when it stopped early (after a whole update)."""
        self.model.train()
        order = epoch_order(len(self.data.train), self.cfg.seed, self.state.epoch)
        per_update = self.cfg.update_freq * self.ranks.world
        bar = tqdm(
            total=len(order),
            initial=self.state.position,
            desc=f"epoch {self.state.epoch + 1}",
            unit="batch",
            leave=False,
            disable=None if self.progress else True,
            dynamic_ncols=True,
        )
        plan = self.data.train
        for start in range(self.state.position, len(order), per_update):
            began = time.perf_counter()
            group = order[start : start + per_update]
            share = group
            if self.ranks.active:
                share = distributed.deal(group, plan.tokens, self.ranks.world)[self.ranks.rank]
            tokens = int(plan.tokens[group].sum())
            batches = [plan[i] for i in share] or [plan[group[0]]]
            self.epoch_loss += oom.step_or_skip(self, batches, tokens, counted=bool(share))
            self.state.position = min(start + per_update, len(order))
            self.state.epoch_tokens += tokens
            self.state.epoch_seconds += time.perf_counter() - began
            bar.update(len(group))
            self.after_update(bar)
            if self.state.position < len(order):
                stop = self.stop_requested(budget)
                if stop:
                    bar.close()
                    return stop
        bar.close()
        return None

    def after_update(self, bar: tqdm) -> None:
        step = self.state.step
        if step % self.cfg.log_every == 0 or step == 1:
            loss = self.global_loss()  # the one host-device sync, every log_every steps
            self.check_finite(loss)
            seconds = max(self.state.epoch_seconds, 1e-9)
            per_token = loss / max(1, self.state.epoch_tokens)
            tokens_per_s = self.state.epoch_tokens / seconds
            bar.set_postfix(
                loss=f"{per_token:.3f}", lr=f"{self.schedule.lr:.2e}", tok_s=f"{tokens_per_s:.0f}"
            )
            self.board.training(step, per_token, self.schedule.lr, tokens_per_s)
        if step == 1:
            log.info("first update %.1f s after start-up began", time.perf_counter() - self.created)
        if self.cfg.save_every and step % self.cfg.save_every == 0:
            self.save()

    def stop_requested(self, budget: float) -> str | None:
        """A signal or the budget, as one decision for all ranks."""
        wish = 2 if self.signals.requested is not None else int(self.elapsed() > budget)
        return {0: None, 1: "budget", 2: "signal"}[distributed.highest(wish, self.ranks)]

    def global_loss(self) -> float:
        """The epoch's summed training loss so far, over all ranks."""
        return distributed.sum_all(self.epoch_loss, self.ranks).item()

    # ---- validation --------------------------------------------------------------------
    def validate(self) -> Validation:
        """Validation loss and greedy BLEU (decode.beam is for translate and eval)."""
        greedy = replace(self.config.decode, beam=1)
        translator = Translator(self.model, self.src_tok, self.tgt_tok, greedy)
        data = self.data
        result = None
        if self.ranks.main:
            result = validate(translator, data.valid, data.bleu_src, data.bleu_refs, self.autocast)
        result = distributed.from_main(result, self.ranks)
        self.model.train()
        self.check_finite(result.loss)
        return result

    # ---- the whole run -----------------------------------------------------------------
    def run(self) -> TrainResult:
        budget = self.cfg.max_minutes * 60 if self.cfg.max_minutes > 0 else math.inf
        self.session_start = time.monotonic()
        log.info(
            "model: %s parameters; %d training pairs in %d batches (%d dropped as longer "
            "than %d tokens); device %s",
            f"{count_parameters(self.model):,}",
            self.data.train_pairs,
            len(self.data.train),
            self.data.dropped,
            self.config.model.max_positions,
            self.device,
        )
        history: list[dict] = []
        self.board = Board(self.run_dir.path, self.cfg.tensorboard and self.ranks.main)
        with self.signals:
            try:
                reason = self.train_until_stopped(budget, history)
            finally:
                self.board.close()
        return TrainResult(self.run_dir.path, self.state, reason, len(self.data.train), history)

    def train_until_stopped(self, budget: float, history: list[dict]) -> str:
        while True:
            if self.state.epoch >= self.cfg.max_epochs:
                return f"reached train.max_epochs ({self.cfg.max_epochs})"
            if self.state.bad_epochs >= self.cfg.patience:
                return f"early stopping: no better validation BLEU in {self.cfg.patience} epochs"
            if self.state.step and self.elapsed() > budget:  # a new run makes one update
                return f"time budget of {self.cfg.max_minutes:g} minutes used"
            stopped = self.train_epoch(budget)
            if stopped == "signal":
                self.interrupt()
            if stopped == "budget":
                history.append(epoch_end.budget_cut(self))
                return f"time budget of {self.cfg.max_minutes:g} minutes used"
            history.append(epoch_end.end_of_epoch(self))

    def interrupt(self) -> None:
        self.save()
        signal = self.signals.requested
        raise Interrupted(
            f"stopped by {signal.name} in epoch {self.state.epoch + 1} after step "
            f"{self.state.step:,}; saved {self.run_dir.last}: continue with --resume",
            int(signal),
        )


def train(
    config: Config, resume: bool = False, overwrite: bool = False, progress: bool = True
) -> TrainResult:
    trainer = Trainer(config, progress)
    try:
        trainer.run_dir.check(resume, overwrite)
        if trainer.ranks.main:
            trainer.run_dir.start(config.to_dict(), resume)
        distributed.from_main(None, trainer.ranks)  # the others wait for the directory
        if resume:
            trainer.restore()
        return trainer.run()
    finally:
        distributed.finish(trainer.ranks)
