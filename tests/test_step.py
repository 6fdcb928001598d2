"""The training step at the hardware's limit: train.precision, static shapes
(train.pad_to_multiple), the compiled step (train.compile, fullgraph), no host syncs in
an update, and model.attention_dropout. (Exact resume in each precision:
test_train.test_resume_mid_epoch_after_a_signal_is_exact.)"""

import dataclasses
import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch._dynamo
from step_profile import DispatchCounter, op_kind
from test_cli import CONFIG
from test_train import with_train

from translator.data.batching import collate_padded, round_up
from translator.data.dataset import load_training_data
from translator.inspect.info import describe
from translator.model import checkpoint
from translator.model.loss import sequence_loss
from translator.model.transformer import CrossAttention, SelfAttention, Transformer
from translator.training import precision
from translator.training.graphs import GraphedSteps, uses_cuda_graphs
from translator.training.tensorboard import Board
from translator.training.trainer import Trainer, train

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


# ---- train.precision -------------------------------------------------------------------
def test_auto_is_bf16_on_cuda_and_on_cpus_with_bf16_instructions(monkeypatch):
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: True)
    assert precision.resolve("auto", CPU) == "bf16"
    assert "this CPU has bf16" in precision.reason("auto", CPU)
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: False)
    assert precision.resolve("auto", CPU) == "fp32"
    assert "this CPU has no bf16" in precision.reason("auto", CPU)
    assert precision.resolve("auto", CUDA) == "bf16"
    assert precision.resolve("fp32", CUDA) == "fp32"
    assert precision.resolve("bf16", CPU) == "bf16"


def test_bf16_computes_matmuls_in_bf16_with_fp32_weights_gradients_and_loss(config):
    trainer = Trainer(with_train(config, precision="bf16"), progress=False)
    seen = []
    hook = trainer.model.project.register_forward_hook(lambda m, a, out: seen.append(out.dtype))
    batch = trainer.data.train[0]
    loss = trainer.batch_loss(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_out)
    loss.backward()
    hook.remove()
    assert seen == [torch.bfloat16] and loss.dtype == torch.float32
    for param in trainer.model.parameters():
        assert param.dtype == torch.float32 and param.grad.dtype == torch.float32


def test_a_run_logs_its_precision_once_and_every_checkpoint_records_it(config, tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="translator.training"):
        train(with_train(config, precision="bf16", max_epochs=1, keep_last=1), progress=False)
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("precision")]
    assert said == ["precision bf16 (train.precision = bf16)"]
    for name in ("last.pt", "best.pt", "epoch0001.pt"):
        assert checkpoint.load(tmp_path / "run/checkpoints" / name)["precision"] == "bf16"
    assert "precision: trained in bf16 (train.precision bf16)" in describe(tmp_path / "run")


def test_resuming_in_another_precision_says_so(config, tmp_path, caplog):
    train(with_train(config, precision="fp32", max_epochs=1), progress=False)
    with caplog.at_level(logging.WARNING, logger="translator.training"):
        train(with_train(config, precision="bf16", max_epochs=2), resume=True, progress=False)
    assert any(
        "was trained in fp32; it continues in bf16" in r.getMessage() for r in caplog.records
    )


