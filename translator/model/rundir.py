"""A run directory (`train.run_dir`) and everything in it, for train, the CLI and scripts:
config.json, metrics.tsv, final.json (the run's model, train.final) and checkpoints/
(last.pt, best.pt, ema.pt, epochNNNN.pt, averageN.pt); docs/formats.md#the-run-directory.

Every file is written atomically (checkpoint.py), so a kill at any moment leaves the
previous version whole.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, NamedTuple

from translator.errors import UserError
from translator.model import checkpoint


class Final(NamedTuple):
    """The checkpoint a run recommends, and why (what the commands print)."""

    path: Path
    why: str


class RunDir:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.checkpoints = checkpoint.checkpoint_dir(self.path)
        self.last = self.checkpoints / "last.pt"
        self.best = self.checkpoints / "best.pt"
        self.ema = self.checkpoints / "ema.pt"
        self.metrics = self.path / "metrics.tsv"
        self.final_record = self.path / "final.json"

    def check(self, resume: bool, overwrite: bool) -> None:
        """A new run replaces a trained one only with `overwrite`; resuming needs last.pt."""
        if resume and not self.last.is_file():
            raise UserError(f"nothing to resume: {self.last} does not exist")
        if not resume and self.last.exists() and not overwrite:
            raise UserError(
                f"{self.path} already holds a trained model: pass --resume to "
                "continue it or --overwrite to start again"
            )

    def start(self, config: dict[str, Any], resume: bool) -> None:
        """Make the directory ready (a new run clears it) and write config.json."""
        for directory in (self.path, self.checkpoints):
            for partial in directory.glob(".*.tmp"):
                partial.unlink()
        if not resume:
            shutil.rmtree(self.checkpoints, ignore_errors=True)
            shutil.rmtree(self.path / "tensorboard", ignore_errors=True)
            self.metrics.unlink(missing_ok=True)
            self.final_record.unlink(missing_ok=True)
        self.path.mkdir(parents=True, exist_ok=True)
        checkpoint.write_text(self.path / "config.json", json.dumps(config, indent=2) + "\n")

    def write_final(self, final: str, epochs: int) -> Final | None:
        """Make the run's model as train.final asks (`epochs`: averageN's N, else 0), recorded
        in final.json; best.pt while it cannot be made yet, nothing before a validation."""
        found, why = len(checkpoint.snapshots(self.checkpoints)), f"train.final = {final}"
        if epochs and found >= epochs:
            made = Final(checkpoint.average_last(self.path, epochs), why)
        elif final == "ema" and self.ema.is_file():
            made = Final(self.ema, why)
        elif self.best.is_file():
            if final != "best":
                missing = f"{found} of {epochs} epochs" if epochs else "no moving average yet"
                why += f" ({missing}: best.pt instead)"
            made = Final(self.best, why)
        else:
            return None
        record = {"checkpoint": str(made.path.relative_to(self.path)), "why": made.why}
        checkpoint.write_text(self.final_record, json.dumps(record, indent=2) + "\n")
        return made

    @property
    def final(self) -> Final:
        """The run's model: final.json's checkpoint, or best.pt for a run that records none."""
        if not self.final_record.is_file():
            return Final(self.best, "the run's best.pt: it records no train.final")
        try:
            record = json.loads(self.final_record.read_text(encoding="utf-8"))
            named = Path(record["checkpoint"])
            if named.is_absolute() or ".." in named.parts:
                raise ValueError(named)
            return Final(self.path / named, str(record["why"]))
        except (ValueError, KeyError, TypeError):
            raise UserError(f"{self.final_record} is not a run's record of its model") from None

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


def why(checkpoint: str | Path) -> str:
    """Why `checkpoint` decodes, as the model line says it: its run's model (final.json's
    reason), the best.pt of a run that records none, or a checkpoint named."""
    checkpoint = Path(checkpoint)
    run = RunDir(checkpoint.parent.parent)  # RUN/checkpoints/NAME.pt
    try:
        final = run.final
    except UserError:
        return "a checkpoint named"
    same = final.path.is_file() and final.path.resolve() == checkpoint.resolve()
    return final.why if same else "a checkpoint named"


def checkpoint_in(path: str | Path) -> Path:
    """A checkpoint given as itself, or a run directory's model (RunDir.final)."""
    path = Path(path)
    if path.is_dir():
        run = RunDir(path)
        final = run.final.path
        if final.is_file():
            return final
        if run.final_record.is_file():
            raise UserError(
                f"{run.final_record} names {final}, which is missing: train on (--resume) "
                "or name a checkpoint"
            )
        raise UserError(f"{path} is a directory without {final.relative_to(path)}: train first")
    if not path.is_file():
        raise UserError(f"no checkpoint or run directory at {path}")
    return path
