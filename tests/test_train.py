import copy
import math
import signal
from contextlib import contextmanager
from dataclasses import replace

import pytest
import torch

from translator.data.layout import split_file
from translator.data.lines import read_lines
from translator.errors import UserError
from translator.inference.text import Translator
from translator.inference.torch_engine import TorchEngine
from translator.model import checkpoint
from translator.model.rundir import RunDir, checkpoint_in
from translator.training import oom, validator
from translator.training import trainer as train_module
from translator.training.tensorboard import Board
from translator.training.trainer import (
    Interrupted,
    StopReason,
    Trainer,
    TrainingDiverged,
    train,
)

CPU = torch.device("cpu")


def with_train(config, **values):
    for key, value in values.items():
        setattr(config.train, key, value)
    return config


def test_checkpoint_round_trip_gives_identical_translations(config, tmp_path):
    trainer = Trainer(config, progress=False)
    trainer.run_dir.start(config.to_dict(), resume=False)
    trainer.fit()
    sentences = read_lines(split_file(config.data.dir, "test", "en"))
    engine = TorchEngine(trainer.model, trainer.src_tok, trainer.tgt_tok)
    in_memory = Translator(engine, config.decode)
    loaded = Translator.from_checkpoint(tmp_path / "run/checkpoints/last.pt", CPU)
    saved_config = (
        loaded.engine.config
    )  # as the trainer resolved it: pad_to_multiple 0 is 1 in fp32
    assert saved_config == trainer.config and saved_config.train.pad_to_multiple == 1
    assert replace(saved_config, train=replace(saved_config.train, pad_to_multiple=0)) == config
    assert loaded.translate(sentences) == in_memory.translate(sentences)
    payload = checkpoint.load(tmp_path / "run/checkpoints/last.pt")
    assert payload["train_state"]["epoch"] == 2
    assert {"optimizer", "schedule", "rng", "tokenizers", "config"} <= payload.keys()


def test_resume_continues_exactly_where_it_stopped(config, tmp_path):
    straight = train(with_train(config, max_epochs=2), progress=False)
    straight_weights = checkpoint.load(tmp_path / "run/checkpoints/last.pt")["model"]

    first = train(with_train(config, max_epochs=1), overwrite=True, progress=False)
    assert first.state.epoch == 1
    resumed = train(with_train(config, max_epochs=2), resume=True, progress=False)
    assert [row["epoch"] for row in resumed.history] == [2]
    assert resumed.state.step == straight.state.step
    weights = checkpoint.load(tmp_path / "run/checkpoints/last.pt")["model"]
    for name, tensor in straight_weights.items():
        torch.testing.assert_close(weights[name], tensor, msg=name)
    rows = (tmp_path / "run/metrics.tsv").read_text().splitlines()
    assert [row.split("\t")[0] for row in rows] == ["epoch", "1", "2"]
    assert straight.history[0]["valid_loss"] == first.history[0]["valid_loss"]


def test_existing_run_needs_resume_or_overwrite(config):
    train(config, progress=False)
    with pytest.raises(UserError, match="--resume.*--overwrite"):
        train(config, progress=False)


def test_resume_refuses_a_different_model(config):
    train(config, progress=False)
    config.model.d_model = 64
    with pytest.raises(UserError, match=r"\[model\] section differs"):
        train(config, resume=True, progress=False)


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(config, tmp_path, monkeypatch):
    train(with_train(config, max_epochs=1), progress=False)
    real_loss = train_module.sequence_loss
    monkeypatch.setattr(
        train_module, "sequence_loss", lambda *args, **kw: real_loss(*args, **kw) * math.nan
    )
    with pytest.raises(TrainingDiverged, match=r"diverged.*last good checkpoint is .*last.pt"):
        train(with_train(config, max_epochs=3), resume=True, progress=False)
    monkeypatch.undo()
    payload = checkpoint.load(tmp_path / "run/checkpoints/last.pt")
    assert payload["train_state"]["epoch"] == 1
    assert all(torch.isfinite(t).all() for t in payload["model"].values())
    translator = Translator.from_checkpoint(tmp_path / "run/checkpoints/last.pt", CPU)
    assert len(translator.translate(["I can see the cat."])) == 1


