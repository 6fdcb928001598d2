"""The training objective: label-smoothed cross-entropy summed over the real target tokens
(PAD positions ignored); the caller divides by the token count it normalises over (one
batch, the batches of one update, or all ranks' batches of one update).

With R-Drop (Liang et al. 2021, `train.rdrop`; fairseq's examples/rdrop), each batch runs
through the model twice in one forward pass (its rows stacked on themselves, so each copy
draws its own dropout masks), and the objective is the two copies' mean cross-entropy plus
alpha times the symmetric KL divergence between their output distributions, per token.

With word-level distillation (Kim & Rush 2016, `train.teacher`), a trained teacher's
output distribution at each target position is a second target: (1 − w) times the
cross-entropy plus w times KL(teacher ‖ model), per token."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from translator.data.tokenizer import PAD


def sequence_loss(logits: torch.Tensor, target: torch.Tensor, smoothing: float) -> torch.Tensor:
    """logits (B,T,V), target (B,T) → the summed loss (a scalar, float32)."""
    return F.cross_entropy(
        logits.flatten(0, 1).float(),
        target.flatten(),
        ignore_index=PAD,
        label_smoothing=smoothing,
        reduction="sum",
    )


def twice(*inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Each (B, …) input stacked on itself → (2B, …): one forward pass, two dropout draws."""
    return tuple(torch.cat([x, x]) for x in inputs)


def rdrop_loss(
    logits: torch.Tensor, target: torch.Tensor, smoothing: float, alpha: float
) -> torch.Tensor:
    """logits (2B,T,V) of a batch run `twice`, target (B,T) → the summed R-Drop objective
    per copy: (CE₁ + CE₂)/2 + alpha · (KL(p₁‖p₂) + KL(p₂‖p₁))/2 over the real tokens."""
    first, second = logits.float().chunk(2)
    cross_entropy = sequence_loss(logits, torch.cat([target, target]), smoothing) / 2
    lp1, lp2 = first.log_softmax(-1), second.log_softmax(-1)
    # KL(p1‖p2) + KL(p2‖p1) = Σ (p1 − p2)(log p1 − log p2), per position
    symmetric = ((lp1.exp() - lp2.exp()) * (lp1 - lp2)).sum(-1)
    return cross_entropy + alpha * symmetric.masked_fill(target == PAD, 0.0).sum() / 2


def distilled_loss(
    logits: torch.Tensor,
    teacher_logits: torch.Tensor,
    target: torch.Tensor,
    smoothing: float,
    weight: float,
) -> torch.Tensor:
    """logits and the teacher's (B,T,V) for target (B,T) → the summed objective:
    (1 − weight) · CE + weight · KL(p_teacher ‖ p_model), over the real tokens."""
    cross_entropy = sequence_loss(logits, target, smoothing)
    teacher_lp = teacher_logits.float().log_softmax(-1)
    kl = (teacher_lp.exp() * (teacher_lp - logits.float().log_softmax(-1))).sum(-1)
    return (1 - weight) * cross_entropy + weight * kl.masked_fill(target == PAD, 0.0).sum()
