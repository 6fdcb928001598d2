"""The number format a training step computes in (`train.precision`): "fp32"; "bf16",
matrix multiplies (and what autocast puts with them) in bfloat16 under `torch.autocast`, the
weights, AdamW's state and the loss in float32; "auto", bf16 on CUDA and on CPUs with bf16
matrix instructions (`runtime.cpu_bf16`), else fp32 (costs: docs/performance.md).

bf16 by name on a CPU without them is obeyed, with a warning giving its measured cost.
Decoding does not use it: bf16 autocast did not pay for batches of short sentences.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager, nullcontext

import torch

from translator.runtime import cpu_bf16, cpu_has_bf16


def resolve(setting: str, device: torch.device) -> str:
    """The precision `setting` ("auto", "fp32" or "bf16") means on `device`."""
    if setting != "auto":
        return setting
    if device.type == "cuda" or (device.type == "cpu" and cpu_has_bf16()):
        return "bf16"
    return "fp32"


def reason(setting: str, device: torch.device) -> str:
    """Why `resolve` chose what it did, for the log line."""
    if setting != "auto":
        return f"train.precision = {setting}"
    if device.type == "cuda":
        return "train.precision auto: CUDA"
    if device.type == "cpu":
        return f"train.precision auto: {cpu_bf16()[1]}"
    return f"train.precision auto: {device.type}"


def slow_bf16_warning(precision: str, device: torch.device) -> str | None:
    """The warning for bf16 on a CPU without bf16 matrix instructions, else None."""
    if precision != "bf16" or device.type != "cpu" or cpu_has_bf16():
        return None
    slower = bf16_matmul_cost()
    shown = f"{slower:,.0f}" if slower >= 10 else f"{slower:.2f}"  # never "0x"
    return (
        f"train.precision = bf16 on a CPU without bf16 matrix instructions: a bf16 matrix "
        f"multiply runs {shown}x slower than fp32 here (256x256, measured now); "
        f"fp32 (or auto) trains faster"
    )


def bf16_matmul_cost(n: int = 256, seconds: float = 0.4) -> float:
    """How many times longer a bf16 n×n matrix multiply takes than an fp32 one here."""
    per_run = {}
    for dtype in (torch.float32, torch.bfloat16):
        a = torch.full((n, n), 0.5, dtype=dtype)  # not random: the run's random state stays
        a @ a
        runs, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds / 2:
            a @ a
            runs += 1
        per_run[dtype] = elapsed / max(runs, 1)
    return per_run[torch.bfloat16] / per_run[torch.float32]


def pad_multiple(setting: int, precision: str, device: torch.device) -> int:
    """What `train.pad_to_multiple` = `setting` means: 0 is 2 in bf16 on a CPU, 1 (off)
    elsewhere. oneDNN caches about a thousand bf16 kernels, one per shape; a Tatoeba epoch of
    free shapes needs four times as many: training slowed by a fifth, memory grew unbounded."""
    return setting or (2 if precision == "bf16" and device.type == "cpu" else 1)


def autocast(precision: str, device: torch.device, cache: bool = True) -> AbstractContextManager:
    """The context a training forward pass runs in; `cache` False for a pass recorded as a
    CUDA graph (autocast's cache of bf16 weight copies must not outlive the recording)."""
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16, cache_enabled=cache)
    return nullcontext()
