"""Optional TensorBoard logging (`train.tensorboard`): the scalars of each log and each
validation under RUN_DIR/tensorboard, by update, with PyTorch's `SummaryWriter` (an extra:
`pip install "translator[tensorboard]"`). Only the main process writes.
"""

from __future__ import annotations

from pathlib import Path

from translator.errors import UserError


class Board:
    """The run's TensorBoard writer, or nothing when logging is off."""

    def __init__(self, run_dir: Path, enabled: bool):
        self.writer = None
        if not enabled:
            return
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise UserError(
                'train.tensorboard needs TensorBoard: pip install "translator[tensorboard]"'
            ) from None
        self.writer = SummaryWriter(str(Path(run_dir) / "tensorboard"), flush_secs=10)

    def training(
        self,
        step: int,
        loss: float,
        grad_norm: float,
        grad_norm_max: float,
        lr: float,
        tokens_per_s: float,
    ) -> None:
        """The scalars of one log, of the updates since the last."""
        if self.writer is not None:
            self.writer.add_scalar("train/loss", loss, step)
            self.writer.add_scalar("train/grad_norm", grad_norm, step)
            self.writer.add_scalar("train/grad_norm_max", grad_norm_max, step)
            self.writer.add_scalar("train/lr", lr, step)
            self.writer.add_scalar("train/tokens_per_s", tokens_per_s, step)

    def validation(self, step: int, loss: float, bleu: float) -> None:
        if self.writer is not None:
            self.writer.add_scalar("valid/loss", loss, step)
            self.writer.add_scalar("valid/bleu", bleu, step)
            self.writer.flush()

    def __enter__(self) -> Board:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
