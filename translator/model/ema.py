"""An exponential moving average of a model's weights (`train.ema`): after every update,
ema ← decay × ema + (1 − decay) × weights, starting from the weights training starts with.

torch.optim.swa_utils.AveragedModel computes the same, but asks the device whether it has
averaged yet at every update, a host-device sync per step on a GPU; this is one foreach
lerp without it.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn


def _floats(model: nn.Module) -> list[torch.Tensor]:
    """The model's floating-point parameters and buffers, a tied parameter once."""
    return [t.detach() for t in [*model.parameters(), *model.buffers()] if t.is_floating_point()]


class WeightEMA:
    def __init__(self, model: nn.Module, decay: float):
        self.decay = decay
        self.source = _floats(model)  # updated in place by the optimiser: read each step
        self.model = copy.deepcopy(model).eval().requires_grad_(False)
        self.averaged = _floats(self.model)

    @torch.no_grad()
    def update(self) -> None:
        torch._foreach_lerp_(self.averaged, self.source, 1 - self.decay)

    @torch.no_grad()
    def restart(self) -> None:
        """Start the average again from the model's weights as they are now."""
        torch._foreach_copy_(self.averaged, self.source)

    def state_dict(self) -> dict[str, Any]:
        return self.model.state_dict()

    def load_state_dict(self, weights: dict[str, Any]) -> None:
        self.model.load_state_dict(weights)
