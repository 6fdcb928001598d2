"""Surviving a CUDA out-of-memory error in a training update: its batches are skipped with a
warning and counted (skipped_batches); OOM_LIMIT updates in a row stop training with advice.
Under torchrun it stops at once: the other ranks already wait for this one's gradients."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from translator.errors import UserError
from translator.training.distributed import Ranks
from translator.training.state import TrainState

log = logging.getLogger(__name__)
OUT_OF_MEMORY = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)
OOM_LIMIT = 3


class MemoryGuard:
    """Runs updates; one that runs out of memory is undone and skipped (see the module)."""

    def __init__(self, ranks: Ranks, device: torch.device, max_tokens: int):
        self.ranks, self.device, self.max_tokens = ranks, device, max_tokens
        self.in_a_row = 0  # updates that ran out of memory, one after another

    @contextmanager
    def skipped_if_out_of_memory(
        self, optimizer: torch.optim.Optimizer, state: TrainState, batches: int
    ) -> Iterator[None]:
        """Runs the block, an update; out of memory, it did not happen: gradients cleared,
        the step count restored, `batches` counted as skipped."""
        step = state.step
        try:
            yield
        except OUT_OF_MEMORY:
            if self.ranks.active:
                raise UserError(f"out of memory on rank {self.ranks.rank}: {self.advice}") from None
            optimizer.zero_grad(set_to_none=True)
            state.step = step
            state.skipped += batches
            self.in_a_row += 1
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
            log.warning("warning: out of memory at step %d: skipped", state.step + 1)
            if self.in_a_row >= OOM_LIMIT:
                raise UserError(
                    f"out of memory {OOM_LIMIT} updates in a row: {self.advice}"
                ) from None
            return
        self.in_a_row = 0

    @property
    def advice(self) -> str:
        return f"lower train.max_tokens (now {self.max_tokens}) or raise train.update_freq instead"
