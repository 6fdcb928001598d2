"""`translator train`: prepared splits → trained Transformer in `train.run_dir`.

    encode splits once → token-budget batches → per epoch: shuffled batches,
    label-smoothed cross-entropy, AdamW, warm-up then ReduceLROnPlateau, clipping
    → validation loss + greedy BLEU → metrics.tsv row → checkpoints last.pt / best.pt

Stops at `max_epochs`, at the time budget, or when validation BLEU has not improved for
`patience` epochs. A NaN/inf loss stops training before anything is saved, so the last
checkpoint on disk stays good.
"""

from __future__ import annotations

import json
import logging
import math
import random
import shutil
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from translator import checkpoint
from translator.config import Config, from_dict
from translator.data.batching import Batch, shuffled
from translator.data.dataset import load_training_data
from translator.data.tokenizer import PAD, load_tokenizer
from translator.errors import UserError
from translator.evaluate import score
from translator.inference import Translator, pick_device
from translator.model import Transformer, count_parameters

log = logging.getLogger(__name__)


class TrainingDiverged(UserError):
    pass


def sequence_loss(logits: torch.Tensor, target: torch.Tensor, smoothing: float) -> torch.Tensor:
    """Summed label-smoothed cross-entropy over the non-PAD target positions.
    logits (B,T,V), target (B,T); divide by the number of real tokens for the mean."""
    return F.cross_entropy(
        logits.flatten(0, 1).float(),
        target.flatten(),
        ignore_index=PAD,
        label_smoothing=smoothing,
        reduction="sum",
    )


@dataclass
class TrainState:
    epoch: int = 0  # epochs completed
    step: int = 0  # optimiser updates made
    best_bleu: float = -1.0
    best_loss: float = math.inf  # validation loss at the best BLEU (breaks ties)
    bad_epochs: int = 0  # epochs since the best


@dataclass
class EpochStats:
    loss: float  # mean label-smoothed loss per target token
    tokens: int  # target tokens trained on
    seconds: float
    out_of_time: bool

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds


@dataclass
class TrainResult:
    run_dir: Path
    state: TrainState
    stop_reason: str
    history: list[dict] = field(default_factory=list)


