"""The number format a training step computes in (`train.precision`).

    "fp32"  every operation in float32
    "bf16"  matrix multiplies (and what autocast puts with them) in bfloat16 under
            `torch.autocast`; the weights, AdamW's state and the loss stay float32
    "auto"  bf16 on CUDA, and on CPUs with bf16 matrix instructions (AVX-512 BF16 or
            AMX), where a bf16 matmul runs 2.3x (AVX-512 BF16) to 6.8x (AMX) the fp32
            one (docs/performance.md); fp32 elsewhere

The decision is made from the device and the CPU's flags, so every rank and every session
of a run on the same machine makes the same one; the trainer logs it once and records it
in every checkpoint (`precision`). Decoding does not use it: plain bf16 autocast did not
pay for our batches of short sentences (docs/performance.md).
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import torch

PRECISIONS = ("fp32", "bf16")


def cpu_has_bf16() -> bool:
    """Whether this CPU has bf16 matrix instructions (AVX-512 BF16 or AMX-BF16)."""
    flags = torch.cpu.get_capabilities() if hasattr(torch.cpu, "get_capabilities") else {}
    return bool(flags.get("avx512_bf16") or flags.get("amx_bf16"))


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
        has = "has" if cpu_has_bf16() else "has no"
        return f"train.precision auto: this CPU {has} bf16 matrix instructions"
    return f"train.precision auto: {device.type}"


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
