"""The Trainer: one model being trained on prepared data, one update and one epoch at a time.

    memory-mapped batches → per epoch: a seeded order of batches, `train.update_freq` of
    them per update (label-smoothed cross-entropy over their target tokens, AdamW,
    warm-up then ReduceLROnPlateau, clipping) → validation loss + greedy BLEU

It owns the model, optimiser, schedule and training state, and saves and restores them
(resume.py). What happens when an epoch ends is in epoch_end.py, the run as a whole (when to
stop, signals) in loop.py; both drive a Trainer, which knows neither.
"""

from __future__ import annotations

import logging
import math
import time
from contextlib import nullcontext
from dataclasses import replace
from functools import partial

import torch
from tqdm import tqdm

from translator.config import Config
from translator.data.batching import Batch, epoch_order
from translator.data.dataset import load_training_data
from translator.data.tokenizer import load_tokenizer
from translator.errors import UserError
from translator.evaluation.validation import Validation, validate
from translator.inference.torch_engine import Translator
from translator.model.ema import WeightEMA
from translator.model.loss import rdrop_loss, sequence_loss, twice
from translator.model.rundir import RunDir
from translator.model.transformer import Transformer
from translator.runtime import StopSignals, pick_device
from translator.training import distributed, resume
from translator.training.oom import MemoryGuard
from translator.training.optimizer import build_optimizer
from translator.training.schedule import LRSchedule
from translator.training.state import TrainState, random_state, seed_everything, set_random_state
from translator.training.tensorboard import Board

log = logging.getLogger("translator.training")


class TrainingDiverged(UserError):
    pass


class Trainer:
    """A model, its optimiser, schedule and state, and the data it trains on."""

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
            log.setLevel(logging.INFO if self.ranks.main else logging.WARNING)  # all of training/
        self.optimizer = build_optimizer(self.model, self.cfg)
        self.schedule = LRSchedule(self.optimizer, self.cfg)
        self.ema = WeightEMA(self.model, self.cfg.ema) if self.cfg.ema else None
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
        self.memory = MemoryGuard(self.ranks, self.device, self.cfg.max_tokens)
        self.board = Board(self.run_dir.path, enabled=False)  # loop.run opens the real one

    # ---- checkpoints -------------------------------------------------------------------
    def payload(self) -> dict:
        """Everything last.pt holds; the loss so far summed over all ranks (collective:
        every rank calls it)."""
        state = self.state
        state.epoch_loss = self.global_loss()
        self.check_finite(state.epoch_loss)
        state.elapsed = self.elapsed()
        rng = distributed.gather(random_state(), self.ranks)  # one per rank
        return resume.training_payload(
            self.config, self.data, self.model, self.optimizer, self.schedule, state, rng, self.ema
        )

    def save(self) -> dict:
        """last.pt, then metrics.tsv from the history it holds (rank 0 writes). Returns
        what was saved."""
        payload = self.payload()
        if self.ranks.main:
            self.run_dir.save(payload)
            self.run_dir.write_metrics(self.state.history)
        return payload

    def restore(self) -> None:
        """Continue from last.pt exactly: weights, optimiser, schedule, counters, position
        and this rank's random state."""
        payload = self.run_dir.load()
        groups = len(self.optimizer.param_groups)
        tokenizers = self.data.tokenizer_models
        resume.check_resumable(self.run_dir.last, payload, self.config, tokenizers, groups)
        self.state = resume.load_training_state(payload, self.model, self.optimizer, self.schedule)
        if self.ema and "ema" in payload:
            self.ema.load_state_dict(payload["ema"])
        elif self.ema:
            self.ema.restart()
            log.info("train.ema is new to this run: the average starts from the resumed weights")
        loss = self.state.epoch_loss if self.ranks.main else 0.0  # counted once, on rank 0
        self.epoch_loss = torch.tensor(loss, device=self.device)
        self.session_elapsed = self.state.elapsed
        states = payload["rng"]
        set_random_state(states[self.ranks.rank % len(states)])
        if self.ranks.main:
            self.run_dir.write_metrics(self.state.history)  # drop rows after last.pt

    def start_from(self, weights: dict) -> None:
        """Fine-tuning: these weights (and the average starting from them)."""
        self.model.load_state_dict(weights)
        if self.ema:
            self.ema.restart()

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
                    logits = self.forward(*self.inputs(batch))
                loss_sum = self.objective(logits, batch.tgt_out)
                # DDP averages gradients over ranks: × world makes them the update's sum
                (loss_sum / tokens * self.ranks.world * counted).backward()
            total += loss_sum.detach() * counted
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.clip_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.ema:
            self.ema.update()
        return total

    def inputs(self, batch: Batch) -> tuple[torch.Tensor, ...]:
        """The model's inputs for one batch: twice over with R-Drop (train.rdrop)."""
        inputs = (batch.src, batch.tgt_in, batch.src_mask)
        return twice(*inputs) if self.cfg.rdrop else inputs

    def objective(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """The summed training loss of one batch's logits (model/loss.py)."""
        if self.cfg.rdrop:
            return rdrop_loss(logits, target, self.cfg.label_smoothing, self.cfg.rdrop)
        return sequence_loss(logits, target, self.cfg.label_smoothing)

    def train_epoch(self, budget: float) -> str | None:
        """Train from the saved position to the end of the epoch. Returns None when the epoch
        is done, "budget" or "signal" when it stopped early (after a whole update)."""
        self.model.train()
        plan = self.data.train.epoch(self.state.epoch)  # weighted corpora: this epoch's draw
        order = epoch_order(len(plan), self.cfg.seed, self.state.epoch)
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
        for start in range(self.state.position, len(order), per_update):
            began = time.perf_counter()
            group = order[start : start + per_update]
            share = group
            if self.ranks.active:
                share = distributed.deal(group, plan.tokens, self.ranks.world)[self.ranks.rank]
            tokens = int(plan.tokens[group].sum())
            batches = [plan[i] for i in share] or [plan[group[0]]]
            update = partial(self.train_step, batches, tokens, bool(share))
            loss = self.memory.step_or_skip(update, self.optimizer, self.state, len(batches))
            self.epoch_loss += loss
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

    def updates_used(self) -> bool:
        """At train.max_updates (0: no limit)."""
        return 0 < self.cfg.max_updates <= self.state.step

    def budget_used(self, budget: float) -> bool:
        """Past the time budget (seconds) or at train.max_updates."""
        return self.elapsed() > budget or self.updates_used()

    def stop_requested(self, budget: float) -> str | None:
        """A signal or the budget, as one decision for all ranks."""
        wish = 2 if self.signals.requested is not None else int(self.budget_used(budget))
        return {0: None, 1: "budget", 2: "signal"}[distributed.highest(wish, self.ranks)]

    def global_loss(self) -> float:
        """The epoch's summed training loss so far, over all ranks."""
        return distributed.sum_all(self.epoch_loss, self.ranks).item()

    # ---- validation --------------------------------------------------------------------
    def validate(self, model: torch.nn.Module | None = None) -> Validation:
        """Validation loss and greedy BLEU (decode.beam is for translate and eval) of the
        model being trained, or of `model` (the weights' average)."""
        greedy = replace(self.config.decode, beam=1)
        translator = Translator(model or self.model, self.src_tok, self.tgt_tok, greedy)
        data = self.data
        result = None
        if self.ranks.main:
            result = validate(translator, data.valid, data.bleu_src, data.bleu_refs, self.autocast)
        result = distributed.from_main(result, self.ranks)
        self.model.train()
        self.check_finite(result.loss)
        return result
