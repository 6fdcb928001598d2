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
from translator.runtime import cpu_bf16
from translator.training import graphs
from translator.training.trainer import Trainer


def sync() -> None:
    """Wait for the GPU, so that a timer read next includes its work."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def bf16_measured(device: torch.device | str) -> str | None:
    """None where bf16 can be measured (CUDA, a CPU with bf16 matrix instructions), else
    the one line a script prints instead of measuring it: without those instructions a bf16
    matrix multiply is emulated, hundreds of times slower (a 2048³ one took 57 s on an
    AVX2-only CPU), and what it would measure is the emulation."""
    if torch.device(device).type != "cpu":
        return None
    has, why = cpu_bf16()
    return None if has else f"bf16: not measured, {why}"


def matmul_peak(
    device: torch.device | str, dtype: torch.dtype | None = None, seconds: float = 2.0
) -> tuple[float, str]:
    """The FLOP/s of a square matrix multiply, the peak MFU is reported against: fp32 2048³
    on the CPU, bf16 8192³ on CUDA (or `dtype` at that size); runs until `seconds` have
    passed, the untimed first one included (it builds what is built once): never more
    than one run over, on any CPU."""
    cuda = torch.device(device).type == "cuda"
    n, dtype = (8192, dtype or torch.bfloat16) if cuda else (2048, dtype or torch.float32)
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    began = time.perf_counter()
    a @ b
    sync()
    first = time.perf_counter() - began
    runs, start = 0, time.perf_counter()
    while runs == 0 or time.perf_counter() - began < seconds:
        if first >= seconds:  # the first run spent the budget: its time is all there is
            runs, start = 1, began
            break
        a @ b
        sync()
        runs += 1
    return 2 * n**3 * runs / (time.perf_counter() - start), f"{str(dtype)[6:]} {n}³ matmul"


def prime_shapes(
    trainer: Trainer, most: int | None = None, times: int = 0, seconds: float = 120.0
) -> int:
    """`times` updates of each distinct batch shape of the first epoch (the first `most`),
    so that what is built once per shape (oneDNN's bf16 kernels on a CPU, compiled graphs,
    CUDA graphs after their eager warm-up) is built before timing starts; `times` 0: one,
    or with CUDA graphs as many as make each shape's graph. Stops at the first shape that
    ends after `seconds`; returns how many shapes were primed. The epoch's counters are
    left as they were."""
    plan = trainer.data.train.epoch(0)
    state = trainer.state
    saved = state.position, state.epoch_tokens, state.epoch_seconds
    times = times or 1 + (graphs.WARMUP if trainer.graphed else 0)
    primed, end = 0, time.perf_counter() + seconds
    for i in plan.first_of_each_shape()[:most]:
        for _ in range(times):
            trainer.update(plan, [i])
        primed += 1
        if time.perf_counter() > end:
            break
    state.position, state.epoch_tokens, state.epoch_seconds = saved
    return primed


def tokens_per_s(
    trainer: Trainer,
    seconds: float,
    warmup: float = 0.0,
    shapes: int | None = None,
    prime_seconds: float = 120.0,
) -> float:
    """Target tokens/s of the Trainer's own updates (Trainer.fit's inner loop, without
    logging, checkpoints or validation), epoch after epoch: after one update of each batch
    shape (the first `shapes`, for at most `prime_seconds`) and `warmup` seconds, over
    `seconds` (each part one update at least, and never more than one over)."""

    def run(duration: float) -> tuple[int, float]:
        end, tokens, spent = time.perf_counter() + duration, 0, 0.0
        while True:
            plan, updates = trainer.start_epoch()
            for group in updates:
                state = trainer.state
                before = state.epoch_tokens, state.epoch_seconds
                trainer.update(plan, group)
                tokens += state.epoch_tokens - before[0]
                spent += state.epoch_seconds - before[1]
                if time.perf_counter() > end:
                    return tokens, spent
            trainer.state.start_next_epoch()

    prime_shapes(trainer, shapes, seconds=prime_seconds)
    if warmup:
        run(warmup)
    tokens, spent = run(seconds)
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

    def run(self, n: int, seconds: float = 600.0) -> tuple[int, float, float, torch.Tensor]:
        """n updates, fewer once `seconds` have passed (one at least): target tokens, wall
        seconds, host seconds fetching batches, losses."""
        sync()
        tokens, fetch, losses = 0, 0.0, []
        start = time.perf_counter()
        for _ in range(max(n, 1)):
            if losses and time.perf_counter() - start > seconds:
                break
            began = time.perf_counter()
            batch = self.trainer.data.train[int(self.order[self.next % len(self.order)])]
            fetch += time.perf_counter() - began
            self.next += 1
            losses.append(self.trainer.step([batch]).loss / batch.n_tokens)
            tokens += batch.n_tokens
        sync()
        return tokens, time.perf_counter() - start, fetch, torch.stack(losses).float().cpu()


def bf16_vs_fp32(
    config: config_module.Config, n: int, seconds: float = 600.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """The losses of the same `n` updates from the same seed, in bf16 (train.precision) and
    in fp32 (fewer where a pass ran out of `seconds`). Where `bf16_measured` has a line, ask it
    first."""
    curves = []
    for precision in ("bf16", "fp32"):
        trainer = Trainer(with_values(config, train__precision=precision), progress=False)
        curves.append(Steps(trainer).run(n if not curves else len(curves[0]), seconds)[3])
        del trainer
        torch.cuda.empty_cache()
    same = min(len(curve) for curve in curves)  # each pass stops at its budget
    return curves[0][:same], curves[1][:same]
