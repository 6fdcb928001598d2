"""The measures of a training step the benchmarks share: the matrix-multiply peak MFU is
reported against, model FLOPs per target token, the Trainer's own updates timed, and the
same updates' losses in bf16 and fp32."""

from __future__ import annotations

import time

import numpy as np
import torch
from common import with_values

from translator import config as config_module
from translator.data.batching import epoch_order
from translator.data.tokenizer import PAD
from translator.model.flops import forward_flops
from translator.training import graphs
from translator.training.trainer import Trainer


def sync() -> None:
    """Wait for the GPU, so that a timer read next includes its work."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def matmul_peak(
    device: torch.device | str, dtype: torch.dtype | None = None, seconds: float = 2.0
) -> tuple[float, str]:
    """The FLOP/s of a square matrix multiply, the peak MFU is reported against: fp32 2048³
    on the CPU, bf16 8192³ on CUDA (or `dtype` at that size); at least 5 runs and
    `seconds` after a warm-up."""
    cuda = torch.device(device).type == "cuda"
    n, dtype = (8192, dtype or torch.bfloat16) if cuda else (2048, dtype or torch.float32)
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    for _ in range(2):
        a @ b
    sync()
    runs, start = 0, time.perf_counter()
    while runs < 5 or time.perf_counter() - start < seconds:
        a @ b
        runs += 1
        sync()
    return 2 * n**3 * runs / (time.perf_counter() - start), f"{str(dtype)[6:]} {n}³ matmul"


def prime_shapes(trainer: Trainer, most: int | None = None, times: int = 0) -> None:
    """`times` updates of each distinct batch shape of the first epoch (the first `most`),
    so that what is built once per shape (oneDNN's bf16 kernels on a CPU, compiled graphs,
    CUDA graphs after their eager warm-up) is built before timing starts; `times` 0: one,
    or with CUDA graphs as many as make each shape's graph. The epoch's counters are left
    as they were."""
    plan = trainer.data.train.epoch(0)
    state = trainer.state
    saved = state.position, state.epoch_tokens, state.epoch_seconds
    times = times or 1 + (graphs.WARMUP if trainer.graphed else 0)
    for i in plan.first_of_each_shape()[:most]:
        for _ in range(times):
            trainer.update(plan, [i])
    state.position, state.epoch_tokens, state.epoch_seconds = saved


def tokens_per_s(
    trainer: Trainer, seconds: float, warmup: float = 0.0, shapes: int | None = None
) -> float:
    """Target tokens/s of the Trainer's own updates (Trainer.fit's inner loop, without
    logging, checkpoints or validation), epoch after epoch: after one update of each batch
    shape (the first `shapes`) and `warmup` seconds, over `seconds` and at least 3 updates."""

    def run(duration: float, least: int) -> tuple[int, float]:
        end, tokens, spent, updates = time.perf_counter() + duration, 0, 0.0, 0
        while True:
            plan, order = trainer.start_epoch()
            for group in trainer.update_groups(order):
                state = trainer.state
                before = state.epoch_tokens, state.epoch_seconds
                trainer.update(plan, group)
                tokens += state.epoch_tokens - before[0]
                spent += state.epoch_seconds - before[1]
                updates += 1
                if updates >= least and time.perf_counter() > end:
                    return tokens, spent
            trainer.state.start_next_epoch()

    prime_shapes(trainer, shapes)
    if warmup:
        run(warmup, 1)
    tokens, spent = run(seconds, 3)
    return tokens / spent


def flops_per_token(trainer: Trainer, sample: int | None = None) -> float:
    """Model FLOPs (forward + backward ≈ 3× forward) per target token, over the real
    (unpadded) lengths of every training batch, or of `sample` batches spread over them."""
    model_cfg, plan = trainer.config.model, trainer.data.train
    vocab = trainer.tgt_tok.get_piece_size()
    picked = range(len(plan))
    if sample is not None:
        picked = np.linspace(0, len(plan) - 1, min(sample, len(plan))).astype(int)
    flops = tokens = 0
    for i in picked:
        batch = plan[int(i)]
        src_lens = batch.src_mask[:, 0, 0].sum(dim=1).tolist()
        tgt_lens = (batch.tgt_out != PAD).sum(dim=1).tolist()
        for s, t in zip(src_lens, tgt_lens, strict=True):
            if t:  # not an empty row of static shapes (train.pad_to_multiple)
                flops += 3 * forward_flops(model_cfg, s, t, vocab)
            tokens += t
    return flops / tokens


class Steps:
    """Updates of one Trainer, one batch each, over a fixed seeded order of its batches."""

    def __init__(self, trainer: Trainer):
        self.trainer, self.next = trainer, 0
        self.order = epoch_order(len(trainer.data.train), trainer.config.train.seed, 0)
        trainer.model.train()

    def run(self, n: int) -> tuple[int, float, float, torch.Tensor]:
        """n updates: target tokens, wall seconds, host seconds fetching batches, losses."""
        sync()
        tokens, fetch, losses = 0, 0.0, []
        start = time.perf_counter()
        for _ in range(n):
            began = time.perf_counter()
            batch = self.trainer.data.train[int(self.order[self.next % len(self.order)])]
            fetch += time.perf_counter() - began
            self.next += 1
            losses.append(self.trainer.train_step([batch]) / batch.n_tokens)
            tokens += batch.n_tokens
        sync()
        return tokens, time.perf_counter() - start, fetch, torch.stack(losses).float().cpu()


def bf16_vs_fp32(config: config_module.Config, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The losses of the same `n` updates from the same seed, in bf16 (train.precision) and
    in fp32."""
    curves = []
    for precision in ("bf16", "fp32"):
        trainer = Trainer(with_values(config, train__precision=precision), progress=False)
        curves.append(Steps(trainer).run(n)[3])
        del trainer
        torch.cuda.empty_cache()
    return curves[0], curves[1]
