"""`translator train`: one training run, from its start (or `--resume`) to its stop.

    prepared ids → Trainer.fit(): for each epoch, a seeded order of batches; for each update
    (`train.update_freq` batches: label-smoothed cross-entropy over their target tokens,
    AdamW, clipping): step, log, save when due, stop when asked → at the epoch's end:
    validation loss and greedy BLEU, the learning-rate schedule, early stopping,
    best.pt / the epoch snapshot / last.pt / metrics.tsv

A run stops (StopReason) at `train.max_epochs`, when validation BLEU has not improved for
`train.patience` epochs, at `train.max_updates` or the time budget (`train.max_minutes`,
counting earlier sessions of a resumed run), or on SIGINT/SIGTERM. The whole state, the
position in the epoch's batch order and every random generator included, is saved every
`train.save_every` updates, at every stop and every epoch end, so `--resume` continues
exactly where the run stopped, mid-epoch too. A NaN/inf loss stops training before
anything is saved, so the last checkpoint on disk stays good.

The Trainer owns the model, optimiser, schedule and training state. What it leans on takes
explicit inputs and knows nothing of it: the state and random generators (state.py), what
last.pt holds (resume.py), the schedule, the optimiser, torchrun (distributed.py), the
out-of-memory guard (oom.py), the precision a step computes in and the static shapes it
implies (mixed_precision.py), the compiled step (compiled.py), the teacher of word-level
distillation (word_distillation.py) and TensorBoard (tensorboard.py).
"""

from __future__ import annotations

import logging
import math
import time
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any, NamedTuple

import torch
from tqdm import tqdm

from translator.config import Config
from translator.data.batching import Batch, epoch_order
from translator.data.dataset import Batches, load_training_data
from translator.data.tokenizer import load_tokenizer
from translator.errors import UserError
from translator.evaluation.validation import Validation, validate
from translator.inference.text import Translator
from translator.inference.torch_engine import TorchEngine
from translator.model.ema import WeightEMA
from translator.model.flops import count_parameters
from translator.model.loss import distilled_loss, rdrop_loss, sequence_loss, twice
from translator.model.rundir import Final, RunDir, checkpoint_in
from translator.model.transformer import Transformer
from translator.runtime import StopSignals, pick_device
from translator.training import distributed, mixed_precision
from translator.training.compiled import compiled
from translator.training.distributed import Ranks
from translator.training.graphs import (
    WARMUP,
    GraphedSteps,
    cuda_graph_recorder,
    uses_cuda_graphs,
)
from translator.training.oom import MemoryGuard
from translator.training.optimizer import build_optimizer
from translator.training.resume import (
    check_resumable,
    initial_weights,
    load_training_state,
    training_payload,
)
from translator.training.schedule import LRSchedule
from translator.training.state import (
    EPOCH,
    WINDOW,
    DeviceSums,
    TrainState,
    random_state,
    seed_everything,
    set_random_state,
)
from translator.training.tensorboard import Board
from translator.training.word_distillation import load_teacher

log = logging.getLogger("translator.training")


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


class StepOutput(NamedTuple):
    """What one update leaves on the device: its summed loss, and its gradients' norm
    before clipping (what `clip_grad_norm_` returns)."""

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
    """A new run in `train.run_dir` (or the one there continued, `resume`), trained until
    it stops; a new run with `train.init_from` starts from that model's weights."""
    try:  # the Trainer joins torchrun's process groups: they are left whatever happens
        trainer = Trainer(config, progress, resume)
        trainer.open_run(resume, overwrite)
        result = trainer.fit()
        distributed.wait_for_all(trainer.ranks)
        return result
    finally:
        distributed.finish()


