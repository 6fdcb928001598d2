"""`train.compile`: one batch's forward pass and loss compiled whole with torch.compile
(`fullgraph=True`: a graph break is an error, not a silent fallback to Python), and their
backward compiled with them by AOTAutograd.

With static shapes (`train.pad_to_multiple` > 1) the graph is specialised to each batch
shape, of which an epoch has a small menu (dataset.Batches), so it compiles once per
shape; without them it compiles once with dynamic shapes. Random numbers (dropout) come from
PyTorch's own generator, as in eager (inductor's `fallback_random`): inductor's fused
random ops trained worse than eager with dropout in both the residual paths and attention
(docs/training.md). CUDA graphs are apart
(`train.cuda_graphs`, graphs.py): they record the compiled step as they record the eager
one. (torch.compile's own CUDA graphs, `mode="reduce-overhead"`, are not used: why, in
docs/training.md#precision-static-shapes-and-the-compiled-step.)
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from translator.config import TrainConfig

LossFunction = Callable[..., torch.Tensor]


def compiled(loss_of: LossFunction, train_cfg: TrainConfig, shapes: int) -> LossFunction:
    """`loss_of` compiled as train_cfg asks (itself with train.compile off); `shapes`:
    the distinct batch shapes of the first epoch, each compiled once when they are static
    (room for twice as many: an epoch of weighted corpora or sampled encodings meets a few
    others)."""
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
