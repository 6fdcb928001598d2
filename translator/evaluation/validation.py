"""The validation pass of training: the loss over the valid split's batches and the greedy
BLEU of the model being trained on its validation sentences."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from translator.data.batching import Batch
from translator.evaluation.scoring import score
from translator.inference.text import Translator
from translator.model.loss import sequence_loss


@dataclass
class Validation:
    loss: float  # plain NLL per target token of the valid split
    bleu: float  # greedy BLEU on the validation sentences, against all their references
    hypotheses: list[str]


@torch.no_grad()
def validate(
    translator: Translator,
    batches: Sequence[Batch],
    sources: list[str],
    references: list[list[str]],
    autocast,
) -> Validation:
    """Loss over `batches` and BLEU on `sources` of the model `translator` holds."""
    model = translator.engine.model
    model.eval()
    device = next(model.parameters()).device
    total = torch.zeros((), device=device)
    tokens = 0
    for batch in batches:
        batch = batch.to(device)
        with autocast:
            logits = model(batch.src, batch.tgt_in, batch.src_mask)
        total += sequence_loss(logits, batch.tgt_out, smoothing=0.0)
        tokens += batch.n_tokens
    with autocast:
        hypotheses = translator.translate(sources, split=False, nbest=0)
    return Validation(total.item() / tokens, score(hypotheses, references).bleu, hypotheses)
