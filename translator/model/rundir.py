"""A run directory (`train.run_dir`) and everything in it, for train, the CLI and scripts:

    config.json                   the resolved config of the run
    metrics.tsv                   one row per validation (end of an epoch, or a budget cut),
                                  rewritten from the history in last.pt after each save
    checkpoints/last.pt           the whole training state: written every train.save_every
                                  updates, at each epoch end, at a budget cut and on
                                  SIGINT/SIGTERM; `--resume` continues from it exactly
    checkpoints/best.pt           the weights with the best validation BLEU
    checkpoints/ema.pt            with train.ema: the moving average of the weights at its
                                  best validation BLEU (the average is validated each epoch)
    checkpoints/epochNNNN.pt      weights of the last train.keep_last epochs, for averaging
                                  (and their moving average, with train.ema)

Every file is written atomically (checkpoint.py), so a kill at any moment leaves the
previous version whole.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from translator.errors import UserError
from translator.model import checkpoint


class RunDir:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.checkpoints = checkpoint.checkpoint_dir(self.path)
        self.last = self.checkpoints / "last.pt"
        self.best = self.checkpoints / "best.pt"
        self.ema = self.checkpoints / "ema.pt"
        self.metrics = self.path / "metrics.tsv"

    def check(self, resume: bool, overwrite: bool) -> None:
        """A new run refuses to replace a trained one unless `overwrite`; a resumed run
        needs last.pt."""
        if resume and not self.last.is_file():
            raise UserError(f"nothing to resume: {self.last} does not exist")
        if not resume and self.last.exists() and not overwrite:
            raise UserError(
                f"{self.path} already holds a trained model: pass --resume to "
                "continue it or --overwrite to start again"
            )

    def start(self, config: dict[str, Any], resume: bool) -> None:
        """Make the directory ready (a new run clears it; a resumed one loses the temporary
        files of a write that was killed) and write config.json."""
        for directory in (self.path, self.checkpoints):
            for partial in directory.glob(".*.tmp"):
                partial.unlink()
        if not resume:
            shutil.rmtree(self.checkpoints, ignore_errors=True)
            shutil.rmtree(self.path / "tensorboard", ignore_errors=True)
            self.metrics.unlink(missing_ok=True)
        self.path.mkdir(parents=True, exist_ok=True)
        checkpoint.write_text(self.path / "config.json", json.dumps(config, indent=2) + "\n")

    def save(self, payload: dict[str, Any]) -> None:
        checkpoint.save(payload, self.last)

    def load(self) -> dict[str, Any]:
        return checkpoint.load(self.last)

    def save_best(self, payload: dict[str, Any]) -> None:
        checkpoint.save(payload, self.best)

    def save_ema(self, payload: dict[str, Any]) -> None:
        checkpoint.save(checkpoint.weights_only(payload, "ema"), self.ema)

    def save_snapshot(self, payload: dict[str, Any], epoch: int, keep: int) -> None:
        checkpoint.save_snapshot(payload, self.checkpoints, epoch, keep)

    def write_metrics(self, rows: list[dict[str, Any]]) -> None:
        """metrics.tsv := these rows (the history kept in last.pt, so that the file and the
        checkpoint agree after any kill); a column a row lacks is left empty."""
        if not rows:
            return
        header = list(dict.fromkeys(key for row in rows for key in row))  # every row's keys
        text = lambda v: f"{v:.6g}" if isinstance(v, float) else str(v)  # noqa: E731
        lines = ["\t".join(header)]
        lines += ["\t".join(text(row.get(key, "")) for key in header) for row in rows]
        checkpoint.write_text(self.metrics, "\n".join(lines) + "\n")

    def metric_rows(self) -> list[dict[str, str]]:
        if not self.metrics.exists():
            return []
        header, *rows = self.metrics.read_text(encoding="utf-8").splitlines()
        return [dict(zip(header.split("\t"), row.split("\t"), strict=True)) for row in rows]


def checkpoint_in(path: str | Path) -> Path:
    """A checkpoint given as itself, or a run directory's best.pt (the one translate, eval
    and export use); one clear line if there is none."""
    path = Path(path)
    if path.is_dir():
        best = RunDir(path).best
        if not best.is_file():
            raise UserError(f"{path} is a directory without {best.relative_to(path)}: train first")
        return best
    if not path.is_file():
        raise UserError(f"no checkpoint or run directory at {path}")
    return path