def test_time_budget_stops_and_saves(config, tmp_path):
    result = train(with_train(config, max_epochs=50, max_minutes=1e-6), progress=False)
    assert result.state.epoch == 0 and result.state.step == 1 and result.state.position == 1
    assert result.stop_reason is StopReason.TIME_BUDGET and result.history[0]["complete"] == 0
    assert result.message == "time budget of 1e-06 minutes used"
    assert result.best_bleu == result.history[0]["valid_bleu"] >= 0  # the cut's, for best.pt
    assert (tmp_path / "run/checkpoints/best.pt").is_file()


def test_update_budget_stops_mid_epoch_and_resumes_to_it(config):
    cut = train(with_train(config, max_epochs=50, max_updates=3), progress=False)
    assert cut.state.step == 3 and cut.stop_reason is StopReason.MAX_UPDATES
    assert cut.message == "reached train.max_updates (3)"
    assert cut.history[-1]["complete"] == 0  # an epoch of the test data is longer than 3
    again = train(with_train(config, max_epochs=50, max_updates=5), resume=True, progress=False)
    assert again.state.step == 5  # the limit counts every update of the run, as fairseq's


def test_early_stopping_on_validation_bleu(config):
    result = train(
        with_train(config, max_epochs=50, patience=1, lr=0.0, warmup_steps=1), progress=False
    )  # a model that cannot learn stops improving at once
    assert result.stop_reason is StopReason.EARLY_STOPPING
    assert result.message == "early stopping: no better validation BLEU in 1 epochs"
    assert result.state.epoch < 50


def test_validation_decodes_greedily_whatever_decode_beam_says(config, monkeypatch):
    config.decode.beam = 4
    trainer = Trainer(config, progress=False)
    beams = []

    class Recording(Translator):
        def __init__(self, engine, decode):
            beams.append(decode.beam)
            super().__init__(engine, decode)

    monkeypatch.setattr(validator, "Translator", Recording)
    trainer.validator(trainer.model)
    assert beams == [1]
    assert config.decode.beam == 4  # translate and eval still get the configured beam


def test_interrupted_write_leaves_the_old_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "last.pt"
    checkpoint.save({"weights": torch.ones(3)}, path)

    def crash(obj, f):
        with open(f, "wb") as out:
            out.write(b"half a checkpoint")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.save({"weights": torch.zeros(3)}, path)
    monkeypatch.undo()
    assert checkpoint.load(path)["weights"].tolist() == [1.0, 1.0, 1.0]
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]


