"""`train.cuda_graphs`: one batch's forward pass, loss and backward recorded once per batch
shape as a CUDA graph and replayed, so the host launches one graph instead of a thousand
kernels (docs/performance.md#cuda-graphs-on-an-h100). The step is recorded as it runs
eagerly (or compiled), so the numbers are the same; a shape's first WARMUP batches run
eagerly, as lazy initialisation must happen outside a graph. The graphs add the gradients
into the parameters' own `.grad` tensors, which must stay allocated (the Trainer zeroes them
in place). All graphs share one memory pool, safe in any order only because each graph's
output is read before another runs. CUDA in one process only (DDP's hooks would be recorded).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import torch

from translator.data.batching import Batch

WARMUP = 2  # eager batches of a shape before its graph is recorded
MOST_GRAPHS = 256

# (src, tgt_in, src_mask, tgt_out, tokens) → the batch's summed loss, its gradients added
StepFunction = Callable[..., torch.Tensor]
# records a function of no arguments: (replay, the output tensor each replay writes)
Recorder = Callable[[Callable[[], torch.Tensor]], tuple[Callable[[], None], torch.Tensor]]


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
    """`step` over batches of any shape, each shape recorded as a graph (see the module)."""

    def __init__(self, step: StepFunction, params: list[torch.nn.Parameter], device: torch.device):
        self.step, self.params, self.device = step, params, device
        self.recorder = cuda_graph_recorder(device)
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
        return self.seen[key] > WARMUP and len(self.graphs) < MOST_GRAPHS

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
    """A host tensor in page-locked memory: a copy from it does not wait for the GPU."""
    return t.pin_memory() if t.device.type == "cpu" and torch.cuda.is_available() else t
