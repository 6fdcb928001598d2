"""`translator release`: a checkpoint → the small file that decoding needs, to ship: the
config, both tokenizers and the weights only (a training checkpoint is about three times
the weights), optionally in float16 or bfloat16, read back as float32 like any checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from translator.config import from_dict
from translator.errors import UserError
from translator.model import checkpoint
from translator.model.rundir import checkpoint_in

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
ALIASES = {"fp32": "float32", "fp16": "float16", "half": "float16", "bf16": "bfloat16"}
KEPT = ("config", "tokenizers", "tokenizer_models", "source_words", "averaged_from", "imported")


@dataclass
class Released:
    path: Path
    source: Path
    dtype: str
    bytes: int
    source_bytes: int


def release(source: str | Path, out: str | Path, dtype: str = "float32") -> Released:
    """Write the release of `source` (a checkpoint, or a run's model) to `out`, as `dtype`."""
    name = ALIASES.get(dtype, dtype)
    if name not in DTYPES:
        choices = ", ".join([*DTYPES, *ALIASES])
        raise UserError(f"unknown --dtype {dtype!r} (choose from {choices})")
    path, out = checkpoint_in(source), Path(out)
    if out.resolve() == path.resolve():
        raise UserError(f"--out {out} is the checkpoint being released: choose another file")
    payload = checkpoint.load(path)
    tied = from_dict(payload["config"]).model.tie_embeddings
    released = {k: payload[k] for k in KEPT if k in payload}
    released["model"] = cast_weights(payload["model"], DTYPES[name], tied)
    released["release"] = {"from": str(path), "dtype": name}
    checkpoint.save(released, out)
    return Released(out, path, name, out.stat().st_size, path.stat().st_size)


def cast_weights(state: dict[str, Any], dtype: torch.dtype, tied: bool) -> dict[str, Any]:
    """Floating-point tensors as `dtype` (others as they are); with tied embeddings the
    output projection is the target embedding tensor itself, so torch.save writes it once."""
    weights = {
        name: t.detach().to(dtype).contiguous() if t.is_floating_point() else t
        for name, t in state.items()
    }
    if tied and "project.weight" in weights:
        weights["project.weight"] = weights["tgt_embed.tokens.weight"]
    return weights