# ---- static shapes ---------------------------------------------------------------------
@pytest.mark.parametrize("multiple", [4, 8])
def test_static_shapes_are_a_small_menu_that_holds_every_pair_once(config, multiple):
    plain = load_training_data(config).train
    static = load_training_data(with_train(config, pad_to_multiple=multiple)).train
    assert sorted(np.concatenate(static.groups)) == sorted(np.concatenate(plain.groups))
    assert static.tokens.sum() == plain.tokens.sum()  # the same real target tokens
    rows, src_len, tgt_len = static.shapes.T
    assert (src_len % multiple == 0).all() and (tgt_len % multiple == 0).all()
    budget = config.train.max_tokens
    assert (rows == np.maximum(1, budget // np.maximum(src_len, tgt_len))).all()
    # each shape is fixed by its two rounded lengths: at most one per pair of them
    assert static.distinct_shapes() == len({(s, t) for s, t in zip(src_len, tgt_len, strict=True)})
    assert static.distinct_shapes() < plain.distinct_shapes()
    for i in range(len(static)):
        batch = static[i]
        assert (batch.src.shape[0], batch.src.shape[1], batch.tgt_out.shape[1]) == tuple(
            static.shapes[i]
        )
        assert batch.n_tokens == static.tokens[i]
    assert 0 <= plain.padding() < static.padding() < 1


def test_lengths_round_up_to_the_multiple():
    lengths = np.array([3, 5])
    assert round_up(lengths, 4).tolist() == [4, 8]
    assert round_up(lengths, 1).tolist() == [3, 5]


def test_empty_rows_and_wider_padding_change_no_loss_or_gradient(config):
    torch.manual_seed(0)
    model = Transformer(config.model, 60, 320)  # dropout 0: the same function twice
    src = np.array([[5, 6, 7, 2], [8, 9, 2, 0]])
    tgt = np.array([[10, 11, 2], [12, 2, 0]])
    wide = lambda a, n: np.pad(a, ((0, 0), (0, n - a.shape[1])))  # noqa: E731
    results = []
    for batch in (collate_padded(src, tgt), collate_padded(wide(src, 8), wide(tgt, 8), rows=5)):
        model.zero_grad()
        loss = sequence_loss(model(batch.src, batch.tgt_in, batch.src_mask), batch.tgt_out, 0.1)
        loss.backward()
        results.append((loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}))
        assert batch.n_tokens == 5
    (loss_a, grads_a), (loss_b, grads_b) = results
    torch.testing.assert_close(loss_b, loss_a, rtol=1e-5, atol=1e-6)
    for name, grad in grads_a.items():
        torch.testing.assert_close(grads_b[name], grad, rtol=1e-4, atol=1e-6, msg=name)


# ---- the compiled step -----------------------------------------------------------------
def twenty_losses(config) -> tuple[list[float], Trainer]:
    trainer = Trainer(config, progress=False)
    plan, order = trainer.start_epoch()
    losses = []
    for i in range(20):
        batch = plan[order[i % len(order)]]
        losses.append(trainer.train_step([batch]).item() / batch.n_tokens)
    return losses, trainer


def test_the_compiled_step_has_no_graph_break_and_matches_eager_over_20_updates(config, tmp_path):
    """Static shapes (train.pad_to_multiple): one graph per shape, fullgraph (a graph break
    would raise), backward compiled with it; losses within 1e-4 of eager (dropout 0, fp32)."""
    config = with_train(config, pad_to_multiple=8)
    eager, _ = twenty_losses(config)
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled, trainer = twenty_losses(with_train(config, compile=True))
    plan = trainer.data.train
    seen = {tuple(plan.shapes[i]) for i in epoch_batches(trainer, 20)}
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    breaks = sum(torch._dynamo.utils.counters["graph_break"].values())
    torch._dynamo.reset()
    assert breaks == 0
    assert 1 <= graphs <= len(seen)
    assert compiled == pytest.approx(eager, abs=1e-4)


# ---- CUDA graphs ----------------------------------------------------------------------
def test_cuda_graphs_only_on_cuda_in_one_process(config, caplog):
    on = dataclasses.replace(config.train, cuda_graphs=True)
    assert uses_cuda_graphs(on, CUDA, world=1)
    assert not uses_cuda_graphs(on, CPU, world=1)
    assert not uses_cuda_graphs(on, CUDA, world=2)
    assert not uses_cuda_graphs(config.train, CUDA, world=1)
    with caplog.at_level(logging.INFO, logger="translator"):
        trainer = Trainer(with_train(config, cuda_graphs=True), progress=False)
        trainer.log_start()
    assert trainer.graphed is None
    assert "CUDA graphs: off, as they need CUDA in one process" in caplog.text


def recorder_like_cuda_graphs(recorded: list):
    """Records as torch.cuda.graph does: nothing runs while recording; each replay runs the
    recorded work again over the same input tensors and writes the same output tensor. So a
    step that forgot to copy a new batch in, or to read its loss before the next replay,
    would give other losses than eager."""

    def record(run):
        out = torch.zeros(())
        recorded.append(run)
        return (lambda: out.copy_(run().detach())), out

    return record


@pytest.mark.parametrize("update_freq", [1, 2])
def test_graphed_steps_give_the_eager_losses_and_weights(config, update_freq):
    """train.cuda_graphs' bookkeeping (graphs.py) on the CPU, with a recorder that has a
    CUDA graph's semantics: per shape WARMUP eager batches, then one recording replayed;
    gradients added in place (update_freq 2 accumulates); dropout on."""
    config = with_train(config, update_freq=update_freq, pad_to_multiple=8)
    config.model.dropout = 0.1
    trainers, losses, recorded = [], [], []
    for graph in (False, True):
        trainer = Trainer(config, progress=False)
        if graph:
            params = list(trainer.model.parameters())
            record = recorder_like_cuda_graphs(recorded)
            trainer.graphed = GraphedSteps(trainer.forward_backward, params, CPU, record, warmup=1)
        plan, order = trainer.start_epoch()
        groups = trainer.update_groups(order)
        losses.append(
            [
                trainer.train_step([plan[i] for i in groups[k % len(groups)]]).item()
                for k in range(20)
            ]
        )
        trainers.append(trainer)
    eager, graphed = trainers
    shapes = {(tuple(b.src.shape), tuple(b.tgt_in.shape)) for b in map(plan.__getitem__, order)}
    assert 1 <= len(recorded) == len(graphed.graphed.graphs) <= len(shapes)
    assert losses[1] == pytest.approx(losses[0], rel=1e-6)
    for a, b in zip(eager.model.parameters(), graphed.model.parameters(), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-7)


def test_graphs_keep_writing_the_gradients_the_optimiser_reads(config):
    """If something sets the gradients to None (the out-of-memory guard), the graphs'
    gradient tensors go back in place, zeroed, instead of being written where nobody reads."""
    trainer = Trainer(config, progress=False)
    params = list(trainer.model.parameters())
    steps = GraphedSteps(trainer.forward_backward, params, CPU, recorder_like_cuda_graphs([]))
    steps.keep_grads()
    kept = [p.grad for p in params]
    for g in kept:
        g.fill_(1.0)
    trainer.optimizer.zero_grad(set_to_none=True)
    steps.keep_grads()
    assert all(p.grad is g and not g.any() for p, g in zip(params, kept, strict=True))


def epoch_batches(trainer: Trainer, n: int) -> list[int]:
    _, order = trainer.start_epoch()
    return [order[i % len(order)] for i in range(n)]


# ---- host syncs ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "settings",
    [{"precision": "fp32"}, {"precision": "bf16", "update_freq": 2, "ema": 0.99}],
    ids=["fp32", "bf16-accumulate-ema"],
)
def test_an_update_reads_nothing_back_and_logging_once(config, settings):
    """No `.item()`-like op (aten::_local_scalar_dense and friends) in the steady state: the
    device never waits for the host. The logging interval reads the loss back, once."""
    trainer = Trainer(with_train(config, **settings, log_every=1000), progress=False)
    plan, order = trainer.start_epoch()
    groups = trainer.update_groups(order)
    trainer.update(plan, groups[0])  # the first makes AdamW's state
    with DispatchCounter() as counter:
        for group in groups[1:6]:
            trainer.update(plan, group)
    assert sum(counter.syncs.values()) == 0, counter.syncs
    trainer.state.step = 1000  # a logging step
    with DispatchCounter() as counter, Board(trainer.run_dir.path, False) as board:
        trainer.log_update(_NoBar(), board)
    assert sum(counter.syncs.values()) == 1, counter.syncs


