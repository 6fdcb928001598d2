"""TensorBoard logging: the scalars a user looks for, the same values as metrics.tsv."""

import builtins

import pytest
from conftest import generated_pairs, tiny_config, write_tatoeba
from test_train import recorded_norms

from translator.corpus.preparer import prepare
from translator.errors import UserError
from translator.model.rundir import RunDir
from translator.training.tensorboard import Board
from translator.training.trainer import train


def scalars(directory) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(directory))
    events.Reload()
    return {
        tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]
    }


def test_training_writes_loss_grad_norm_lr_speed_and_validation(tmp_path, monkeypatch):
    pytest.importorskip("tensorboard")
    write_tatoeba(tmp_path / "corpus.tsv", generated_pairs(200))
    config = tiny_config(tmp_path, train={"tensorboard": True, "max_epochs": 2})
    prepare(config.data)
    norms = recorded_norms(monkeypatch)
    train(config, progress=False)
    found = scalars(tmp_path / "run/tensorboard")
    assert {
        "train/loss",
        "train/grad_norm",
        "train/grad_norm_max",
        "train/lr",
        "train/tokens_per_s",
        "valid/loss",
        "valid/bleu",
    } <= set(found)
    rows = RunDir(tmp_path / "run").metric_rows()
    assert [step for step, _ in found["valid/bleu"]] == [int(r["step"]) for r in rows]
    for (_, bleu), row in zip(found["valid/bleu"], rows, strict=True):
        assert bleu == pytest.approx(float(row["valid_bleu"]), rel=1e-4)
    assert found["train/loss"][0][0] == 1 and all(v > 0 for _, v in found["train/lr"])
    # beside the loss, the mean and the largest gradient norm of the same updates
    steps = [step for step, _ in found["train/loss"]]
    mean, largest = found["train/grad_norm"], found["train/grad_norm_max"]
    assert [step for step, _ in mean] == [step for step, _ in largest] == steps
    assert all(0 < m <= top for (_, m), (_, top) in zip(mean, largest, strict=True))
    assert mean[0][1] == largest[0][1] == pytest.approx(norms[0])  # one update: its own
    assert mean[1][1] == pytest.approx(sum(norms[1:5]) / 4)  # then log_every (5) at a time

    train(config, overwrite=True, progress=False)  # a new run starts a new log
    assert len(scalars(tmp_path / "run/tensorboard")["valid/bleu"]) == len(rows)


def test_off_by_default_and_a_clear_error_without_the_package(tmp_path, monkeypatch):
    board = Board(tmp_path, enabled=False)
    board.training(1, 1.0, 0.5, 0.7, 1e-3, 100.0)
    board.validation(1, 1.0, 2.0)
    assert not (tmp_path / "tensorboard").exists()

    real_import = builtins.__import__

    def no_tensorboard(name, *args, **kwargs):
        if name.startswith("torch.utils.tensorboard") or name.startswith("tensorboard"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tensorboard)
    with pytest.raises(UserError, match=r'pip install "translator\[tensorboard\]"'):
        Board(tmp_path, enabled=True)
