"""The teacher of word-level distillation (`train.teacher`; Kim & Rush 2016): a trained
model, frozen, whose distribution over each next token the model learns besides the
references (model/loss.py's `distilled_loss`). Sequence-level distillation (`translator
distill`) teaches the teacher's best translations; this teaches what it thought of every
token at every position, at the cost of its forward pass on each batch.

The teacher may have another shape (a deeper or wider model) but must read and write the
data's token ids: the data must have been prepared with its tokenizers, as for
`train.init_from`, or one error line says which differ."""

from __future__ import annotations

import torch

from translator.config import Config, from_dict
from translator.model import checkpoint
from translator.model.rundir import checkpoint_in
from translator.model.transformer import Transformer
from translator.training.resume import require_its_tokenizers


def load_teacher(config: Config, vocab: tuple[int, int], device: torch.device) -> Transformer:
    """train.teacher's model (a checkpoint, or a run directory's model: train.final) on `device`, in
    eval mode and without gradients."""
    path = checkpoint_in(config.train.teacher)
    payload = checkpoint.load(path)
    require_its_tokenizers(payload, path, config.data.dir, "distil from", "teacher")
    teacher = Transformer(from_dict(payload["config"]).model, *vocab)
    teacher.load_state_dict(payload["model"])
    return teacher.requires_grad_(False).eval().to(device)
