"""R-Drop (train.rdrop): each batch twice through the model in one pass, the objective the
copies' mean cross-entropy plus alpha times their symmetric KL divergence per real token."""

import pytest
import torch
import torch.nn.functional as F
from test_train import exact_config, with_train

from translator.config import from_dict
from translator.data.tokenizer import PAD
from translator.errors import UserError
from translator.model.loss import rdrop_loss, sequence_loss, twice
from translator.model.rundir import RunDir
from translator.training.trainer import Trainer, train


def batch_logits(seed: int = 0, rows: int = 3, length: int = 5, vocab: int = 7):
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(2 * rows, length, vocab, generator=generator)
    target = torch.randint(4, vocab, (rows, length), generator=generator)
    target[0, 3:] = PAD  # a shorter sentence
    return logits, target


def test_two_equal_draws_cost_the_cross_entropy_of_one():
    logits, target = batch_logits()
    one = logits[:3]
    same = torch.cat([one, one])
    for alpha in (0.0, 5.0):
        loss = rdrop_loss(same, target, smoothing=0.1, alpha=alpha)
        torch.testing.assert_close(loss, sequence_loss(one, target, smoothing=0.1))


def test_the_penalty_is_alpha_times_the_mean_of_both_kl_directions_over_real_tokens():
    logits, target = batch_logits(seed=1)
    first, second = logits.chunk(2)
    real = target != PAD
    lp1, lp2 = first.log_softmax(-1)[real], second.log_softmax(-1)[real]
    kl12 = F.kl_div(lp2, lp1, log_target=True, reduction="sum")  # KL(p1 ‖ p2)
    kl21 = F.kl_div(lp1, lp2, log_target=True, reduction="sum")
    cross_entropy = (sequence_loss(first, target, 0.1) + sequence_loss(second, target, 0.1)) / 2
    loss = rdrop_loss(logits, target, smoothing=0.1, alpha=3.0)
    torch.testing.assert_close(loss, cross_entropy + 3.0 * (kl12 + kl21) / 2)


def test_padding_positions_add_nothing():
    logits, target = batch_logits(seed=2)
    changed = logits.clone()
    changed[0, 3:] += 10.0  # the padded positions of the first sentence, first copy
    changed[3, 4:] -= 10.0  # ... and of its second copy
    a = rdrop_loss(logits, target, 0.1, 5.0)
    torch.testing.assert_close(rdrop_loss(changed, target, 0.1, 5.0), a)


def test_twice_stacks_every_input_on_itself():
    src, mask = torch.arange(6).view(2, 3), torch.ones(2, 1, 1, 3, dtype=torch.bool)
    doubled_src, doubled_mask = twice(src, mask)
    assert doubled_src.tolist() == [[0, 1, 2], [3, 4, 5], [0, 1, 2], [3, 4, 5]]
    assert doubled_mask.shape == (4, 1, 1, 3)


def test_a_training_step_runs_each_batch_twice_and_differs_by_its_dropout(config, tmp_path):
    config = exact_config(config, tmp_path, "rdrop")
    config.train.rdrop = 5.0
    trainer = Trainer(config, progress=False)
    seen = []
    hook = trainer.model.register_forward_hook(lambda m, args, out: seen.append(out.shape))
    batch = trainer.data.train.epoch(0)[0]
    loss = trainer.step([batch]).loss
    hook.remove()
    assert seen[0][0] == 2 * batch.src.size(0)
    trainer.model.eval()
    with torch.no_grad():  # the same rows through the same weights: equal without dropout
        logits = trainer.model(*twice(batch.src, batch.tgt_in, batch.src_mask))
    first, second = logits.chunk(2)
    torch.testing.assert_close(first, second)
    assert torch.isfinite(loss) and loss.item() > 0


def test_an_rdrop_run_learns(config, tmp_path):
    """(Exact resume with it on: test_levers.test_resume_with_every_lever_on_is_exact.)"""
    train(with_train(config, max_epochs=3, rdrop=5.0), progress=False)
    rows = RunDir(tmp_path / "run").metric_rows()
    assert float(rows[-1]["train_loss"]) < float(rows[0]["train_loss"])
    assert float(rows[-1]["valid_loss"]) < float(rows[0]["valid_loss"])


@pytest.mark.parametrize(
    "values, message",
    [
        ({"train": {"rdrop": -1.0}}, "train.rdrop' must be >= 0"),
        ({"train": {"rdrop": 5.0}, "model": {"dropout": 0.0}}, "needs model.dropout > 0"),
    ],
)
def test_rdrop_settings_are_checked(values, message):
    with pytest.raises(UserError) as error:
        from_dict(values)
    assert message in str(error.value)
