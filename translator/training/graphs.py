"""`train.cuda_graphs`: one batch's forward pass, loss and backward recorded once per batch
shape as a CUDA graph and replayed, so the host launches one graph for them instead of a
thousand kernels one by one (what that is worth: docs/performance.md#cuda-graphs-on-an-h100).

The step is recorded as it runs eagerly (compiled, with `train.compile`): no compile to
wait for, the same kernels and so the same numbers. For each batch shape:

    its first WARMUP batches   run eagerly (lazy initialisation happens outside a graph)
    the next                   records the graph, then replays it
    every later one            copies the batch into the graph's input tensors, replays

The graphs write the gradients into the parameters' own `.grad` tensors, adding to them,
so gradients must stay allocated between updates (the Trainer zeroes them in place rather
than setting them to None) and `train.update_freq` > 1 accumulates as it does eagerly.
Each graph's output, the batch's summed loss, is read before the next graph runs: all the
graphs share one memory pool, which is safe for replays in any order only because
nothing a graph leaves behind is read after another has run. Dropout draws from the CUDA
generator, which each replay advances as the eager step would.

The number of graphs is bounded by MOST_GRAPHS (batch shapes past it run eagerly): with
static shapes (`train.pad_to_multiple`) an epoch has a small menu of them; without, a
corpus of long sentences can have hundreds. CUDA graphs are used on CUDA only and without
torchrun (DDP's gradient hooks would run inside the graph).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import torch

from translator.config import TrainConfig
from translator.data.batching import Batch

WARMUP = 2  # eager batches of a shape before its graph is recorded
MOST_GRAPHS = 256

# (src, tgt_in, src_mask, tgt_out, tokens) → the batch's summed loss, its gradients added
StepFunction = Callable[..., torch.Tensor]
# records a function of no arguments: (replay, the output tensor each replay writes)
Recorder = Callable[[Callable[[], torch.Tensor]], tuple[Callable[[], None], torch.Tensor]]


def uses_cuda_graphs(train_cfg: TrainConfig, device: torch.device, world: int) -> bool:
    return train_cfg.cuda_graphs and device.type == "cuda" and world == 1


def cuda_graph_recorder(device: torch.device) -> Recorder:
    """Records on `device` into one memory pool shared by all the graphs it records."""
    pool = torch.cuda.graph_pool_handle()

    def record(run: Callable[[], torch.Tensor]) -> tuple[Callable[[], None], torch.Tensor]:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.device(device), torch.cuda.graph(graph, pool=pool):
            out = run()
        # detached: the recorded autograd graph would keep the parameters' gradient
        # accumulators alive on the recording stream, and eager steps would then wait on it
        return graph.replay, out.detach()

    return record


class GraphedSteps:
    """`step` over batches of any shape, each shape's run recorded as a graph after WARMUP
    eager runs (see the module). Call with a batch on the host and the update's tokens."""

    def __init__(
        self,
        step: StepFunction,
        params: list[torch.nn.Parameter],
        device: torch.device,
        recorder: Recorder,
        warmup: int = WARMUP,
        most: int = MOST_GRAPHS,
    ):
        self.step, self.params, self.device, self.recorder = step, params, device, recorder
        self.warmup, self.most = warmup, most
        self.graphs: dict[tuple, _Graph] = {}
        self.seen: Counter[tuple] = Counter()
        self.grads: list[torch.Tensor] = []

    def __call__(self, batch: Batch, tokens: int) -> torch.Tensor:
        key = (tuple(batch.src.shape), tuple(batch.tgt_in.shape))
        graph = self.graphs.get(key)
        if graph is None and self.due(key):
            self.keep_grads()
            graph = self.graphs[key] = _Graph(self.step, batch, self.device, self.recorder)
        if graph is None:
            on = batch.to(self.device, non_blocking=True)
            return self.step(on.src, on.tgt_in, on.src_mask, on.tgt_out, tokens)
        self.keep_grads()
        return graph.run(batch, tokens)

    def due(self, key: tuple) -> bool:
        """Whether a batch of shape `key` with no graph yet records one now."""
        self.seen[key] += 1
        return self.seen[key] > self.warmup and len(self.graphs) < self.most

    def keep_grads(self) -> None:
        """The gradient tensors the graphs write into, in place as each parameter's .grad:
        made (zeros) the first time, put back (zeroed) if something set them to None."""
        if not self.grads:
            for p in self.params:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
            self.grads = [p.grad for p in self.params]
        elif any(p.grad is not g for p, g in zip(self.params, self.grads, strict=True)):
            torch._foreach_zero_(self.grads)
            for p, g in zip(self.params, self.grads, strict=True):
                p.grad = g


class _Graph:
    """One batch shape's recorded step over its own input tensors on the device."""

    def __init__(self, step: StepFunction, batch: Batch, device: torch.device, record: Recorder):
        self.inputs = [t.to(device) for t in _fields(batch)]
        self.tokens = torch.ones((), device=device)
        self.replay, self.loss = record(lambda: step(*self.inputs, self.tokens))

    def run(self, batch: Batch, tokens: int) -> torch.Tensor:
        for static, new in zip(self.inputs, _fields(batch), strict=True):
            static.copy_(_pinned(new), non_blocking=True)
        self.tokens.fill_(tokens)
        self.replay()
        return self.loss


def _fields(batch: Batch) -> tuple[torch.Tensor, ...]:
    return batch.src, batch.tgt_in, batch.src_mask, batch.tgt_out


def _pinned(t: torch.Tensor) -> torch.Tensor:
    """A host tensor in page-locked memory, so that copying it to the GPU does not wait for
    the GPU to finish what it is doing (a copy from pageable memory does)."""
    return t.pin_memory() if t.device.type == "cpu" and torch.cuda.is_available() else t
