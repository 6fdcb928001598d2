"""An epoch's validation (greedy: decode.beam is for translate and eval), decoded on rank 0
and shared with every rank (evaluation/validation.py); and the epoch's row of metrics.tsv."""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import replace

import torch

from translator.config import Config
from translator.data.dataset import TrainData
from translator.evaluation.validation import Validation, validate
from translator.inference.text import Translator
from translator.inference.torch_engine import TorchEngine
from translator.training import distributed
from translator.training.state import TrainState


class Validator:
    """Validates a model on the run's validation split, as `validator(model)`."""

    def __init__(
        self,
        config: Config,
        data: TrainData,
        tokenizers: tuple,
        ranks: distributed.Ranks,
        autocast: AbstractContextManager,
    ):
        """`tokenizers`: source and target; `autocast`: what decoding runs under."""
        self.config, self.data, self.ranks, self.autocast = config, data, ranks, autocast
        self.tokenizers = tokenizers

    def __call__(self, model: torch.nn.Module) -> Validation:
        """`model`'s validation loss and greedy BLEU (collective: every rank calls it)."""
        engine = TorchEngine(model, *self.tokenizers, self.config.data.src_prefix)
        translator = Translator(engine, replace(self.config.decode, beam=1))
        data = self.data
        result = None
        if self.ranks.main:
            result = validate(translator, data.valid, data.bleu_src, data.bleu_refs, self.autocast)
        return distributed.from_main(result, self.ranks)


def metrics_row(
    state: TrainState, lr: float, result: Validation, complete: bool, seconds: float
) -> dict:
    """The epoch's row of metrics.tsv; `seconds` of the run so far."""
    return {
        "epoch": state.epoch + 1,
        "complete": int(complete),
        "step": state.step,
        "lr": lr,
        "train_loss": state.epoch_loss / max(1, state.epoch_tokens),
        "grad_norm": state.epoch_grad_norm / max(1, state.epoch_updates),
        "grad_norm_max": state.epoch_grad_norm_max,
        "valid_loss": result.loss,
        "valid_bleu": result.bleu,
        "train_tokens_per_s": state.epoch_tokens / max(state.epoch_seconds, 1e-9),
        "skipped_batches": state.skipped,
        "minutes": seconds / 60,
    }
