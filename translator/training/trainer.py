"""`translator train`: one training run, from its start (or `--resume`) to its stop.

    prepared ids → Trainer.fit(): for each epoch, a seeded order of batches; for each update
    (`train.update_freq` batches: label-smoothed cross-entropy over their target tokens,
    AdamW, clipping): step, log, save when due, stop when asked → at the epoch's end:
    validation loss and greedy BLEU, the learning-rate schedule, early stopping,
    best.pt / the epoch snapshot / last.pt / metrics.tsv

The whole state, the position in the epoch and every random generator included, is saved
every `train.save_every` updates, at every stop and epoch end, so `--resume` continues
exactly, mid-epoch too. A NaN/inf loss stops training before anything is saved.
"""

from __future__ import annotations

import logging
import time
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

import torch
from tqdm import tqdm

from translator.config import Config
from translator.data.batching import Batch, epoch_order
from translator.data.dataset import Batches, load_training_data
from translator.data.tokenizer import load_tokenizer
from translator.evaluation.validation import Validation
from translator.model import checkpoint
from translator.model.ema import WeightEMA
from translator.model.loss import sequence_loss
from translator.model.rundir import Final, RunDir, checkpoint_in
from translator.model.transformer import Transformer
from translator.runtime import StopSignals, pick_device
from translator.training import distributed, mixed_precision
from translator.training.compiled import compiled
from translator.training.distributed import Ranks
from translator.training.graphs import GraphedSteps
from translator.training.oom import MemoryGuard
from translator.training.optimizer import build_optimizer
from translator.training.progress import log_start, log_validation, progress_bar, show_window
from translator.training.resume import (
    check_resumable,
    initial_weights,
    load_training_state,
    training_payload,
    warn_of_other_precision,
)
from translator.training.schedule import LRSchedule
from translator.training.state import EPOCH, WINDOW, DeviceSums, TrainState, seed_everything
from translator.training.stopping import (
    Interrupted,
    StopReason,
    StopRule,
    TrainingDiverged,  # noqa: F401 - raised through here: callers import it from trainer
    check_finite,
)
from translator.training.tensorboard import Board
from translator.training.validator import Validator, metrics_row

log = logging.getLogger("translator.training")


class StepOutput(NamedTuple):
    """One update's summed loss and gradient norm before clipping, on the device."""

    loss: torch.Tensor
    grad_norm: torch.Tensor


@dataclass
class TrainResult:
    run_dir: Path
    state: TrainState
    stop_reason: StopReason
    message: str  # the stop reason as the user reads it
    batches_per_epoch: int  # of the last epoch (weighted corpora: its draw)
    history: list[dict] = field(default_factory=list)  # the rows this session added
    final: Final | None = None  # the run's model (train.final), None before a validation

    @property
    def best_bleu(self) -> float:
        """The best validation BLEU of the run, a budget cut's included (best.pt's)."""
        return max([self.state.best_bleu, *(row["valid_bleu"] for row in self.history)])


def train(
    config: Config, resume: bool = False, overwrite: bool = False, progress: bool = True
) -> TrainResult:
    """A new run in `train.run_dir` (or the one there continued, `resume`) until it stops."""
    try:  # the Trainer joins torchrun's process groups: they are left whatever happens
        trainer = Trainer(config, progress, resume)
        trainer.open_run(resume, overwrite)
        result = trainer.fit()
        distributed.wait_for_all(trainer.ranks)
        return result
    finally:
        distributed.finish()


def resolve(config: Config, device: torch.device, ranks: Ranks, resume: bool = False) -> Config:
    """The run's config with train.precision (rank 0's choice), train.pad_to_multiple and a
    new run's train.init_from (the checkpoint file) resolved, as the checkpoints record it."""
    train_cfg = config.train
    chosen = distributed.from_main(mixed_precision.resolve(train_cfg.precision, device), ranks)
    init_from = train_cfg.init_from
    if init_from and not resume:
        init_from = str(checkpoint_in(init_from))
    pad = mixed_precision.pad_multiple(train_cfg.pad_to_multiple, chosen, device)
    train_cfg = replace(train_cfg, precision=chosen, pad_to_multiple=pad, init_from=init_from)
    return replace(config, train=train_cfg)


