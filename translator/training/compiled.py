"""`train.compile`: one batch's forward pass and loss compiled whole with torch.compile
(`fullgraph=True`: a graph break is an error, not a silent fallback), backward included.
Static shapes (`train.pad_to_multiple` > 1) compile once per batch shape, else once with
dynamic shapes. Dropout draws from PyTorch's own generator (`fallback_random`): inductor's
fused random ops trained worse (docs/training.md#precision-static-shapes-and-the-compiled-step).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from translator.config import TrainConfig

LossFunction = Callable[..., torch.Tensor]


def compiled(loss_of: LossFunction, train_cfg: TrainConfig, shapes: int) -> LossFunction:
    """`loss_of` compiled as train_cfg asks; `shapes`: the first epoch's distinct batch
    shapes (room for twice as many: weighted corpora or sampled encodings meet others)."""
    if not train_cfg.compile:
        return loss_of
    import torch._dynamo.config  # here: it takes longer to import than the rest of training

    static = train_cfg.pad_to_multiple > 1
    if static:  # one graph per shape: dynamo's default limit (8) would fall back to eager
        limit = max(torch._dynamo.config.recompile_limit, 2 * shapes)
        torch._dynamo.config.recompile_limit = limit
        torch._dynamo.config.accumulated_recompile_limit = max(
            torch._dynamo.config.accumulated_recompile_limit, 2 * limit
        )
    options = {"fallback_random": True}
    return torch.compile(loss_of, fullgraph=True, dynamic=not static, options=options)
