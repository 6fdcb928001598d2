"""The number format a model decodes in (`decode.precision`): its names, and what each
means for our model (an engine of its own, e.g. ct2_engine.py, says what it means there).

    "fp32"  float32 weights and arithmetic: the output every other setting is measured against
    "bf16"  the weights cast to bfloat16 (not autocast: the cast is what pays)
    "int8"  the linear layers dynamically quantized: int8 weights, activations as they arrive
    "auto"  bf16 on a CPU with bf16 matrix instructions (`runtime.cpu_bf16`), fp32
            elsewhere: int8 cost beam 5 more than 0.2 BLEU on an AVX2 CPU
            (docs/performance.md#decoding-engine-and-precision)

bf16 or int8 asked for by name is obeyed wherever it runs (bf16 without bf16 instructions
is emulated, slowly).
"""

from __future__ import annotations

import platform
import warnings

import torch
from torch import nn

from translator.runtime import cpu_bf16

PRECISIONS = ("auto", "fp32", "bf16", "int8")


def x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64")


def resolve(setting: str, device: torch.device) -> tuple[str, str]:
    """The precision `setting` means on `device`, and why, as a log line reads it."""
    if setting not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {setting!r}")
    if setting != "auto":
        return setting, f"decode.precision = {setting}"
    if device.type != "cpu":
        return "fp32", f"decode.precision auto: {device.type}"
    has_bf16, why = cpu_bf16()
    return ("bf16" if has_bf16 else "fp32"), f"decode.precision auto: {why}"


def apply(model: nn.Module, precision: str) -> nn.Module:
    """`model` (in eval mode, on its device) in `precision`: cast, quantized in place, or as
    it is for fp32. Training never sees it: the trainer validates its own float32 model."""
    if precision == "bf16":
        return model.to(torch.bfloat16)
    if precision == "int8":
        return quantized(model)
    return model


def quantized(model: nn.Module) -> nn.Module:
    """The linear layers of `model` replaced in place by dynamically quantized int8 ones; the
    tied output projection gets its own int8 copy, the embeddings stay float32."""
    if next(model.parameters()).device.type != "cpu":
        raise ValueError("decode.precision int8 runs on the CPU only; use bf16 or fp32 on CUDA")
    torch.backends.quantized.engine = "fbgemm" if x86() else "qnnpack"
    with warnings.catch_warnings():  # torch.ao's deprecation note: the kernels are the same
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(
            model, {nn.Linear}, dtype=torch.qint8, inplace=True
        )
