"""Checkpoints: one dict saved with torch.save, written atomically (temp file + rename), so a
crash or Ctrl-C mid-write leaves the previous checkpoint intact. A checkpoint carries all
`translate` needs (docs/formats.md#checkpoints); an API key a config saved by an older
version holds is dropped when it is read, with a warning.
"""

from __future__ import annotations

import hashlib
import logging
import pickle
from pathlib import Path
from typing import Any

from translator.atomic import atomic_write
from translator.config import without_secrets
from translator.errors import UserError

FORMAT = 1
log = logging.getLogger(__name__)
_warned: set[Path] = set()  # checkpoints whose dropped keys were warned about


def checkpoint_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / "checkpoints"


def save(payload: dict[str, Any], path: Path) -> None:
    import torch  # here, not above: a run directory's paths need no PyTorch (serve's HTTP side)

    atomic_write(path, lambda tmp: torch.save({"format": FORMAT, **payload}, tmp))


def digest(path: Path) -> str:
    """SHA-256 of a checkpoint file: what an export records of the checkpoint it was made from."""
    sha = hashlib.sha256()
    with Path(path).open("rb") as f:
        while chunk := f.read(1 << 22):
            sha.update(chunk)
    return sha.hexdigest()


def write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


SNAPSHOT = "epoch{:04d}.pt"
TRAINING_ONLY = ("optimizer", "scheduler", "schedule", "rng")  # what a snapshot leaves out


def save_snapshot(payload: dict[str, Any], ckpt_dir: Path, epoch: int, keep: int) -> None:
    """Save the weights of one epoch; delete all but the newest `keep` snapshots."""
    weights = {k: v for k, v in payload.items() if k not in TRAINING_ONLY}
    save(weights, ckpt_dir / SNAPSHOT.format(epoch))
    for old in snapshots(ckpt_dir)[:-keep]:
        old.unlink()


def snapshots(ckpt_dir: Path) -> list[Path]:
    """Per-epoch snapshots, oldest first."""
    return sorted(Path(ckpt_dir).glob("epoch[0-9][0-9][0-9][0-9].pt"))


def weights_only(payload: dict[str, Any], weights: str = "model") -> dict[str, Any]:
    """A checkpoint for translating: the `weights` ("model" or "ema") as its model."""
    kept = {k: v for k, v in payload.items() if k not in (*TRAINING_ONLY, "ema", "format")}
    origin = {"weights_from": "ema"} if weights == "ema" else {}
    return {**kept, "model": payload[weights]} | origin


def average(paths: list[Path], weights: str = "model") -> dict[str, Any]:
    """The element-wise mean of the checkpoints' `weights`, with the newest one's config."""
    payloads = [load(p) for p in paths]
    missing = [p.name for p, payload in zip(paths, payloads, strict=True) if weights not in payload]
    if missing:
        raise UserError(f"{', '.join(missing)} hold no {weights} weights: train with train.ema")
    averaged = {}
    for name, tensor in payloads[-1][weights].items():
        if tensor.is_floating_point():
            total = sum(p[weights][name].double() for p in payloads)
            tensor = total.div(len(payloads)).to(tensor.dtype)
        averaged[name] = tensor
    newest = weights_only(payloads[-1] | {weights: averaged}, weights)
    return newest | {"averaged_from": [p.name for p in paths]}


def average_last(
    run_dir: str | Path, last: int, output: Path | None = None, weights: str = "model"
) -> Path:
    """Average the newest `last` epoch snapshots of a run into checkpoints/average<N>.pt
    (the moving averages they hold, `weights` "ema": ema-average<N>.pt)."""
    ckpt_dir = checkpoint_dir(run_dir)
    found = snapshots(ckpt_dir)
    if last < 1:
        raise UserError("--last must be at least 1")
    if len(found) < last:
        raise UserError(
            f"{ckpt_dir} has {len(found)} epoch snapshots, {last} are needed: "
            "train with train.keep_last >= N"
        )
    prefix = "ema-" if weights == "ema" else ""
    output = output or ckpt_dir / f"{prefix}average{last}.pt"
    save(average(found[-last:], weights), output)
    return output


def load(path: str | Path, mmap: bool = False) -> dict[str, Any]:
    """A checkpoint's payload; with `mmap`, its tensors read only when used."""
    import torch

    path = Path(path)
    if not path.is_file():
        raise UserError(f"no checkpoint at {path}: train first (translator train)")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except (RuntimeError, EOFError, OSError, pickle.UnpicklingError) as exc:
        raise UserError(f"cannot read checkpoint {path}: {str(exc).splitlines()[0]}") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise UserError(f"{path} is not a translator checkpoint (format {FORMAT})")
    _drop_secrets(payload, path)
    return payload


def _drop_secrets(payload: dict[str, Any], path: Path) -> None:
    """API keys in a config saved by an older version: dropped, said so once a file."""
    dropped = without_secrets(payload["config"]) if isinstance(payload.get("config"), dict) else []
    if dropped and path.resolve() not in _warned:
        _warned.add(path.resolve())
        log.warning(
            f"{path}: its config holds {', '.join(dropped)} (saved by an older version): "
            "dropped, not used. API keys come from TRANSLATOR_API_KEYS, serve.api_key_file or "
            "the config you serve with; none is saved"
        )
