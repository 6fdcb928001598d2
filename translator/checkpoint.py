"""Checkpoints: one dict saved with torch.save, written atomically (temp file + rename), so a
crash or Ctrl-C mid-write leaves the previous checkpoint intact.

A checkpoint carries everything `translate` needs: the config it was trained with, the
tokenizer paths and the tokenizer models themselves (a few hundred kB), and the weights;
`last` and `best` also carry the optimiser/scheduler state and epoch for `--resume`.
"""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

from translator.errors import UserError

FORMAT = 1


def checkpoint_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / "checkpoints"


def _atomic(path: Path, write) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save(payload: dict[str, Any], path: Path) -> None:
    _atomic(path, lambda tmp: torch.save({"format": FORMAT, **payload}, tmp))


def copy(src: Path, dst: Path) -> None:
    _atomic(dst, lambda tmp: shutil.copyfile(src, tmp))


def load(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"no checkpoint at {path}: train a model first (translator train)")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, OSError, pickle.UnpicklingError) as exc:
        raise UserError(f"cannot read checkpoint {path}: {str(exc).splitlines()[0]}") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise UserError(f"{path} is not a translator checkpoint (format {FORMAT})")
    return payload