def test_unreadable_checkpoint_is_a_user_error(tmp_path):
    (tmp_path / "best.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(UserError, match="cannot read checkpoint"):
        checkpoint.load(tmp_path / "best.pt")
    with pytest.raises(UserError, match="no checkpoint at"):
        checkpoint.load(tmp_path / "missing.pt")


def test_snapshots_rotate_and_average_to_the_mean(config, tmp_path):
    train(with_train(config, max_epochs=3, keep_last=2), progress=False)
    ckpt = tmp_path / "run/checkpoints"
    assert [p.name for p in checkpoint.snapshots(ckpt)] == ["epoch0002.pt", "epoch0003.pt"]
    snapshot = checkpoint.load(ckpt / "epoch0003.pt")
    assert "optimizer" not in snapshot and snapshot["train_state"]["epoch"] == 3

    path = checkpoint.average_last(tmp_path / "run", last=2)
    assert path == ckpt / "average2.pt"
    averaged = checkpoint.load(path)
    a, b = (checkpoint.load(ckpt / n)["model"] for n in ("epoch0002.pt", "epoch0003.pt"))
    for name, tensor in averaged["model"].items():
        torch.testing.assert_close(tensor, (a[name] + b[name]) / 2)
    assert averaged["averaged_from"] == ["epoch0002.pt", "epoch0003.pt"]
    translator = Translator.from_checkpoint(path, CPU)
    assert len(translator.translate(["Tom can see the cat."])) == 1

    with pytest.raises(UserError, match="has 2 epoch snapshots, 3 are needed"):
        checkpoint.average_last(tmp_path / "run", last=3)


def test_the_run_writes_its_model_as_train_final_says(config, tmp_path):
    result = train(with_train(config, max_epochs=3, keep_last=2, final="average2"), progress=False)
    run = RunDir(tmp_path / "run")
    assert result.final == run.final == (run.checkpoints / "average2.pt", "train.final = average2")
    assert checkpoint.load(run.final.path)["averaged_from"] == ["epoch0002.pt", "epoch0003.pt"]
    assert Translator.from_run(run.path, CPU).translate("Tom can see the cat.")
    # too few epochs to average, or no moving average: best.pt, and the record says why
    fewer = (run.best, "train.final = average5 (2 of 5 epochs: best.pt instead)")
    assert run.write_final("average5", 5) == fewer == run.final
    no_average = (run.best, "train.final = ema (no moving average yet: best.pt instead)")
    assert run.write_final("ema", 0) == no_average
    train(with_train(config, max_epochs=1, final="best"), overwrite=True, progress=False)
    assert run.final == (run.best, "train.final = best")


def test_a_signal_writes_the_runs_model_so_far(config, tmp_path, monkeypatch):
    first = train(with_train(config, max_epochs=1, keep_last=1, final="average1"), progress=False)
    run = RunDir(tmp_path / "run")
    with sigterm_after(monkeypatch, first.state.step + 2), pytest.raises(Interrupted):
        train(with_train(config, max_epochs=3), resume=True, progress=False)
    assert run.final == (run.checkpoints / "average1.pt", "train.final = average1")
    assert checkpoint.load(run.final.path)["averaged_from"] == ["epoch0001.pt"]


def test_nothing_is_recorded_before_a_first_validation(tmp_path):
    run = RunDir(tmp_path / "run")
    run.checkpoints.mkdir(parents=True)
    assert run.write_final("best", 0) is None and not run.final_record.exists()
    assert run.final == (run.best, "the run's best.pt: it records no train.final")
    for bad in ("[1, 2]", '{"checkpoint": "/etc/passwd", "why": "?"}'):
        run.final_record.write_text(bad)
        with pytest.raises(UserError, match="final.json is not a run's record of its model"):
            _ = run.final
    run.final_record.write_text('{"checkpoint": "checkpoints/average5.pt", "why": "x"}')
    with pytest.raises(UserError, match="names .*average5.pt, which is missing"):
        checkpoint_in(run.path)


def recorded_losses(monkeypatch) -> list[float]:
    """Every update's mean loss, in order, for the runs that follow."""
    losses: list[float] = []
    step = Trainer.step

    def recording(self, batches, *args):
        out = step(self, batches, *args)
        losses.append(out.loss.item() / sum(b.n_tokens for b in batches))
        return out

    monkeypatch.setattr(Trainer, "step", recording)
    return losses


def exact_config(config, tmp_path, name):
    config.model.dropout = 0.3  # so that the random state matters
    config.train.run_dir = str(tmp_path / name)
    return with_train(config, max_epochs=2, save_every=3)


@contextmanager
def sigterm_after(monkeypatch, step: int):
    """Within the block, training receives SIGTERM during update `step` (so the stop is
    decided after it)."""
    real = Trainer.step

    def and_signal(self, *args, **kwargs):
        loss = real(self, *args, **kwargs)
        if self.state.step == step:
            self.signals.requested = signal.SIGTERM
        return loss

    monkeypatch.setattr(Trainer, "step", and_signal)
    yield
    monkeypatch.setattr(Trainer, "step", real)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_resume_mid_epoch_after_a_signal_is_exact(config, tmp_path, monkeypatch, precision):
    """In either precision: also two runs of one config on one machine are identical. What
    is logged every train.log_every updates too: the window since the last log (4) goes on
    across the stop (after 5)."""
    config.train.precision, config.train.log_every = precision, 4
    losses = recorded_losses(monkeypatch)
    logged = []
    monkeypatch.setattr(Board, "training", lambda self, *scalars: logged.append(scalars[:4]))
    straight = train(exact_config(config, tmp_path, "straight"), progress=False)
    assert checkpoint.load(tmp_path / "straight/checkpoints/last.pt")["precision"] == precision
    expected, losses[:] = list(losses), []
    expected_logs, logged[:] = list(logged), []
    config = exact_config(config, tmp_path, "cut")
    interrupted = pytest.raises(Interrupted, match="SIGTERM in epoch 1 after step 5.*--resume")
    with sigterm_after(monkeypatch, 5), interrupted:  # mid-epoch, 2 after the save at 3
        train(config, progress=False)
    resumed = train(config, resume=True, progress=False)
    assert losses == pytest.approx(expected, abs=1e-6)
    assert logged == expected_logs  # (step, loss, grad norm, largest) of each window
    assert resumed.state.step == straight.state.step
    assert_same_run(tmp_path / "straight", tmp_path / "cut")


def test_resume_across_a_budget_cut_is_exact(config, tmp_path, monkeypatch):
    losses = recorded_losses(monkeypatch)
    train(exact_config(config, tmp_path, "straight"), progress=False)
    expected, losses[:] = list(losses), []
    config = exact_config(config, tmp_path, "cut")
    cut = train(with_train(config, max_minutes=1e-6), progress=False)
    assert cut.state.position == 1 and cut.history[-1]["complete"] == 0
    train(with_train(config, max_minutes=0.0), resume=True, progress=False)
    assert losses == pytest.approx(expected, abs=1e-6)
    assert_same_run(tmp_path / "straight", tmp_path / "cut")


def assert_same_run(a, b):
    """Same final weights, and the same metrics but for the timing columns."""
    wa, wb = (checkpoint.load(d / "checkpoints/last.pt")["model"] for d in (a, b))
    for name, tensor in wa.items():
        torch.testing.assert_close(wb[name], tensor, rtol=0, atol=1e-6, msg=name)
    rows_a, rows_b = (RunDir(d).metric_rows() for d in (a, b))
    timing = ("train_tokens_per_s", "minutes")
    strip = lambda rows: [{k: v for k, v in r.items() if k not in timing} for r in rows]  # noqa: E731
    assert strip(rows_a) == strip(rows_b) and len(rows_a) == 2


def test_update_freq_is_one_update_over_the_batches_tokens(config):
    """The gradient of an update over two batches is that of their summed loss divided by
    their total target tokens (not the mean of two per-batch means)."""
    config.model.dropout = 0.0  # on the CPU in fp32: the arithmetic is the question here
    trainer = Trainer(
        with_train(config, update_freq=2, clip_norm=1e9, device="cpu"), progress=False
    )
    reference = copy.deepcopy(trainer.model)
    seen = {}
    trainer.optimizer.step = lambda: seen.update(
        {n: p.grad.clone() for n, p in trainer.model.named_parameters()}
    )
    batches = [trainer.data.train[0], trainer.data.train[-1]]  # short and long sentences
    assert batches[0].n_tokens != batches[1].n_tokens
    trainer.step(batches)
    on_device = [b.to(trainer.device) for b in batches]
    with trainer.autocast:  # bf16 on CUDA, as the trainer computes
        logits = [reference(b.src, b.tgt_in, b.src_mask) for b in on_device]
    pairs = zip(logits, on_device, strict=True)
    loss = sum(train_module.sequence_loss(x, b.tgt_out, 0.1) for x, b in pairs)
    (loss / sum(b.n_tokens for b in batches)).backward()
    for name, param in reference.named_parameters():
        torch.testing.assert_close(seen[name], param.grad, rtol=1e-4, atol=1e-7, msg=name)


# ---- what the log shows: the gradient norm, the loss since the last log ----------------
def recorded_norms(monkeypatch) -> list[float]:
    """Every gradient norm clip_grad_norm_ returns (the norm before clipping), in order, for
    the runs that follow."""
    norms: list[float] = []
    clip = torch.nn.utils.clip_grad_norm_

    def recording(*args, **kwargs):
        norm = clip(*args, **kwargs)
        norms.append(norm.item())
        return norm

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", recording)
    return norms


def test_metrics_hold_each_epochs_mean_and_largest_gradient_norm_before_clipping(
    config, tmp_path, monkeypatch
):
    norms = recorded_norms(monkeypatch)
    config = with_train(config, max_epochs=2, clip_norm=0.1)
    result = train(config, progress=False)
    per_epoch = len(norms) // 2
    assert len(norms) == result.state.step == 2 * per_epoch
    rows = RunDir(tmp_path / "run").metric_rows()
    for epoch, (row, written) in enumerate(zip(result.history, rows, strict=True)):
        epochs_norms = norms[epoch * per_epoch : (epoch + 1) * per_epoch]
        assert row["grad_norm"] == pytest.approx(sum(epochs_norms) / per_epoch, rel=1e-6)
        assert row["grad_norm_max"] == max(epochs_norms)
        assert float(written["grad_norm"]) == pytest.approx(row["grad_norm"], rel=1e-5)
        assert float(written["grad_norm_max"]) == pytest.approx(row["grad_norm_max"], rel=1e-5)

    # the first update's gradient, computed apart from the trainer: its norm, unclipped
    trainer = Trainer(config, progress=False)  # the same initial weights
    plan, updates = trainer.start_epoch()
    batch = plan[updates[0][0]].to(trainer.device)
    logits = trainer.model(batch.src, batch.tgt_in, batch.src_mask)
    loss = train_module.sequence_loss(logits, batch.tgt_out, config.train.label_smoothing)
    (loss / batch.n_tokens).backward()
    gradient = torch.cat([p.grad.flatten() for p in trainer.model.parameters()])
    assert norms[0] == pytest.approx(gradient.norm().item(), rel=1e-5)
    assert norms[0] > 10 * config.train.clip_norm  # clipped, and logged as it was before


def test_a_loss_spike_shows_in_its_window_and_train_loss_stays_the_epochs_mean(config, monkeypatch):
    """Every train.log_every updates the loss logged is that of the updates since the last
    log: one update's loss (as reported; training is unchanged) made 100 times larger shows
    in its window alone, and metrics.tsv's train_loss is still the mean of the epoch."""
    updates, logged = [], []
    step = Trainer.step

    def spiking(self, batches, tokens=None, counted=True):
        out = step(self, batches, tokens, counted)
        loss = out.loss * (100 if self.state.step == 5 else 1)
        updates.append((loss.item(), tokens))
        return out._replace(loss=loss)

    monkeypatch.setattr(Trainer, "step", spiking)
    monkeypatch.setattr(Board, "training", lambda self, step, loss, *rest: logged.append(loss))
    result = train(with_train(config, max_epochs=1, log_every=2), progress=False)
    assert len(updates) == 8 and len(logged) == 5  # logs after updates 1, 2, 4, 6, 8
    for loss, (start, end) in zip(logged, [(0, 1), (1, 2), (2, 4), (4, 6), (6, 8)], strict=True):
        window = updates[start:end]
        assert loss == pytest.approx(sum(x for x, _ in window) / sum(t for _, t in window))
    assert logged[3] > 20 * max(logged[:3] + logged[4:])  # updates 5-6: the spike
    epoch_mean = sum(x for x, _ in updates) / sum(t for _, t in updates)
    assert result.history[0]["train_loss"] == pytest.approx(epoch_mean, rel=1e-6)
    assert logged[4] < result.history[0]["train_loss"] / 5  # the last window's is not it


def test_an_infinite_gradient_norm_stops_training_before_anything_is_saved(config, monkeypatch):
    """A norm that is not finite has made the weights NaN as clipping scaled by it."""
    clip = torch.nn.utils.clip_grad_norm_
    infinite = lambda *args, **kwargs: clip(*args, **kwargs) * math.inf  # noqa: E731
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", infinite)
    stopped = r"diverged: gradient norm is inf at epoch 1, step 1; nothing was saved"
    with pytest.raises(TrainingDiverged, match=stopped):
        train(with_train(config, max_epochs=1), progress=False)


def test_a_last_pt_written_before_the_gradient_norm_resumes(config, tmp_path):
    """Its epochs have no grad_norm in metrics.tsv, and the epoch it stopped in has the
    mean of the updates since the resume."""
    train(with_train(config, max_epochs=2, max_updates=10), progress=False)  # mid-epoch 2
    last = tmp_path / "run/checkpoints/last.pt"
    payload = checkpoint.load(last)
    new = ("grad_norm", "window_", "epoch_updates")
    old = lambda d: {k: v for k, v in d.items() if not any(n in k for n in new)}  # noqa: E731
    payload["train_state"] = old(payload["train_state"])
    payload["train_state"]["history"] = [old(row) for row in payload["train_state"]["history"]]
    checkpoint.save(payload, last)
    result = train(with_train(config, max_updates=0), resume=True, progress=False)
    rows = RunDir(tmp_path / "run").metric_rows()
    assert [r["grad_norm"] for r in rows][0] == "" and float(rows[1]["grad_norm"]) > 0
    assert result.history[-1]["grad_norm"] <= result.history[-1]["grad_norm_max"]


def test_out_of_memory_skips_the_batch_and_three_in_a_row_stop(config, monkeypatch):
    calls = []
    step = Trainer.step

    def sometimes_out_of_memory(self, batches, *args):
        calls.append(len(batches))
        if len(calls) in failing:
            raise oom.OUT_OF_MEMORY("CUDA out of memory (injected)")
        return step(self, batches, *args)

    monkeypatch.setattr(Trainer, "step", sometimes_out_of_memory)
    failing = {2}
    result = train(with_train(config, max_epochs=1), progress=False)
    assert result.state.skipped == 1 and result.history[0]["skipped_batches"] == 1
    assert result.state.step == len(calls) - 1
    calls.clear()
    failing = {2, 3, 4}
    with pytest.raises(UserError, match="out of memory 3 updates in a row.*train.max_tokens"):
        train(config, overwrite=True, progress=False)
