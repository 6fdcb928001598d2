"""Word-level distillation (train.teacher): a frozen teacher's distribution over each next
token as a second target, (1 − w) · cross-entropy + w · KL(teacher ‖ model) per real
token."""

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from translator.config import from_dict
from translator.data.tokenizer import PAD
from translator.errors import UserError
from translator.model.checkpoint import load as load_checkpoint
from translator.model.loss import distilled_loss, sequence_loss
from translator.model.rundir import RunDir
from translator.training.trainer import Trainer, train


def batch_logits(seed: int = 0, rows: int = 3, length: int = 5, vocab: int = 7):
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, length, vocab, generator=generator)
    teacher = torch.randn(rows, length, vocab, generator=generator)
    target = torch.randint(4, vocab, (rows, length), generator=generator)
    target[0, 3:] = PAD  # a shorter sentence
    return logits, teacher, target


def test_the_objective_mixes_cross_entropy_and_the_kl_from_the_teacher_over_real_tokens():
    logits, teacher, target = batch_logits()
    real = target != PAD
    kl = F.kl_div(
        logits.log_softmax(-1)[real],
        teacher.log_softmax(-1)[real],
        log_target=True,
        reduction="sum",
    )  # KL(teacher ‖ model)
    loss = distilled_loss(logits, teacher, target, smoothing=0.1, weight=0.3)
    torch.testing.assert_close(loss, 0.7 * sequence_loss(logits, target, 0.1) + 0.3 * kl)


def test_a_teacher_that_agrees_adds_nothing_and_weight_one_is_the_kl_alone():
    logits, teacher, target = batch_logits(seed=1)
    same = distilled_loss(logits, logits.clone(), target, smoothing=0.1, weight=0.4)
    torch.testing.assert_close(same, 0.6 * sequence_loss(logits, target, 0.1))
    assert distilled_loss(logits, logits.clone(), target, 0.1, weight=1.0).abs() < 1e-5
    assert distilled_loss(logits, teacher, target, 0.1, weight=1.0) > 0


def test_padding_positions_add_nothing():
    logits, teacher, target = batch_logits(seed=2)
    changed, changed_teacher = logits.clone(), teacher.clone()
    changed[0, 3:] += 10.0
    changed_teacher[0, 3:] -= 10.0
    a = distilled_loss(logits, teacher, target, 0.1, 0.5)
    torch.testing.assert_close(distilled_loss(changed, changed_teacher, target, 0.1, 0.5), a)


def student_of(trained, tmp_path, **train_values):
    """A fresh 1+1 model on the data the fixture's model trained on, taught by it."""
    config = from_dict(load_checkpoint(trained)["config"])
    train_cfg = dataclasses.replace(
        config.train, run_dir=str(tmp_path / "student"), teacher=str(trained), **train_values
    )
    model = dataclasses.replace(config.model, encoder_layers=1, decoder_layers=1)
    return dataclasses.replace(config, train=train_cfg, model=model)


def test_the_teacher_shapes_the_loss_and_stays_frozen(trained, tmp_path):
    trainer = Trainer(student_of(trained, tmp_path), progress=False)
    teacher = trainer.teacher
    before = {k: v.clone() for k, v in teacher.state_dict().items()}
    batch = trainer.data.train.epoch(0)[0]
    inputs = (batch.src, batch.tgt_in, batch.src_mask, batch.tgt_out)
    trainer.model.eval()  # no dropout: the two losses differ by the teacher alone
    taught = trainer.loss(*inputs)
    trainer.teacher = None
    untaught = trainer.loss(*inputs)
    trainer.teacher = teacher
    weight = trainer.config.train.teacher_weight
    assert taught.item() != pytest.approx(untaught.item())
    assert taught.item() >= (1 - weight) * untaught.item() - 1e-4  # plus a KL, never below 0
    trainer.model.train()
    assert torch.isfinite(trainer.step([batch]).loss)
    assert not teacher.training and not any(p.requires_grad for p in teacher.parameters())
    for key, value in teacher.state_dict().items():
        torch.testing.assert_close(value, before[key])


def test_a_taught_run_learns(trained, tmp_path):
    train(student_of(trained, tmp_path, max_epochs=3, init_from=""), progress=False)
    rows = RunDir(tmp_path / "student").metric_rows()
    assert float(rows[-1]["train_loss"]) < float(rows[0]["train_loss"])
    assert float(rows[-1]["valid_loss"]) < float(rows[0]["valid_loss"])


def test_a_teacher_with_other_tokenizers_is_refused_in_one_line(config, trained):
    config.train.teacher = str(trained)
    with pytest.raises(UserError) as error:
        Trainer(config, progress=False)
    assert str(error.value).startswith(f"cannot distil from {trained}: ")
    assert "prepared with other tokenizers" in str(error.value)


@pytest.mark.parametrize(
    "values, message",
    [
        ({"train": {"teacher_weight": 0.0}}, "'train.teacher_weight' must be in (0, 1]"),
        ({"train": {"teacher_weight": 1.5}}, "'train.teacher_weight' must be in (0, 1]"),
        ({"train": {"teacher": "t.pt", "rdrop": 5.0}}, "use one of them"),
    ],
)
def test_teacher_settings_are_checked(values, message):
    with pytest.raises(UserError) as error:
        from_dict(values)
    assert message in str(error.value)
