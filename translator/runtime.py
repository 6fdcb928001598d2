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
    """Ask glibc's malloc to keep freed memory: training steps re-allocate the same buffers,
    and faulting them in again costs 10-19% (docs/performance.md). Glibc only; whether it took."""
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, 1 << 30) and mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))


def return_freed_memory() -> bool:
    """Hand glibc's free memory back to the OS (malloc_trim), e.g. when a server falls idle
    after a peak. Glibc only; whether any was returned."""
    try:
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return False
    return bool(trim(0))


# The one answer to "does this CPU multiply bf16 matrices natively", for every bf16 path.
BF16_OVERRIDE = "TRANSLATOR_CPU_BF16"  # 1 or 0: the answer, whatever the CPU (tests, emulation)
# values that cap a CPU's ISA below its bf16 instructions (oneDNN's: below AVX512_CORE_BF16)
_WITHOUT_BF16 = {
    "ONEDNN_MAX_CPU_ISA": ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX512_CORE", "AVX512_CORE_VNNI"),
    "ATEN_CPU_CAPABILITY": ("DEFAULT", "AVX2"),
}


def cpu_bf16() -> tuple[bool, str]:
    """Whether this CPU has bf16 matrix instructions (AVX-512 BF16, AMX-BF16) that PyTorch
    may use, and why: without them bf16 is emulated, tens to hundreds of times slower than
    fp32; the environment can cap the ISA below them (docs/development.md)."""
    forced = os.environ.get(BF16_OVERRIDE, "").strip()
    if forced in ("0", "1"):
        has = "has" if forced == "1" else "has no"
        return forced == "1", f"this CPU {has} bf16 matrix instructions ({BF16_OVERRIDE}={forced})"
    for variable, capped in _WITHOUT_BF16.items():
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
    """`train.device`: auto (CUDA if there is one), cpu, cuda or cuda:N."""
    import torch  # here, so that commands without a model start without it

    try:
        auto = "cuda" if torch.cuda.is_available() else "cpu"
        device = torch.device(auto if name == "auto" else name)
    except RuntimeError:
        raise UserError(f"unknown device {name!r} (use auto, cpu or cuda)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"device {name!r} requested but CUDA is not available")
    if device.type == "cuda":
        # no cuDNN attention: it plans every new shape, and batches come in hundreds of shapes
        # (docs/performance.md#on-a-gpu); flash and memory-efficient remain
        torch.backends.cuda.enable_cudnn_sdp(False)
    return device


class StopSignals:
    """While active, SIGINT and SIGTERM only ask to stop (`requested`), so training can save
    and exit cleanly; a second SIGINT interrupts at once. Main thread only."""

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
