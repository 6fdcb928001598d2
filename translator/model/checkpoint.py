"""Checkpoints: one dict saved with torch.save, written atomically (temp file + rename), so a
crash or Ctrl-C mid-write leaves the previous checkpoint intact.

A checkpoint carries everything `translate` needs: the config it was trained with, the
tokenizer paths and the tokenizer models themselves (a few hundred kB), and the weights;
`last` and `best` also carry the optimiser/scheduler state and epoch for `--resume`.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import torch

from translator.atomic import atomic_write
from translator.errors import UserError

FORMAT = 1


def checkpoint_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / "checkpoints"


def save(payload: dict[str, Any], path: Path) -> None:
    atomic_write(path, lambda tmp: torch.save({"format": FORMAT, **payload}, tmp))


def write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


SNAPSHOT = "epoch{:04d}.pt"
TRAINING_ONLY = ("optimizer", "scheduler", "schedule", "rng")  # what a snapshot leaves out


def save_snapshot(payload: dict[str, Any], ckpt_dir: Path, epoch: int, keep: int) -> None:
    """Save the weights of one epoch (no optimiser state) and delete all but the newest
    `keep` snapshots."""
    save(
        {k: v for k, v in payload.items() if k not in TRAINING_ONLY},
        ckpt_dir / SNAPSHOT.format(epoch),
    )
    for old in snapshots(ckpt_dir)[:-keep]:
        old.unlink()


def snapshots(ckpt_dir: Path) -> list[Path]:
    """Per-epoch snapshots, oldest first."""
    return sorted(Path(ckpt_dir).glob("epoch[0-9][0-9][0-9][0-9].pt"))


def average(paths: list[Path]) -> dict[str, Any]:
    """The element-wise mean of the checkpoints' weights, with the newest one's config,
    tokenizers and training state."""
    payloads = [load(p) for p in paths]
    newest = payloads[-1]
    weights = {}
    for name, tensor in newest["model"].items():
        if tensor.is_floating_point():
            weights[name] = (
                sum(p["model"][name].double() for p in payloads).div(len(payloads)).to(tensor.dtype)
            )
        else:
            weights[name] = tensor
    averaged_from = [p.name for p in paths]
    kept = {k: v for k, v in newest.items() if k not in TRAINING_ONLY and k != "format"}
    return {**kept, "model": weights, "averaged_from": averaged_from}


def average_last(run_dir: str | Path, last: int, output: Path | None = None) -> Path:
    """Average the newest `last` epoch snapshots of a run into checkpoints/average<N>.pt."""
    ckpt_dir = checkpoint_dir(run_dir)
    found = snapshots(ckpt_dir)
    if last < 1:
        raise UserError("--last must be at least 1")
    if len(found) < last:
        raise UserError(
            f"{ckpt_dir} has {len(found)} epoch snapshots, {last} are needed: "
            "train with train.keep_last >= N"
        )
    output = output or ckpt_dir / f"average{last}.pt"
    save(average(found[-last:]), output)
    return output


def load(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"no checkpoint at {path}: train first (translator train)")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, OSError, pickle.UnpicklingError) as exc:
        raise UserError(f"cannot read checkpoint {path}: {str(exc).splitlines()[0]}") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise UserError(f"{path} is not a translator checkpoint (format {FORMAT})")
    return payload