class Trainer:
    """A model, its optimiser, schedule and state, the data it trains on, and the run."""

    def __init__(self, config: Config, progress: bool = True, resume: bool = False):
        """`resume`: the run will continue from last.pt (train.init_from is then not read)."""
        self.ranks, self.device = distributed.init(pick_device(config.train.device))
        self.precision_reason = mixed_precision.reason(config.train.precision, self.device)
        self.config = config = resolve(config, self.device, self.ranks, resume)
        train_cfg = config.train
        self.precision = train_cfg.precision
        self.progress = progress and self.ranks.main
        self.created = time.perf_counter()
        self.run_dir = RunDir(train_cfg.run_dir)
        graphed = train_cfg.cuda_graphs and self.device.type == "cuda" and self.ranks.world == 1
        # a step recorded as a CUDA graph must not keep autocast's cached weight copies
        self.autocast = mixed_precision.autocast(self.precision, self.device, cache=not graphed)
        seed_everything(train_cfg.seed)
        self.data = load_training_data(config)
        self.src_tok = load_tokenizer(self.data.tokenizer_models["src"])
        self.tgt_tok = load_tokenizer(self.data.tokenizer_models["tgt"])
        vocab = (self.src_tok.get_piece_size(), self.tgt_tok.get_piece_size())
        self.model = Transformer(config.model, *vocab).to(self.device)
        # parameters start as rank 0's; dropout differs per rank
        self.replicated = distributed.replicated(
            self.model, self.ranks, self.device, train_cfg.seed
        )
        if self.ranks.active:
            log.setLevel(logging.INFO if self.ranks.main else logging.WARNING)  # all of training/
        # decoding for validation: bf16 on CUDA only (on the CPU it did not pay)
        decode_autocast = self.autocast if self.device.type == "cuda" else nullcontext()
        tokenizers = (self.src_tok, self.tgt_tok)
        self.validator = Validator(config, self.data, tokenizers, self.ranks, decode_autocast)
        # forward and loss of one batch (train.compile); it shares the model's parameters
        self.compiled_loss = compiled(self.loss, train_cfg, self.data.train.distinct_shapes())
        self.graphed: GraphedSteps | None = None
        if graphed:
            params = list(self.model.parameters())
            self.graphed = GraphedSteps(self._forward_backward, params, self.device)
        self.optimizer = build_optimizer(self.model, train_cfg)
        self.schedule = LRSchedule(self.optimizer, train_cfg)
        self.ema = WeightEMA(self.model, train_cfg.ema) if train_cfg.ema else None
        self.state = TrainState()
        self.sums = DeviceSums(self.state, self.device)  # the loss and gradient norm: no sync
        self.signals = StopSignals()
        self.stopping = StopRule(train_cfg, self.ranks, self.signals)
        self.memory = MemoryGuard(self.ranks, self.device, train_cfg.max_tokens)

    def open_run(self, resume: bool, overwrite: bool) -> None:
        """Make the run directory ready, then load last.pt or train.init_from's weights."""
        init_from = self.config.train.init_from
        weights = initial_weights(self.config) if init_from and not resume else None
        self.run_dir.check(resume, overwrite)
        if self.ranks.main:
            self.run_dir.start(self.config.to_dict(), resume)
        distributed.from_main(None, self.ranks)  # the others wait for the directory
        if resume:
            self._restore()
        elif weights is not None:
            self.model.load_state_dict(weights)
            if self.ema:
                self.ema.restart()
            log.info("weights from %s; optimiser, schedule and counters start fresh", init_from)

    def fit(self) -> TrainResult:
        """Train epochs until a stop (SIGINT/SIGTERM: after the current update, Interrupted)."""
        graphed, main = self.graphed is not None, self.ranks.main
        log_start(
            self.config, self.data, self.model, self.device, self.precision_reason, graphed, main
        )
        self.stopping.session_start = time.monotonic()
        history: list[dict] = []
        batches = len(self.data.train)  # then each epoch's: weighted corpora draw anew
        save_every = self.config.train.save_every
        tensorboard = self.config.train.tensorboard and main
        with self.signals, Board(self.run_dir.path, tensorboard) as board:
            while (stop := self.stopping.reason(self.state)) is None:
                plan, updates = self.start_epoch()
                batches = len(plan)
                with progress_bar(self.state, batches, self.progress) as bar:
                    for group in updates:
                        self.update(plan, group)
                        bar.update(len(group))
                        self._log_update(bar, board)
                        if save_every and self.state.step % save_every == 0:
                            self.save()
                        mid_epoch = self.state.position < len(plan)
                        if mid_epoch and (stop := self.stopping.reason(self.state, True)):
                            break
                history.append(self.end_epoch(board, stop))
                if stop is not None:
                    break
            final = self.write_final()  # a signal meanwhile waits for it
        message = stop.message(self.config)
        return TrainResult(self.run_dir.path, self.state, stop, message, batches, history, final)

    def write_final(self) -> Final | None:
        """The run's model as train.final asks, recorded in final.json (rank 0 writes)."""
        if not self.ranks.main:
            return None
        return self.run_dir.write_final(self.config.train.final, self.config.train.final_epochs)

    def _interrupt(self) -> None:
        """Save the state and the run's model so far, then stop saying how to continue."""
        self.save()
        self.write_final()
        distributed.wait_for_all(self.ranks)  # no rank exits while rank 0 writes it
        signal = self.signals.requested
        assert signal is not None
        message = StopReason.SIGNAL.message(
            self.config,
            signal=signal.name,
            epoch=self.state.epoch + 1,
            step=self.state.step,
            last=self.run_dir.last,
        )
        raise Interrupted(message, int(signal))

    def start_epoch(self) -> tuple[Batches, list[list[int]]]:
        """The epoch's batches and its updates left: `update_freq` batches for each rank."""
        self.model.train()
        plan = self.data.train.epoch(self.state.epoch)
        order = epoch_order(len(plan), self.config.train.seed, self.state.epoch)
        per_update = self.config.train.update_freq * self.ranks.world
        starts = range(self.state.position, len(order), per_update)
        return plan, [order[start : start + per_update] for start in starts]

    def update(self, plan: Batches, group: list[int]) -> None:
        """One update over the batches `group` of `plan`, this rank's share (oom.py)."""
        began = time.perf_counter()
        share = group
        if self.ranks.active:
            share = distributed.deal(group, plan.tokens, self.ranks.world)[self.ranks.rank]
        tokens = int(plan.tokens[group].sum())
        batches = [plan[i] for i in share] or [plan[group[0]]]
        with self.memory.skipped_if_out_of_memory(self.optimizer, self.state, len(batches)):
            self.sums.add(*self.step(batches, tokens, bool(share)))
            self.state.epoch_updates += 1
            self.state.window_updates += 1
        self.state.position += len(group)
        self.state.epoch_tokens += tokens
        self.state.window_tokens += tokens
        self.state.epoch_seconds += time.perf_counter() - began

    def step(
        self, batches: list[Batch], tokens: int | None = None, counted: bool = True
    ) -> StepOutput:
        """One optimiser update over `batches`, the loss normalised by the update's `tokens`
        (all ranks'; default: these batches'), left on the device. `counted` False: a stand-in
        batch for a rank with no share, its loss × 0, so that it still joins the all-reduce."""
        self.state.step += 1
        self.schedule.before_update(self.state.step)
        tokens = tokens or sum(b.n_tokens for b in batches)
        total = torch.zeros((), device=self.device)
        for j, batch in enumerate(batches):
            last = j == len(batches) - 1  # under DDP, gradients are all-reduced after the last
            with self.replicated.no_sync() if self.ranks.active and not last else nullcontext():
                if self.graphed:
                    loss_sum = self.graphed(batch, tokens)
                else:
                    on = batch.to(self.device, non_blocking=True)
                    args = (on.src, on.tgt_in, on.src_mask, on.tgt_out, tokens, counted)
                    loss_sum = self._forward_backward(*args)
            total += loss_sum.detach() * counted
        clip = self.config.train.clip_norm
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=self.graphed is None)  # graphs write in place
        if self.ema:
            self.ema.update()
        return StepOutput(total, grad_norm)

    def loss(
        self, src: torch.Tensor, tgt_in: torch.Tensor, src_mask: torch.Tensor, tgt_out: torch.Tensor
    ) -> torch.Tensor:
        """The summed training loss of one batch: what train.compile compiles."""
        with self.autocast:
            logits = self.replicated(src, tgt_in, src_mask)
        return sequence_loss(logits, tgt_out, self.config.train.label_smoothing)

    def _forward_backward(
        self,
        src: torch.Tensor,
        tgt_in: torch.Tensor,
        src_mask: torch.Tensor,
        tgt_out: torch.Tensor,
        tokens: int | torch.Tensor,
        counted: bool = True,
    ) -> torch.Tensor:
        """One batch of `step`: forward, loss and backward (what a CUDA graph records)."""
        loss_sum = self.compiled_loss(src, tgt_in, src_mask, tgt_out)
        # DDP averages gradients over ranks: × world makes them the update's sum
        (loss_sum / tokens * self.ranks.world * counted).backward()
        return loss_sum

    def _log_update(self, bar: tqdm, board: Board) -> None:
        """Every train.log_every updates (and the first): the NaN check and the progress."""
        state, step = self.state, self.state.step
        if step % self.config.train.log_every == 0 or step == 1:
            self._read_sums()  # the one host-device sync, every log_every steps
            check_finite(state, self.run_dir.last, state.epoch_loss, state.epoch_grad_norm)
            show_window(bar, board, state, self.schedule.lr)
            state.start_window()
            self.sums.zero(WINDOW)
        if step == 1:
            log.info("first update %.1f s after start-up began", time.perf_counter() - self.created)

    def _read_sums(self) -> None:
        """The device's sums, over all ranks, into the state (one sync; collective)."""
        sums = distributed.sum_all(self.sums.shared(self.ranks.main), self.ranks)
        DeviceSums.into(self.state, sums)

    def end_epoch(self, board: Board, stop: StopReason | None) -> dict:
        """The epoch's end, complete (`stop` None) or cut short: validate, save, write the
        metrics; returns the row. best.pt and the snapshot come before last.pt, so a kill in
        between is redone from the previous last.pt alike. A cut saves its exact state first
        and leaves it as if it had not happened, so a resumed run goes on identically."""
        if stop is StopReason.SIGNAL:
            self._interrupt()
        complete, state = stop is None, self.state
        saved = None if complete else self.save()
        result = self._validate(self.model)
        self._read_sums()  # collective
        row = metrics_row(state, self.schedule.lr, result, complete, self.stopping.elapsed())
        average_best = False
        if self.ema:
            average = self._validate(self.ema.model)
            row["ema_valid_loss"], row["ema_valid_bleu"] = average.loss, average.bleu
            average_best = average.bleu > state.best_ema_bleu
        check_finite(state, self.run_dir.last, row["train_loss"], row["grad_norm"])
        improved = state.improved_by(result.bleu, result.loss)
        if complete:
            state.finish_epoch(row, improved, average_best)
            self.sums.zero(EPOCH)
            self.schedule.after_epoch(result.loss, result.bleu, state.step)
        payload = saved or self._payload()
        if self.ranks.main:
            if improved:
                checkpoint.save(payload, self.run_dir.best)
            if average_best:
                checkpoint.save(checkpoint.weights_only(payload, "ema"), self.run_dir.ema)
            if keep_last := self.config.train.keep_last:
                checkpoint.save_snapshot(payload, self.run_dir.checkpoints, row["epoch"], keep_last)
            if complete:
                checkpoint.save(payload, self.run_dir.last)
            self.run_dir.write_metrics(state.history if complete else [*state.history, row])
        log_validation(board, state.step, row, result, improved, self.data.bleu_src[0])
        return row

    def _validate(self, model: torch.nn.Module) -> Validation:
        """Validation loss and greedy BLEU of `model` (the trained one or the average)."""
        result = self.validator(model)
        self.model.train()
        check_finite(self.state, self.run_dir.last, result.loss)
        return result

    def _payload(self) -> dict:
        """Everything last.pt holds, the sums read first (collective: every rank calls it)."""
        state, ranks, ema = self.state, self.ranks, self.ema
        self._read_sums()
        check_finite(state, self.run_dir.last, state.epoch_loss, state.epoch_grad_norm)
        state.elapsed = self.stopping.elapsed()
        return training_payload(
            self.config, self.data, self.model, self.optimizer, self.schedule, state, ranks, ema
        ) | {"precision": self.precision}  # what the run trains in (train.precision auto: why)

    def save(self) -> dict:
        """last.pt, then metrics.tsv from the history it holds; returns what was saved."""
        payload = self._payload()
        if self.ranks.main:
            checkpoint.save(payload, self.run_dir.last)
            self.run_dir.write_metrics(self.state.history)
        return payload

    def _restore(self) -> None:
        """Continue from last.pt exactly, this rank's random state included."""
        payload = checkpoint.load(self.run_dir.last)
        groups = len(self.optimizer.param_groups)
        check_resumable(self.run_dir.last, payload, self.config, self.data.tokenizer_models, groups)
        restored = (self.model, self.optimizer, self.schedule, self.ema)
        self.state = load_training_state(payload, self.ranks.rank, *restored)
        warn_of_other_precision(payload, self.run_dir.last, self.precision)
        # the epoch's and the window's sums, counted once: on rank 0
        self.sums = DeviceSums(self.state, self.device, counted=self.ranks.main)
        self.stopping.session_elapsed = self.state.elapsed
        if self.ranks.main:
            self.run_dir.write_metrics(self.state.history)  # drop rows after last.pt
