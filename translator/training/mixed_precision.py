"""The number format a training step computes in (`train.precision`).

    "fp32"  every operation in float32
    "bf16"  matrix multiplies (and what autocast puts with them) in bfloat16 under
            `torch.autocast`; the weights, AdamW's state and the loss stay float32
    "auto"  bf16 on CUDA, and on CPUs with bf16 matrix instructions (AVX-512 BF16 or
            AMX: `runtime.cpu_bf16`, the one answer every bf16 path reads); fp32
            elsewhere (docs/performance.md has what each costs)

The decision is made from the device and the CPU's flags, so every rank and every session
of a run on the same machine makes the same one; the trainer logs it once and records it
in every checkpoint (`precision`). bf16 asked for by name on a CPU without those
instructions is obeyed, with a warning that gives its measured cost (`slow_bf16_warning`):
it trains, only far slower. Decoding does not use it: plain bf16 autocast did not pay for
our batches of short sentences (docs/performance.md).
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager, nullcontext

import torch

from translator.runtime import cpu_bf16, cpu_has_bf16

PRECISIONS = ("fp32", "bf16")


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
    """The warning for a run in bf16 on a CPU without bf16 matrix instructions (asked for
    by name: auto never chooses it there), with the cost measured now; None otherwise."""
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
    """How many times longer a bf16 n×n matrix multiply takes than an fp32 one on this CPU:
    each timed for about seconds/2 after one untimed run (never more than one run over)."""
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
    """What `train.pad_to_multiple` = `setting` means for a run in `precision` on `device`:
    0 is 2 in bf16 on a CPU, 1 (off) elsewhere. oneDNN builds a bf16 kernel for every new
    matrix shape and keeps about a thousand; a Tatoeba epoch of free shapes makes four
    times as many, so the cache thrashed and training slowed by a fifth while its memory
    grew without end; lengths rounded to even numbers keep the shapes few enough."""
    if setting:
        return setting
    return 2 if precision == "bf16" and device.type == "cpu" else 1


def autocast(precision: str, device: torch.device, cache: bool = True) -> AbstractContextManager:
    """The context a training forward pass runs in; `cache` False for a pass recorded as a
    CUDA graph (autocast's cache of bf16 weight copies must not outlive the recording)."""
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16, cache_enabled=cache)
    return nullcontext()
