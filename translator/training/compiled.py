"""`train.compile`: one batch's forward pass and loss compiled whole with torch.compile
(`fullgraph=True`: a graph break is an error, not a silent fallback to Python), and their
backward compiled with them by AOTAutograd.

With static shapes (`train.pad_to_multiple` > 1) the graph is specialised to each batch
shape, of which an epoch has a small menu (dataset.Batches), so it compiles once per
shape, and on CUDA it runs as CUDA graphs (`mode="reduce-overhead"`): one launch a step
instead of a thousand. Without them it compiles once with dynamic shapes.

Compiling once with dynamic shapes and recording a CUDA graph per shape would compile only
once, but in torch 2.11 on an H100 that process died with a segmentation fault (in both
6+6-layer GPU configs; scripts/gpu_profile.py's "levers", docs/performance.md), so CUDA
graphs keep to specialised graphs.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch._dynamo.config

from translator.config import TrainConfig

LossFunction = Callable[..., torch.Tensor]


def uses_cuda_graphs(train_cfg: TrainConfig, device: torch.device) -> bool:
    """CUDA graphs need static shapes, and one batch an update: with gradient accumulation
    (train.update_freq > 1) the next batch's replay would overwrite the gradients the
    first one left in the graphs' memory before they are summed."""
    return (
        train_cfg.compile
        and device.type == "cuda"
        and train_cfg.pad_to_multiple > 1
        and train_cfg.update_freq == 1
    )


def compiled(
    loss_of: LossFunction, train_cfg: TrainConfig, device: torch.device, shapes: int
) -> LossFunction:
    """`loss_of` compiled as train_cfg asks (itself with train.compile off); `shapes`:
    the distinct batch shapes of the first epoch, each compiled once when they are static
    (room for twice as many: an epoch of weighted corpora or sampled encodings meets a few
    others)."""
    if not train_cfg.compile:
        return loss_of
    static = train_cfg.pad_to_multiple > 1
    if static:  # one graph per shape: dynamo's default limit (8) would fall back to eager
        limit = max(torch._dynamo.config.recompile_limit, 2 * shapes)
        torch._dynamo.config.recompile_limit = limit
        torch._dynamo.config.accumulated_recompile_limit = max(
            torch._dynamo.config.accumulated_recompile_limit, 2 * limit
        )
    if not uses_cuda_graphs(train_cfg, device):
        return torch.compile(loss_of, fullgraph=True, dynamic=not static)
    step = torch.compile(loss_of, fullgraph=True, dynamic=False, mode="reduce-overhead")

    def graphed(*args: torch.Tensor) -> torch.Tensor:
        torch.compiler.cudagraph_mark_step_begin()  # the last update's outputs are spent
        return step(*args)

    return graphed