def resolve(config: Config, device: torch.device, ranks: Ranks, resume: bool = False) -> Config:
    """The run's config with what is decided at run time written in, before anything is
    built: train.precision the one it computes in (auto resolved on `device`, rank 0's
    choice for all), train.pad_to_multiple the multiple its lengths are padded to, and, for
    a new run, train.init_from the checkpoint file itself (a run directory stands for its
    model, train.final). This is what config.json and every checkpoint record."""
    train_cfg = config.train
    chosen = distributed.from_main(mixed_precision.resolve(train_cfg.precision, device), ranks)
    init_from = train_cfg.init_from
    if init_from and not resume:
        init_from = str(checkpoint_in(init_from))
    train_cfg = replace(
        train_cfg,
        precision=chosen,
        pad_to_multiple=mixed_precision.pad_multiple(train_cfg.pad_to_multiple, chosen, device),
        init_from=init_from,
    )
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
        graphed = uses_cuda_graphs(train_cfg, self.device, self.ranks.world)
        # a step recorded as a CUDA graph must not keep autocast's cached weight copies
        self.autocast = mixed_precision.autocast(self.precision, self.device, cache=not graphed)
        seed_everything(train_cfg.seed)
        self.data = load_training_data(config)
        self.src_tok = load_tokenizer(self.data.tokenizer_models["src"])
        self.tgt_tok = load_tokenizer(self.data.tokenizer_models["tgt"])
        vocab = (self.src_tok.get_piece_size(), self.tgt_tok.get_piece_size())
        self.model = Transformer(config.model, *vocab).to(self.device)
        self.teacher = load_teacher(config, vocab, self.device) if train_cfg.teacher else None
        replicated = self.model
        if self.ranks.active:  # parameters start as rank 0's; dropout differs per rank
            ids = [self.device.index] if self.device.type == "cuda" else None
            replicated = torch.nn.parallel.DistributedDataParallel(
                self.model,
                device_ids=ids,
                broadcast_buffers=False,  # buffers: constant tables
            )
            torch.manual_seed(train_cfg.seed + self.ranks.rank)
            log.setLevel(logging.INFO if self.ranks.main else logging.WARNING)  # all of training/
        self.replicated = replicated
        # decoding for validation: bf16 on CUDA only (on the CPU it did not pay)
        cuda = self.device.type == "cuda"
        self.decode_autocast = self.autocast if cuda else nullcontext()
        # what `step` calls for each batch: forward and loss (the model under DDP:
        # replicated), compiled whole with train.compile, backward included; it shares the
        # model's parameters, and checkpoints save the model
        self.compiled_loss = compiled(self.loss, train_cfg, self.data.train.distinct_shapes())
        self.graphed: GraphedSteps | None = None  # train.cuda_graphs (graphs.py)
        if graphed:
            recorder = cuda_graph_recorder(self.device)
            params = list(self.model.parameters())
            self.graphed = GraphedSteps(self._forward_backward, params, self.device, recorder)
        self.optimizer = build_optimizer(self.model, train_cfg)
        self.schedule = LRSchedule(self.optimizer, train_cfg)
        self.ema = WeightEMA(self.model, train_cfg.ema) if train_cfg.ema else None
        self.state = TrainState()
        self.sums = DeviceSums(self.state, self.device)  # the loss and gradient norm: no sync
        self.budget_s = train_cfg.max_minutes * 60 if train_cfg.max_minutes > 0 else math.inf
        self.session_start = time.monotonic()  # fit() starts the clock again
        self.session_elapsed = 0.0  # state.elapsed when this session began
        self.signals = StopSignals()
        self.memory = MemoryGuard(self.ranks, self.device, train_cfg.max_tokens)

    # ---- the run -----------------------------------------------------------------------
    def open_run(self, resume: bool, overwrite: bool) -> None:
        """Make the run directory ready, then continue last.pt (`resume`) or start from
        train.init_from's weights (fine-tuning) or from the initialised model."""
        init_from = self.config.train.init_from
        weights = initial_weights(self.config) if init_from and not resume else None
        self.run_dir.check(resume, overwrite)
        if self.ranks.main:
            self.run_dir.start(self.config.to_dict(), resume)
        distributed.from_main(None, self.ranks)  # the others wait for the directory
        if resume:
            self._restore()
        elif weights is not None:
            self._start_from(weights)
            log.info(
                "weights from %s; optimiser, schedule and counters start fresh",
                self.config.train.init_from,
            )

    def fit(self) -> TrainResult:
        """Train epochs until a stop. SIGINT/SIGTERM ask to stop after the current update:
        the state is saved and Interrupted raised."""
        self._log_start()
        self.session_start = time.monotonic()
        history: list[dict] = []
        batches = len(self.data.train)  # then each epoch's: weighted corpora draw anew
        tensorboard = self.config.train.tensorboard and self.ranks.main
        with self.signals, Board(self.run_dir.path, tensorboard) as board:
            while (stop := self.stop_reason()) is None:
                plan, updates = self.start_epoch()
                batches = len(plan)
                with self._progress_bar(batches) as bar:
                    for group in updates:
                        self.update(plan, group)
                        bar.update(len(group))
                        self._log_update(bar, board)
                        self._save_when_due()
                        if self.state.position < len(plan) and (stop := self.stop_reason(True)):
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

    def _log_start(self) -> None:
        data, train_cfg = self.data, self.config.train
        log.info("precision %s (%s)", self.precision, self.precision_reason)
        if self.ranks.main and (
            slow := mixed_precision.slow_bf16_warning(self.precision, self.device)
        ):
            log.warning(slow)
        if train_cfg.pad_to_multiple > 1:
            log.info(
                "static shapes: lengths padded to multiples of %d, %d batch shapes, %.1f%% of "
                "the token positions padding (train.pad_to_multiple)",
                train_cfg.pad_to_multiple,
                data.train.distinct_shapes(),
                100 * data.train.padding(),
            )
        if train_cfg.cuda_graphs:
            log.info(
                "CUDA graphs: %s (train.cuda_graphs)",
                f"each batch shape's step recorded after {WARMUP} eager batches"
                if self.graphed
                else "off, as they need CUDA in one process",
            )
        log.info(
            "model: %s parameters; %d training pairs in %d batches (%d dropped as longer "
            "than %d tokens); device %s",
            f"{count_parameters(self.model):,}",
            data.train_pairs,
            len(data.train),
            data.dropped,
            self.config.model.max_positions,
            self.device,
        )
        if self.teacher is not None:
            log.info(
                "word-level distillation from %s (%s parameters), weight %g (train.teacher)",
                train_cfg.teacher,
                f"{count_parameters(self.teacher):,}",
                train_cfg.teacher_weight,
            )

    # ---- stopping ----------------------------------------------------------------------
    def stop_reason(self, mid_epoch: bool = False) -> StopReason | None:
        """Whether the run stops now, and why. Between epochs: at train.max_epochs, after
        train.patience epochs without a better validation BLEU, or past the budget (time or
        train.max_updates; a new run makes one update first). Mid-epoch: on SIGINT/SIGTERM
        or past the budget. One decision for all ranks: the counters are shared, but each
        rank has its own clock and signals, so the highest wish wins."""
        train_cfg, state = self.config.train, self.state
        if not mid_epoch and state.epoch >= train_cfg.max_epochs:
            return StopReason.MAX_EPOCHS
        if not mid_epoch and state.bad_epochs >= train_cfg.patience:
            return StopReason.EARLY_STOPPING
        signalled = mid_epoch and self.signals.requested is not None
        over_budget = (mid_epoch or state.step > 0) and self._budget_used()
        decided = distributed.highest(2 if signalled else int(over_budget), self.ranks)
        if decided == 2:
            return StopReason.SIGNAL
        if decided == 1:
            return StopReason.MAX_UPDATES if self._updates_used() else StopReason.TIME_BUDGET
        return None

    def _updates_used(self) -> bool:
        """At train.max_updates (0: no limit)."""
        return 0 < self.config.train.max_updates <= self.state.step

    def _budget_used(self) -> bool:
        """Past the time budget or at train.max_updates."""
        return self._elapsed() > self.budget_s or self._updates_used()

    def _elapsed(self) -> float:
        """Seconds of the run so far, every session together."""
        return self.session_elapsed + time.monotonic() - self.session_start

    def _interrupt(self) -> None:
        """Save the exact state and the run's model so far, then stop with a line that says
        how to continue."""
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

    # ---- updates -----------------------------------------------------------------------
    def start_epoch(self) -> tuple[Batches, list[list[int]]]:
        """The epoch's batches (weighted corpora: this epoch's draw) and its updates left,
        from the saved position in its seeded order: each the next `train.update_freq`
        batches for each rank."""
        self.model.train()
        plan = self.data.train.epoch(self.state.epoch)
        order = epoch_order(len(plan), self.config.train.seed, self.state.epoch)
        per_update = self.config.train.update_freq * self.ranks.world
        starts = range(self.state.position, len(order), per_update)
        return plan, [order[start : start + per_update] for start in starts]

    def update(self, plan: Batches, group: list[int]) -> None:
        """One update over the batches `group` of `plan` as `fit` makes it: this rank's
        share of them stepped, or skipped if it runs out of memory (oom.py); the epoch's
        counters advanced."""
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
        """One optimiser update over `batches`: for each, forward, loss and backward; then
        clipping, AdamW's step and the weights' average (train.ema). The loss is normalised
        by the `tokens` of the whole update (all ranks'; default: these batches'), so an
        update over several batches is one over their tokens. `counted` False: a stand-in
        batch for a rank with no share of the update, its loss multiplied by 0, so the rank
        still joins the gradient all-reduce. Returns the summed loss and the gradient norm
        before clipping (of the all-reduced gradients under DDP: the same on every rank),
        left on the device (no sync)."""
        self.state.step += 1
        self.schedule.before_update(self.state.step)
        tokens = tokens or sum(b.n_tokens for b in batches)
        total = torch.zeros((), device=self.device)
        for j, batch in enumerate(batches):
            last = j == len(batches) - 1  # under DDP, gradients are all-reduced after the last
            with self.replicated.no_sync() if self.ranks.active and not last else nullcontext():
                if self.graphed:  # train.cuda_graphs: _forward_backward recorded, replayed
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
        """The summed training loss of one batch (model/loss.py), the forward pass in the
        run's precision; twice over with R-Drop (train.rdrop); against the teacher's
        distributions too with word-level distillation (train.teacher). What train.compile
        compiles (compiled.py)."""
        train_cfg = self.config.train
        inputs = (src, tgt_in, src_mask)
        with self.autocast:
            logits = self.replicated(*(twice(*inputs) if train_cfg.rdrop else inputs))
            if self.teacher is not None:
                with torch.no_grad():
                    teacher_logits = self.teacher(*inputs)
        if train_cfg.rdrop:
            return rdrop_loss(logits, tgt_out, train_cfg.label_smoothing, train_cfg.rdrop)
        if self.teacher is not None:
            return distilled_loss(
                logits, teacher_logits, tgt_out, train_cfg.label_smoothing, train_cfg.teacher_weight
            )
        return sequence_loss(logits, tgt_out, train_cfg.label_smoothing)

    def _forward_backward(
        self,
        src: torch.Tensor,
        tgt_in: torch.Tensor,
        src_mask: torch.Tensor,
        tgt_out: torch.Tensor,
        tokens: int | torch.Tensor,
        counted: bool = True,
    ) -> torch.Tensor:
        """One batch of `step`: forward and loss (`compiled_loss`), and backward, its
        gradients normalised by the update's `tokens`; what a CUDA graph records
        (graphs.py). Returns the batch's summed loss."""
        loss_sum = self.compiled_loss(src, tgt_in, src_mask, tgt_out)
        # DDP averages gradients over ranks: × world makes them the update's sum
        (loss_sum / tokens * self.ranks.world * counted).backward()
        return loss_sum

    def _progress_bar(self, batches: int) -> tqdm:
        return tqdm(
            total=batches,
            initial=self.state.position,
            desc=f"epoch {self.state.epoch + 1}",
            unit="batch",
            leave=False,
            disable=None if self.progress else True,
            dynamic_ncols=True,
        )

    def _log_update(self, bar: tqdm, board: Board) -> None:
        """Every train.log_every updates (and the first): the loss per target token and
        the mean gradient norm of the updates since the last log (the window, so that a
        spike shows), the learning rate and the epoch's tokens/s on the progress bar and
        TensorBoard, and the NaN check."""
        state, step = self.state, self.state.step
        if step % self.config.train.log_every == 0 or step == 1:
            self._read_sums()  # the one host-device sync, every log_every steps
            self._check_finite(state.epoch_loss, state.epoch_grad_norm)
            loss = state.window_loss / max(1, state.window_tokens)
            grad_norm = state.window_grad_norm / max(1, state.window_updates)
            tokens_per_s = state.epoch_tokens / max(state.epoch_seconds, 1e-9)
            bar.set_postfix(  # a dict: in this order (tqdm sorts keyword arguments)
                {
                    "loss": f"{loss:.3f}",
                    "grad_norm": f"{grad_norm:.3f}",
                    "lr": f"{self.schedule.lr:.2e}",
                    "tok_s": f"{tokens_per_s:.0f}",
                }
            )
            board.training(
                step, loss, grad_norm, state.window_grad_norm_max, self.schedule.lr, tokens_per_s
            )
            state.start_window()
            self.sums.zero(WINDOW)
        if step == 1:
            log.info("first update %.1f s after start-up began", time.perf_counter() - self.created)

    def _save_when_due(self) -> None:
        every = self.config.train.save_every
        if every and self.state.step % every == 0:
            self.save()

    def _read_sums(self) -> None:
        """The device's sums into the state (DeviceSums.into): the loss summed over all
        ranks. One host-device sync; collective, every rank calls it."""
        sums = distributed.sum_all(self.sums.shared(self.ranks.main), self.ranks)
        DeviceSums.into(self.state, sums)

    def _check_finite(self, loss: float, grad_norm: float = 0.0) -> None:
        """Stop with TrainingDiverged on a NaN/inf loss, or gradient norm (the update it
        came from has already made the weights NaN)."""
        if math.isfinite(loss) and math.isfinite(grad_norm):
            return
        what = f"loss is {loss}" if not math.isfinite(loss) else f"gradient norm is {grad_norm}"
        last = self.run_dir.last
        kept = f"the last good checkpoint is {last}" if last.exists() else "nothing was saved"
        raise TrainingDiverged(
            f"training diverged: {what} at epoch {self.state.epoch + 1}, step "
            f"{self.state.step}; {kept}. Try a lower train.lr or more train.warmup_steps"
        )

    # ---- the end of an epoch -----------------------------------------------------------
    def end_epoch(self, board: Board, stop: StopReason | None) -> dict:
        """The epoch's end, complete (`stop` None) or cut short by `stop`: validate, save,
        write the metrics; the epoch's row returned. A complete epoch also steps the schedule
        and early stopping's count; best.pt and the snapshot are written before last.pt, so
        a kill in between is redone from the previous last.pt with the same outcome. One cut
        short saves its exact state first and validates the weights as they are, leaving the
        state as if the cut had not happened, so a resumed run goes on identically. A signal
        saves and raises Interrupted instead."""
        if stop is StopReason.SIGNAL:
            self._interrupt()
        complete = stop is None
        saved = None if complete else self.save()
        result = self._validate()
        row = self._metrics_row(result, complete)
        average_best = self._validate_average(row)
        self._check_finite(row["train_loss"], row["grad_norm"])
        improved = self.state.improved_by(result.bleu, result.loss)
        if complete:
            self.state.finish_epoch(row, improved, average_best)
            self.sums.zero(EPOCH)
            self.schedule.after_epoch(result.loss, result.bleu, self.state.step)
        payload = saved or self._payload()
        rows = self.state.history if complete else [*self.state.history, row]
        if self.ranks.main:
            self._write_weights(payload, improved, row["epoch"], average_best)
            if complete:
                self.run_dir.save(payload)
            self.run_dir.write_metrics(rows)
        self._log_validation(board, row, result, improved)
        return row

    def _validate(self, model: torch.nn.Module | None = None) -> Validation:
        """Validation loss and greedy BLEU (decode.beam is for translate and eval) of the
        model being trained, or of `model` (the weights' average)."""
        greedy = replace(self.config.decode, beam=1)
        engine = TorchEngine(
            model or self.model, self.src_tok, self.tgt_tok, self.config.data.src_prefix
        )
        translator = Translator(engine, greedy)
        data = self.data
        result = None
        if self.ranks.main:
            result = validate(
                translator, data.valid, data.bleu_src, data.bleu_refs, self.decode_autocast
            )
        result = distributed.from_main(result, self.ranks)
        self.model.train()
        self._check_finite(result.loss)
        return result

    def _validate_average(self, row: dict) -> bool:
        """With train.ema, validate the weights' average too, into `row`'s ema_ columns;
        whether it beats the average's best validation BLEU so far."""
        if not self.ema:
            return False
        result = self._validate(self.ema.model)
        row["ema_valid_loss"], row["ema_valid_bleu"] = result.loss, result.bleu
        return result.bleu > self.state.best_ema_bleu

    def _metrics_row(self, result: Validation, complete: bool) -> dict:
        """The epoch's row of metrics.tsv (collective: it reads the sums)."""
        self._read_sums()
        state = self.state
        return {
            "epoch": state.epoch + 1,
            "complete": int(complete),
            "step": state.step,
            "lr": self.schedule.lr,
            "train_loss": state.epoch_loss / max(1, state.epoch_tokens),
            "grad_norm": state.epoch_grad_norm / max(1, state.epoch_updates),
            "grad_norm_max": state.epoch_grad_norm_max,
            "valid_loss": result.loss,
            "valid_bleu": result.bleu,
            "train_tokens_per_s": state.epoch_tokens / max(state.epoch_seconds, 1e-9),
            "skipped_batches": state.skipped,
            "minutes": self._elapsed() / 60,
        }

    def _write_weights(self, payload: dict, improved: bool, epoch: int, average_best: bool) -> None:
        if improved:
            self.run_dir.save_best(payload)
        if average_best:
            self.run_dir.save_ema(payload)
        if self.config.train.keep_last:
            self.run_dir.save_snapshot(payload, epoch, self.config.train.keep_last)

    def _log_validation(self, board: Board, row: dict, result: Validation, improved: bool) -> None:
        board.validation(self.state.step, result.loss, result.bleu)
        average = f", EMA {row['ema_valid_bleu']:.2f}" if "ema_valid_bleu" in row else ""
        log.info(
            "epoch %d%s: train loss %.3f, grad norm %.3f (max %.3f), valid loss %.3f, valid "
            "BLEU %.2f%s%s, %.0f tgt tok/s | %s → %s",
            row["epoch"],
            "" if row["complete"] else " (cut short)",
            row["train_loss"],
            row["grad_norm"],
            row["grad_norm_max"],
            result.loss,
            result.bleu,
            " (best)" if improved else "",
            average,
            row["train_tokens_per_s"],
            self.data.bleu_src[0],
            result.hypotheses[0],
        )

    # ---- checkpoints -------------------------------------------------------------------
    def _payload(self) -> dict:
        """Everything last.pt holds; the sums so far read into the state, the loss summed
        over all ranks (collective: every rank calls it)."""
        state = self.state
        self._read_sums()
        self._check_finite(state.epoch_loss, state.epoch_grad_norm)
        state.elapsed = self._elapsed()
        rng = distributed.gather(random_state(), self.ranks)  # one per rank
        return training_payload(
            self.config, self.data, self.model, self.optimizer, self.schedule, state, rng, self.ema
        ) | {"precision": self.precision}  # what the run trains in (train.precision auto: why)

    def save(self) -> dict:
        """last.pt, then metrics.tsv from the history it holds (rank 0 writes). Returns
        what was saved."""
        payload = self._payload()
        if self.ranks.main:
            self.run_dir.save(payload)
            self.run_dir.write_metrics(self.state.history)
        return payload

    def _restore(self) -> None:
        """Continue from last.pt exactly: weights, optimiser, schedule, counters, position
        and this rank's random state."""
        payload = self.run_dir.load()
        groups = len(self.optimizer.param_groups)
        tokenizers = self.data.tokenizer_models
        check_resumable(self.run_dir.last, payload, self.config, tokenizers, groups)
        self.state = load_training_state(payload, self.model, self.optimizer, self.schedule)
        trained_in = payload.get("precision")  # absent: saved before train.precision
        if trained_in and trained_in != self.precision:
            log.warning(
                "warning: %s was trained in %s; it continues in %s, so not exactly as it "
                "would have (set train.precision = %r to match)",
                self.run_dir.last,
                trained_in,
                self.precision,
                trained_in,
            )
        if self.ema and "ema" in payload:
            self.ema.load_state_dict(payload["ema"])
        elif self.ema:
            self.ema.restart()
            log.info("train.ema is new to this run: the average starts from the resumed weights")
        # the epoch's and the window's sums, counted once: on rank 0
        self.sums = DeviceSums(self.state, self.device, counted=self.ranks.main)
        self.session_elapsed = self.state.elapsed
        states = payload["rng"]
        set_random_state(states[self.ranks.rank % len(states)])
        if self.ranks.main:
            self.run_dir.write_metrics(self.state.history)  # drop rows after last.pt

    def _start_from(self, weights: dict) -> None:
        """Fine-tuning: these weights (and the average starting from them)."""
        self.model.load_state_dict(weights)
        if self.ema:
            self.ema.restart()
