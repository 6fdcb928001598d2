"""What a training run shows as it goes: the lines at its start, the progress bar (and
TensorBoard's scalars) of the updates since the last log, and each epoch's validation line."""

from __future__ import annotations

import logging

import torch
from tqdm import tqdm

from translator.config import Config
from translator.data.dataset import TrainData
from translator.evaluation.validation import Validation
from translator.model.flops import count_parameters
from translator.training import mixed_precision
from translator.training.graphs import WARMUP
from translator.training.state import TrainState
from translator.training.tensorboard import Board

log = logging.getLogger(__name__)


def log_start(
    config: Config,
    data: TrainData,
    model: torch.nn.Module,
    device: torch.device,
    why_precision: str,
    graphed: bool,
    main: bool,
) -> None:
    """The lines a run starts with: precision, static shapes, CUDA graphs, model, data."""
    train_cfg = config.train
    log.info("precision %s (%s)", train_cfg.precision, why_precision)
    if main and (slow := mixed_precision.slow_bf16_warning(train_cfg.precision, device)):
        log.warning(slow)
    if train_cfg.pad_to_multiple > 1:
        log.info(
            f"static shapes: lengths padded to multiples of {train_cfg.pad_to_multiple}, "
            f"{data.train.distinct_shapes()} batch shapes, {100 * data.train.padding():.1f}% of "
            "the token positions padding (train.pad_to_multiple)"
        )
    if train_cfg.cuda_graphs:
        on = f"each batch shape's step recorded after {WARMUP} eager batches"
        off = "off, as they need CUDA in one process"
        log.info("CUDA graphs: %s (train.cuda_graphs)", on if graphed else off)
    log.info(
        f"model: {count_parameters(model):,} parameters; {data.train_pairs} training pairs in "
        f"{len(data.train)} batches ({data.dropped} dropped as longer than "
        f"{config.model.max_positions} tokens); device {device}"
    )


def progress_bar(state: TrainState, batches: int, shown: bool) -> tqdm:
    """The epoch's bar, from the batches already trained on (a resumed epoch's)."""
    return tqdm(
        total=batches,
        initial=state.position,
        desc=f"epoch {state.epoch + 1}",
        unit="batch",
        leave=False,
        disable=None if shown else True,
        dynamic_ncols=True,
    )


def show_window(bar: tqdm, board: Board, state: TrainState, lr: float) -> None:
    """The updates since the last log (so that a spike shows) on the bar and TensorBoard."""
    loss = state.window_loss / max(1, state.window_tokens)
    grad_norm = state.window_grad_norm / max(1, state.window_updates)
    tokens_per_s = state.epoch_tokens / max(state.epoch_seconds, 1e-9)
    postfix = {"loss": f"{loss:.3f}", "grad_norm": f"{grad_norm:.3f}", "lr": f"{lr:.2e}"}
    postfix["tok_s"] = f"{tokens_per_s:.0f}"
    bar.set_postfix(postfix)  # a dict: in this order (tqdm sorts keyword arguments)
    board.training(state.step, loss, grad_norm, state.window_grad_norm_max, lr, tokens_per_s)


def log_validation(
    board: Board, step: int, row: dict, result: Validation, improved: bool, source: str
) -> None:
    """An epoch's line and TensorBoard's validation scalars."""
    board.validation(step, result.loss, result.bleu)
    cut = "" if row["complete"] else " (cut short)"
    best = " (best)" if improved else ""
    average = f", EMA {row['ema_valid_bleu']:.2f}" if "ema_valid_bleu" in row else ""
    log.info(
        f"epoch {row['epoch']}{cut}: train loss {row['train_loss']:.3f}, grad norm "
        f"{row['grad_norm']:.3f} (max {row['grad_norm_max']:.3f}), valid loss {result.loss:.3f}, "
        f"valid BLEU {result.bleu:.2f}{best}{average}, {row['train_tokens_per_s']:.0f} tgt tok/s"
        f" | {source} → {result.hypotheses[0]}"
    )