class Trainer:
    def __init__(self, config: Config, device: torch.device, progress: bool = True):
        self.config = config
        self.cfg = config.train
        self.device = device
        self.progress = progress
        self.created = time.perf_counter()
        self.run_dir = Path(self.cfg.run_dir)
        self.ckpt_dir = checkpoint.checkpoint_dir(self.run_dir)
        torch.manual_seed(self.cfg.seed)
        random.seed(self.cfg.seed)
        self.data = load_training_data(config)
        self.src_tok = load_tokenizer(self.data.tokenizer_models["src"])
        self.tgt_tok = load_tokenizer(self.data.tokenizer_models["tgt"])
        self.model = Transformer(
            config.model, self.src_tok.get_piece_size(), self.tgt_tok.get_piece_size()
        ).to(device)
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(),
            lr=self.cfg.lr,
            betas=(0.9, 0.98),
            eps=1e-9,
            weight_decay=self.cfg.weight_decay,
            fused=True,  # one kernel for all parameters: 4.8x faster than the loop on CPU
        )
        self.plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(
            self.optimizer,
            factor=self.cfg.plateau_factor,
            patience=self.cfg.plateau_patience,
            min_lr=self.cfg.min_lr,
        )
        self.state = TrainState()
        # the compiled module shares the model's parameters; checkpoints save the model
        self.forward = torch.compile(self.model, dynamic=True) if self.cfg.compile else self.model
        self.autocast = (
            torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else nullcontext()
        )

    # ---- checkpoints -------------------------------------------------------------------
    def payload(self) -> dict:
        return {
            "config": self.config.to_dict(),
            "tokenizers": self.data.tokenizer_paths,
            "tokenizer_models": self.data.tokenizer_models,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.plateau.state_dict(),
            "train_state": asdict(self.state),
            "rng": {"torch": torch.get_rng_state(), "python": random.getstate()},
        }

    def restore(self) -> None:
        path = self.ckpt_dir / "last.pt"
        payload = checkpoint.load(path)
        saved = from_dict(payload["config"])
        if saved.model != self.config.model:
            raise UserError(
                f"cannot resume {path}: the config's [model] section differs from "
                "the one it was trained with"
            )
        if payload["tokenizer_models"] != self.data.tokenizer_models:
            raise UserError(
                f"cannot resume {path}: the tokenizers in {self.config.data.dir} "
                "differ from the ones it was trained with (was prepare re-run?)"
            )
        self.model.load_state_dict(payload["model"])
        self.optimizer.load_state_dict(payload["optimizer"])
        self.plateau.load_state_dict(payload["scheduler"])
        self.state = TrainState(**payload["train_state"])
        torch.set_rng_state(payload["rng"]["torch"])
        random.setstate(payload["rng"]["python"])

    def start_fresh(self, overwrite: bool) -> None:
        if (self.ckpt_dir / "last.pt").exists() and not overwrite:
            raise UserError(
                f"{self.run_dir} already holds a trained model: pass --resume to "
                "continue it or --overwrite to start again"
            )
        shutil.rmtree(self.ckpt_dir, ignore_errors=True)
        (self.run_dir / "metrics.tsv").unlink(missing_ok=True)

    def save(self, improved: bool) -> None:
        last = self.ckpt_dir / "last.pt"
        payload = self.payload()
        checkpoint.save(payload, last)
        if improved:
            checkpoint.copy(last, self.ckpt_dir / "best.pt")
        if self.cfg.keep_last:
            checkpoint.save_snapshot(payload, self.ckpt_dir, self.state.epoch, self.cfg.keep_last)

    # ---- one epoch ---------------------------------------------------------------------
    def set_warmup_lr(self) -> None:
        if self.state.step <= self.cfg.warmup_steps:
            lr = self.cfg.lr * self.state.step / max(1, self.cfg.warmup_steps)
            for group in self.optimizer.param_groups:
                group["lr"] = lr

    def lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    def check_finite(self, loss: float) -> None:
        if not math.isfinite(loss):
            last = self.ckpt_dir / "last.pt"
            kept = (
                f"the last good checkpoint is {last} (epoch {self.state.epoch})"
                if last.exists()
                else "no checkpoint was written"
            )
            raise TrainingDiverged(
                f"training diverged: loss is {loss} at epoch {self.state.epoch + 1}, step "
                f"{self.state.step}; {kept}. Try a lower train.lr or more train.warmup_steps"
            )

    def train_step(self, batch: Batch) -> torch.Tensor:
        """One optimiser update. Returns the summed loss, left on the device (no sync)."""
        self.state.step += 1
        self.set_warmup_lr()
        with self.autocast:
            logits = self.forward(batch.src, batch.tgt_in, batch.src_mask)
        loss_sum = sequence_loss(logits, batch.tgt_out, self.cfg.label_smoothing)
        (loss_sum / batch.n_tokens).backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.clip_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss_sum.detach()

    def train_epoch(self, deadline: float) -> EpochStats:
        """One pass over the shuffled batches, cut short at `deadline` (time.monotonic)."""
        self.model.train()
        batches = shuffled(self.data.train, self.cfg.seed, self.state.epoch)
        total = len(self.data.train)
        pin = self.device.type == "cuda"
        total_loss = torch.zeros((), device=self.device)  # summed on the device: no sync per step
        total_tokens = logged_tokens = 0
        logged_loss = 0.0
        out_of_time = False
        start = time.perf_counter()
        bar = tqdm(
            batches,
            total=total,
            desc=f"epoch {self.state.epoch + 1}",
            unit="batch",
            leave=False,
            disable=None if self.progress else True,
            dynamic_ncols=True,
        )
        for i, batch in enumerate(bar, start=1):
            batch = batch.pin_memory() if pin else batch
            total_loss += self.train_step(batch.to(self.device, non_blocking=True))
            total_tokens += batch.n_tokens
            if self.state.step == 1:
                self.log_startup()
            out_of_time = time.monotonic() > deadline
            if i % self.cfg.log_every == 0 or i == total or out_of_time:
                seen = total_loss.item()  # the one host-device sync, every log_every steps
                self.check_finite(seen)
                bar.set_postfix(
                    loss=f"{(seen - logged_loss) / (total_tokens - logged_tokens):.3f}",
                    lr=f"{self.lr():.2e}",
                    tok_s=f"{total_tokens / (time.perf_counter() - start):.0f}",
                )
                logged_loss, logged_tokens = seen, total_tokens
            if out_of_time:
                break
        bar.close()
        return EpochStats(
            logged_loss / max(1, total_tokens),
            total_tokens,
            time.perf_counter() - start,
            out_of_time,
        )

    def log_startup(self) -> None:
        """The time from creating the trainer (loading data, building the model) to the end
        of the first update: what a user waits before training really starts."""
        seconds = time.perf_counter() - self.created
        log.info("first update done %.1f s after start-up began", seconds)

    @torch.no_grad()
    def validate(self) -> tuple[float, float, list[str]]:
        """Validation loss (plain NLL per target token) and greedy BLEU on the sample."""
        self.model.eval()
        total = torch.zeros((), device=self.device)
        tokens = 0
        for batch in self.data.valid:
            batch = batch.to(self.device)
            with self.autocast:
                logits = self.model(batch.src, batch.tgt_in, batch.src_mask)
            total += sequence_loss(logits, batch.tgt_out, smoothing=0.0)
            tokens += batch.n_tokens
        greedy = replace(self.config.decode, beam=1)  # decode.beam is for translate and eval
        translator = Translator(self.model, self.src_tok, self.tgt_tok, greedy)
        with self.autocast:
            hyps = translator.translate(self.data.bleu_src)
        self.model.train()
        return total.item() / tokens, score(hyps, self.data.bleu_refs).bleu, hyps

    # ---- the whole run -----------------------------------------------------------------
    def run(self, max_minutes: float) -> TrainResult:
        deadline = time.monotonic() + max_minutes * 60 if max_minutes > 0 else math.inf
        self.run_dir.mkdir(parents=True, exist_ok=True)
        config_json = json.dumps(self.config.to_dict(), indent=2) + "\n"
        (self.run_dir / "config.json").write_text(config_json)
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
        reason = f"reached train.max_epochs ({self.cfg.max_epochs})"
        while self.state.epoch < self.cfg.max_epochs:
            if self.state.bad_epochs >= self.cfg.patience:
                reason = f"early stopping: no better validation BLEU in {self.cfg.patience} epochs"
                break
            started = time.perf_counter()
            epoch = self.train_epoch(deadline)
            history.append(self.end_of_epoch(epoch, started))
            if epoch.out_of_time or time.monotonic() > deadline:  # validation may use the rest
                reason = f"time budget of {max_minutes:g} minutes used"
                break
        return TrainResult(self.run_dir, self.state, reason, history)

    def end_of_epoch(self, epoch: EpochStats, started: float) -> dict:
        """Validate, step the plateau schedule, save checkpoints, record and log the epoch."""
        valid_loss, bleu, hyps = self.validate()
        self.check_finite(valid_loss)
        self.state.epoch += 1
        if self.state.step >= self.cfg.warmup_steps:
            self.plateau.step(valid_loss)
        improved = (bleu, -valid_loss) > (self.state.best_bleu, -self.state.best_loss)
        if improved:
            self.state.best_bleu, self.state.best_loss = bleu, valid_loss
            self.state.bad_epochs = 0
        else:
            self.state.bad_epochs += 1
        self.save(improved)
        row = {
            "epoch": self.state.epoch,
            "step": self.state.step,
            "lr": self.lr(),
            "train_loss": epoch.loss,
            "valid_loss": valid_loss,
            "valid_bleu": bleu,
            "train_tokens_per_s": epoch.tokens_per_s,
            "epoch_minutes": (time.perf_counter() - started) / 60,
        }
        self.append_metrics(row)
        log.info(
            "epoch %d: train loss %.3f, valid loss %.3f, valid BLEU %.2f%s, %.0f tgt tok/s"
            " | %s → %s",
            row["epoch"],
            epoch.loss,
            valid_loss,
            bleu,
            " (best)" if improved else "",
            epoch.tokens_per_s,
            self.data.bleu_src[0],
            hyps[0],
        )
        return row

    def append_metrics(self, row: dict) -> None:
        path = self.run_dir / "metrics.tsv"
        new = not path.exists()
        with path.open("a", encoding="utf-8") as f:
            if new:
                f.write("\t".join(row) + "\n")
            f.write(
                "\t".join(f"{v:.6g}" if isinstance(v, float) else str(v) for v in row.values())
                + "\n"
            )


def train(
    config: Config,
    resume: bool = False,
    overwrite: bool = False,
    device: str | None = None,
    max_minutes: float | None = None,
    progress: bool = True,
) -> TrainResult:
    trainer = Trainer(config, pick_device(device or config.train.device), progress)
    if resume:
        trainer.restore()
    else:
        trainer.start_fresh(overwrite)
    budget = config.train.max_minutes if max_minutes is None else max_minutes
    return trainer.run(budget)
