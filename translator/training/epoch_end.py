"""What happens when an epoch ends, or the time budget cuts one short: validate, update
the early-stopping state and the learning-rate schedule, and write best.pt, the epoch
snapshot, last.pt and metrics.tsv, in an order that makes a kill at any point harmless.
It drives a Trainer from above (the Trainer never imports this module)."""

from __future__ import annotations

import logging

from translator.evaluation.validation import Validation
from translator.training.trainer import Trainer

log = logging.getLogger(__name__)


def metrics_row(trainer: Trainer, result: Validation, complete: bool) -> dict:
    return {
        "epoch": trainer.state.epoch + 1,
        "complete": int(complete),
        "step": trainer.state.step,
        "lr": trainer.schedule.lr,
        "train_loss": trainer.global_loss() / max(1, trainer.state.epoch_tokens),
        "valid_loss": result.loss,
        "valid_bleu": result.bleu,
        "train_tokens_per_s": trainer.state.epoch_tokens / max(trainer.state.epoch_seconds, 1e-9),
        "skipped_batches": trainer.state.skipped,
        "minutes": trainer.elapsed() / 60,
    }


def end_of_epoch(trainer: Trainer) -> dict:
    """Validate, step the schedule, save: best.pt and the snapshot before last.pt, so a
    kill in between is redone from the previous last.pt with the same outcome."""
    result = trainer.validate()
    row = metrics_row(trainer, result, complete=True)
    average_best = validate_average(trainer, row)
    trainer.check_finite(row["train_loss"])
    trainer.state.start_next_epoch()
    trainer.epoch_loss.zero_()
    trainer.schedule.after_epoch(result.loss, result.bleu, trainer.state.step)
    improved = improves(trainer, result)
    if improved:
        trainer.state.best_bleu, trainer.state.best_loss = result.bleu, result.loss
    if average_best:
        trainer.state.best_ema_bleu = row["ema_valid_bleu"]
    trainer.state.bad_epochs = 0 if improved or average_best else trainer.state.bad_epochs + 1
    trainer.state.history.append(row)
    payload = trainer.payload()
    if trainer.ranks.main:
        write_weights(trainer, payload, improved, trainer.state.epoch, average_best)
        trainer.run_dir.save(payload)
        trainer.run_dir.write_metrics(trainer.state.history)
    log_validation(trainer, row, result, improved)
    return row


def budget_cut(trainer: Trainer) -> dict:
    """Out of time mid-epoch: save the exact state first, then validate the weights as
    they are for best.pt, a snapshot and a metrics row marked incomplete. The state is
    left as if the cut had not happened, so a resumed run goes on identically."""
    payload = trainer.save()
    result = trainer.validate()  # of the weights in `payload`
    row = metrics_row(trainer, result, complete=False)
    average_best = validate_average(trainer, row)
    improved = improves(trainer, result)
    if trainer.ranks.main:
        write_weights(trainer, payload, improved, trainer.state.epoch + 1, average_best)
        trainer.run_dir.write_metrics([*trainer.state.history, row])
    log_validation(trainer, row, result, improved)
    return row


def validate_average(trainer: Trainer, row: dict) -> bool:
    """With train.ema, validate the weights' average too, into `row`'s ema_ columns;
    whether it beats the average's best validation BLEU so far."""
    if not trainer.ema:
        return False
    result = trainer.validate(trainer.ema.model)
    row["ema_valid_loss"], row["ema_valid_bleu"] = result.loss, result.bleu
    return result.bleu > trainer.state.best_ema_bleu


def improves(trainer: Trainer, result: Validation) -> bool:
    """Better BLEU than the best so far, ties broken by validation loss."""
    best = trainer.state
    return (result.bleu, -result.loss) > (best.best_bleu, -best.best_loss)


def write_weights(
    trainer: Trainer, payload: dict, improved: bool, epoch: int, average_best: bool
) -> None:
    if improved:
        trainer.run_dir.save_best(payload)
    if average_best:
        trainer.run_dir.save_ema(payload)
    if trainer.cfg.keep_last:
        trainer.run_dir.save_snapshot(payload, epoch, trainer.cfg.keep_last)


def log_validation(trainer: Trainer, row: dict, result: Validation, improved: bool) -> None:
    trainer.board.validation(trainer.state.step, result.loss, result.bleu)
    average = f", EMA {row['ema_valid_bleu']:.2f}" if "ema_valid_bleu" in row else ""
    log.info(
        "epoch %d%s: train loss %.3f, valid loss %.3f, valid BLEU %.2f%s%s, %.0f tgt tok/s"
        " | %s → %s",
        row["epoch"],
        "" if row["complete"] else " (cut short)",
        row["train_loss"],
        result.loss,
        result.bleu,
        " (best)" if improved else "",
        average,
        row["train_tokens_per_s"],
        trainer.data.bleu_src[0],
        result.hypotheses[0],
    )
