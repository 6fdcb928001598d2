"""Runtime settings: the device to run on, how many workers to use, and what makes PyTorch
faster on the CPU (applied by the CLI)."""

from __future__ import annotations

import ctypes
import os
import signal
import threading
from typing import TYPE_CHECKING

from translator.errors import UserError

if TYPE_CHECKING:
    import torch

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters


def keep_freed_memory() -> bool:
    """Ask glibc's malloc to keep freed memory for reuse instead of handing it back to the
    operating system. A training step frees and re-allocates the same large buffers; by
    default glibc unmaps them and the next step page-faults them in again: 2.1 million
    faults in 80 CPU steps, and 10-19% more training throughput without them (measured;
    see docs/performance.md). Linux with glibc only; elsewhere nothing
    happens. Returns whether the setting took."""
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, 1 << 30) and mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))


def return_freed_memory() -> bool:
    """Hand the memory glibc's malloc holds free back to the operating system
    (malloc_trim), e.g. when a server falls idle after a peak. Linux with glibc only;
    elsewhere nothing happens. Returns whether any was returned."""
    try:
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return False
    return bool(trim(0))


# The one answer to "does this CPU multiply bf16 matrices natively", read by every bf16 path
# (train.precision auto, the warning for bf16 asked for on a CPU without them, the benchmarks).
BF16_OVERRIDE = "TRANSLATOR_CPU_BF16"  # 1 or 0: the answer, whatever the CPU (tests, emulation)
# oneDNN ISAs below AVX512_CORE_BF16: capped there (ONEDNN_MAX_CPU_ISA), a CPU runs bf16 slowly
_ONEDNN_WITHOUT_BF16 = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX512_CORE", "AVX512_CORE_VNNI")
_ATEN_WITHOUT_BF16 = ("DEFAULT", "AVX2")  # ATEN_CPU_CAPABILITY values of CPUs without bf16


def cpu_bf16() -> tuple[bool, str]:
    """Whether this CPU has bf16 matrix instructions (AVX-512 BF16 or AMX-BF16) that PyTorch
    and oneDNN may use, and why, as a log line reads it. Without them a bf16 matrix multiply
    is emulated, tens to hundreds of times slower than fp32 (docs/development.md). The
    environment can say no for a CPU that has them, as on an AVX2-only one
    (ONEDNN_MAX_CPU_ISA=AVX2, ATEN_CPU_CAPABILITY=avx2: docs/development.md), and
    TRANSLATOR_CPU_BF16=0 or 1 decides whatever the CPU."""
    forced = os.environ.get(BF16_OVERRIDE, "").strip()
    if forced in ("0", "1"):
        has = "has" if forced == "1" else "has no"
        return forced == "1", f"this CPU {has} bf16 matrix instructions ({BF16_OVERRIDE}={forced})"
    for variable, capped in (
        ("ONEDNN_MAX_CPU_ISA", _ONEDNN_WITHOUT_BF16),
        ("ATEN_CPU_CAPABILITY", _ATEN_WITHOUT_BF16),
    ):
        value = os.environ.get(variable, "")
        if value.upper() in capped:
            return False, f"this CPU has no bf16 matrix instructions ({variable}={value})"
    import torch

    flags = torch.cpu.get_capabilities() if hasattr(torch.cpu, "get_capabilities") else {}
    if flags.get("avx512_bf16") or flags.get("amx_bf16"):
        return True, "this CPU has bf16 matrix instructions"
    return False, "this CPU has no bf16 matrix instructions"


def cpu_has_bf16() -> bool:
    """`cpu_bf16`'s answer alone."""
    return cpu_bf16()[0]


def worker_count(setting: int) -> int:
    """Workers for a `workers` setting: 0 means one per core."""
    return setting if setting > 0 else os.cpu_count() or 1


def pick_device(name: str) -> torch.device:
    """`train.device`: auto (CUDA if there is one), cpu, cuda or cuda:N. Choosing CUDA also
    sets its attention kernels (`without_cudnn_attention`)."""
    import torch  # here, so that commands without a model start without it

    try:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        if name != "auto":
            device = torch.device(name)
    except RuntimeError:
        raise UserError(f"unknown device {name!r} (use auto, cpu or cuda)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"device {name!r} requested but CUDA is not available")
    if device.type == "cuda":
        without_cudnn_attention()
    return device


def without_cudnn_attention() -> None:
    """Leave cuDNN out of `F.scaled_dot_product_attention`'s choices (flash and
    memory-efficient remain). cuDNN builds a plan for every new shape, and our batches come
    in hundreds of shapes (what that cost: docs/performance.md#on-a-gpu)."""
    import torch

    torch.backends.cuda.enable_cudnn_sdp(False)


class StopSignals:
    """While active, SIGINT and SIGTERM only ask to stop (`requested` names the signal), so
    training can finish its update, save, and exit cleanly; a second SIGINT interrupts at
    once. Outside the main thread (where handlers cannot be set) it does nothing."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.requested: signal.Signals | None = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum: int, frame: object) -> None:
        if self.requested == signal.SIGINT and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = signal.Signals(signum)
