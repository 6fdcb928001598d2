"""Surviving a CUDA out-of-memory error in a training update: the update's batches are
skipped with a warning and counted (metrics.tsv: skipped_batches); OOM_LIMIT updates in a
row stop training with advice. Under torchrun it stops at once, as the other ranks are
already waiting for this one's gradients."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import torch

from translator.data.batching import Batch
from translator.errors import UserError

if TYPE_CHECKING:
    from translator.train import Trainer

log = logging.getLogger("translator.train")
OUT_OF_MEMORY = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)
OOM_LIMIT = 3


def step_or_skip(
    trainer: Trainer, batches: list[Batch], tokens: int, counted: bool
) -> torch.Tensor:
    """`train_step`, except that running out of memory skips the batches with a warning
    (counted in metrics.tsv); OOM_LIMIT updates in a row stop training. Under torchrun
    it stops at once: the other ranks are already waiting for this one's gradients."""
    step = trainer.state.step
    try:
        loss = trainer.train_step(batches, tokens, counted)
    except OUT_OF_MEMORY:
        if trainer.ranks.active:
            raise UserError(
                f"out of memory on rank {trainer.ranks.rank}: lower train.max_tokens "
                f"(now {trainer.cfg.max_tokens}) or raise train.update_freq instead"
            ) from None
        trainer.optimizer.zero_grad(set_to_none=True)
        trainer.state.step = step  # the update did not happen
        trainer.state.skipped += len(batches)
        trainer.ooms_in_a_row += 1
        if trainer.device.type == "cuda":
            torch.cuda.empty_cache()
        log.warning("warning: out of memory at step %d: skipped", trainer.state.step + 1)
        if trainer.ooms_in_a_row >= OOM_LIMIT:
            raise UserError(
                f"out of memory {OOM_LIMIT} updates in a row: lower train.max_tokens "
                f"(now {trainer.cfg.max_tokens}) or raise train.update_freq instead"
            ) from None
        return torch.zeros((), device=trainer.device)
    trainer.ooms_in_a_row = 0
    return loss