class _NoBar:
    def set_postfix(self, **values) -> None:
        pass


# ---- attention dropout -----------------------------------------------------------------
def test_attention_dropout_is_its_own_knob_and_defaults_to_dropout(config):
    config.model.dropout = 0.3
    assert config.model.attention_p == 0.3  # -1: as model.dropout
    config.model.attention_dropout = 0.0
    model = Transformer(config.model, 60, 320)
    attention = [m for m in model.modules() if isinstance(m, SelfAttention | CrossAttention)]
    assert attention and all(m.dropout == 0.0 for m in attention)
    assert model.encoder[0].ff_block.dropout.p == 0.3  # the residual dropout stays


# ---- scripts/step_profile.py -----------------------------------------------------------
def test_each_op_of_an_update_falls_in_one_kind():
    aten = torch.ops.aten
    assert op_kind(aten.addmm.default) == op_kind(aten.bmm.default) == "matmuls"
    assert op_kind(aten._to_copy.default) == "casts and copies"
    assert op_kind(aten.random_.default) == op_kind(aten.ge.Scalar) == "dropout masks"
    assert op_kind(aten._foreach_norm.Scalar) == "optimiser and clipping"
    assert op_kind(aten._log_softmax.default) == "softmax and loss"
    assert op_kind(aten.native_layer_norm.default) == "everything else"


def test_step_profile_runs_and_reports_every_measure(tmp_path, corpus):
    script = Path(__file__).resolve().parents[1] / "scripts/step_profile.py"
    (tmp_path / "small.toml").write_text(CONFIG)
    command = [sys.executable, str(script), "-c", "small.toml", "--work", "work"]
    command += ["--seconds", "0.1", "--warmup", "1", "--updates", "2", "--compile-shapes", "2"]
    command += ["--peak-seconds", "0.1"]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    for line in (
        "distinct shapes an epoch",
        "padding (share of token positions)",
        "compiled: graphs for the shapes run",
        "host syncs an update 0",
        "ratios: bf16/fp32=",
    ):
        assert line in out, out
    breaks = next(x for x in out.splitlines() if x.startswith("compiled: graph breaks"))
    assert set(breaks.split()[3:]) == {"0"}  # as planned, and with static shapes
    kinds = next(x for x in out.splitlines() if "kernel time of the ops, by kind:" in x)
    shares = [int(part.rsplit(" ", 1)[1].rstrip("%")) for part in kinds.split(": ")[1].split(", ")]
    assert "matmuls" in kinds and 98 <= sum(shares) <= 102  # every op in one kind, rounded
