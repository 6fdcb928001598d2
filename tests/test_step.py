"""The training step at the hardware's limit: train.precision, static shapes
(train.pad_to_multiple), the compiled step (train.compile, fullgraph), no host syncs in
an update, and model.attention_dropout. (Exact resume in each precision:
test_train.test_resume_mid_epoch_after_a_signal_is_exact.)"""

import logging
from collections import Counter
from typing import Any

import numpy as np
import pytest
import torch
from conftest import run_script
from step_profile import DispatchCounter, compiled_counts, op_kind
from test_cli import CONFIG
from test_train import with_train

from translator import runtime
from translator.data.batching import collate_padded, round_up
from translator.data.dataset import load_training_data
from translator.inspect.info import describe
from translator.model import checkpoint
from translator.model.loss import sequence_loss
from translator.model.transformer import CrossAttention, SelfAttention, Transformer
from translator.runtime import BF16_OVERRIDE
from translator.training import distributed, mixed_precision
from translator.training.tensorboard import Board
from translator.training.trainer import Trainer, train

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


# ---- train.precision -------------------------------------------------------------------
def test_auto_is_bf16_on_cuda_and_on_cpus_with_bf16_instructions(monkeypatch):
    monkeypatch.setenv(BF16_OVERRIDE, "1")
    assert mixed_precision.resolve("auto", CPU) == "bf16"
    assert "this CPU has bf16 matrix instructions" in mixed_precision.reason("auto", CPU)
    monkeypatch.setenv(BF16_OVERRIDE, "0")
    assert mixed_precision.resolve("auto", CPU) == "fp32"
    assert "this CPU has no bf16" in mixed_precision.reason("auto", CPU)
    assert mixed_precision.resolve("auto", CUDA) == "bf16"
    assert mixed_precision.resolve("fp32", CUDA) == "fp32"
    assert mixed_precision.resolve("bf16", CPU) == "bf16"


@pytest.mark.parametrize(
    ("variables", "has", "named"),
    [
        ({BF16_OVERRIDE: "1", "ONEDNN_MAX_CPU_ISA": "AVX2"}, True, "TRANSLATOR_CPU_BF16=1"),
        ({"ONEDNN_MAX_CPU_ISA": "avx2"}, False, "ONEDNN_MAX_CPU_ISA=avx2"),
        ({"ATEN_CPU_CAPABILITY": "avx2"}, False, "ATEN_CPU_CAPABILITY=avx2"),
        ({"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16", BF16_OVERRIDE: ""}, None, ""),
    ],
)
def test_the_environment_answers_for_the_cpu_as_the_emulation_sets_it(
    monkeypatch, variables, has, named
):
    """One answer for every bf16 path (runtime.cpu_bf16): the override wins, an ISA capped
    below bf16 (docs/development.md's AVX2 emulation) says no, else the CPU's flags do."""
    for name in (BF16_OVERRIDE, "ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    answer, why = runtime.cpu_bf16()
    flags = torch.cpu.get_capabilities()
    expected = has if has is not None else bool(flags.get("avx512_bf16") or flags.get("amx_bf16"))
    assert answer is expected and named in why
    assert mixed_precision.resolve("auto", CPU) == ("bf16" if expected else "fp32")
    assert why in mixed_precision.reason("auto", CPU)


def test_bf16_asked_for_on_a_cpu_without_it_warns_with_its_measured_cost(monkeypatch):
    monkeypatch.setenv(BF16_OVERRIDE, "0")
    warning = mixed_precision.slow_bf16_warning("bf16", CPU)
    assert warning.startswith("train.precision = bf16 on a CPU without bf16 matrix instruct")
    slower = float(warning.split("runs ")[1].split("x slower")[0].replace(",", ""))
    assert slower > 0  # measured: a number, whatever this CPU makes of it
    assert mixed_precision.slow_bf16_warning("fp32", CPU) is None
    assert mixed_precision.slow_bf16_warning("bf16", CUDA) is None
    monkeypatch.setenv(BF16_OVERRIDE, "1")
    assert mixed_precision.slow_bf16_warning("bf16", CPU) is None


def test_bf16_computes_matmuls_in_bf16_with_fp32_weights_gradients_and_loss(config):
    trainer = Trainer(with_train(config, precision="bf16"), progress=False)
    seen = []
    hook = trainer.model.project.register_forward_hook(lambda m, a, out: seen.append(out.dtype))
    batch = trainer.data.train[0]
    loss = trainer.compiled_loss(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_out)
    loss.backward()
    hook.remove()
    assert seen == [torch.bfloat16] and loss.dtype == torch.float32
    for param in trainer.model.parameters():
        assert param.dtype == torch.float32 and param.grad.dtype == torch.float32


def test_a_run_logs_its_precision_once_and_every_checkpoint_records_it(
    config, tmp_path, caplog, monkeypatch
):
    monkeypatch.setenv(BF16_OVERRIDE, "0")  # a CPU without bf16: warned once, then trained
    with caplog.at_level(logging.INFO, logger="translator.training"):
        train(with_train(config, precision="bf16", max_epochs=1, keep_last=1), progress=False)
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("precision")]
    assert said == ["precision bf16 (train.precision = bf16)"]
    warned = [r for r in caplog.records if "x slower than fp32 here" in r.getMessage()]
    assert len(warned) == 1 and warned[0].levelno == logging.WARNING
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
def one_shape(trainer: Trainer, n: int) -> tuple[Any, list[int]]:
    """The first `n` batches of epoch 0 (in its order) of its most common shape: inductor's
    compile of a shape (forward and backward) takes half a minute on a slow 2-core CPU."""
    plan, updates = trainer.start_epoch()
    order = [i for group in updates for i in group]
    shapes = [tuple(plan.shapes[i]) for i in order]
    common = Counter(shapes).most_common(1)[0][0]
    return plan, [i for i, shape in zip(order, shapes, strict=True) if shape == common][:n]


def losses_over(config, n: int) -> tuple[list[float], list[tuple]]:
    trainer = Trainer(config, progress=False)
    plan, picked = one_shape(trainer, n)
    losses = []
    for i in picked:
        batch = plan[i]
        losses.append(trainer.step([batch]).loss.item() / batch.n_tokens)
    return losses, [tuple(plan.shapes[i]) for i in picked]


@pytest.mark.parametrize(
    "backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.inductor)]
)
def test_the_compiled_step_has_no_graph_break_and_matches_eager(
    config, tmp_path, monkeypatch, backend
):
    """Static shapes (train.pad_to_multiple): fullgraph (a graph break would raise), backward
    compiled with it, one graph reused by every batch of its shape; losses within 1e-4 of
    eager (fp32) over 4 updates, with dropout in the residual paths and in attention: the
    masks are eager's own (inductor's fused random ops trained worse than eager).
    `aot_eager` runs the graphs TorchDynamo and AOTAutograd make as they are; inductor,
    what `train.compile` uses, also generates and compiles code for this CPU's
    instructions: 35 s on the slowest CPU with an empty cache, so it runs with the
    CPU-dependent tests (`make test-avx2`, marker `inductor`) rather than in `make test`.
    (Graphs per shape over an epoch: the step profile's test.)"""
    import torch._dynamo  # here: seconds to import, for this test alone

    def compile_with(fn, options=None, **kwargs):  # aot_eager takes no inductor options
        options = options if backend == "inductor" else None
        return real_compile(fn, backend=backend, options=options, **kwargs)

    real_compile = torch.compile
    monkeypatch.setattr(torch, "compile", compile_with)
    config = with_train(config, pad_to_multiple=8)
    config.model.dropout = 0.1
    eager, _ = losses_over(config, 4)
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled, shapes = losses_over(with_train(config, compile=True), 4)
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    breaks = sum(torch._dynamo.utils.counters["graph_break"].values())
    torch._dynamo.reset()
    assert breaks == 0 and len(shapes) == 4 and len(set(shapes)) == 1
    assert graphs == 1
    assert compiled == pytest.approx(eager, abs=1e-4)


# ---- host syncs ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "settings",
    [{"precision": "fp32"}, {"precision": "bf16", "update_freq": 2, "ema": 0.99}],
    ids=["fp32", "bf16-accumulate-ema"],
)
def test_an_update_reads_nothing_back_and_logging_once(config, settings, monkeypatch):
    """No `.item()`-like op (aten::_local_scalar_dense and friends) in the steady state: the
    device never waits for the host, the gradient norm included. The logging interval
    reads the loss and the gradient norms back in one copy to the host (on a CPU device,
    none: the values are already there)."""
    trainer = Trainer(with_train(config, **settings, log_every=1000), progress=False)
    plan, groups = trainer.start_epoch()
    trainer.update(plan, groups[0])  # the first makes AdamW's state
    with DispatchCounter() as counter:
        for group in groups[1:6]:
            trainer.update(plan, group)
    assert sum(counter.syncs.values()) == 0, counter.syncs
    reads = []
    sum_all = distributed.sum_all
    monkeypatch.setattr(distributed, "sum_all", lambda *args: reads.append(1) or sum_all(*args))
    trainer.state.step = 1000  # a logging step
    with DispatchCounter() as counter, Board(trainer.run_dir.path, False) as board:
        trainer._log_update(_NoBar(), board)
    assert len(reads) == 1
    assert sum(counter.syncs.values()) == (trainer.device.type != "cpu"), counter.syncs
    assert trainer.state.window_updates == 0 and trainer.state.epoch_updates == len(groups[:6])


class _NoBar:
    def set_postfix(self, values=None, **more) -> None:
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
    (tmp_path / "small.toml").write_text(CONFIG)
    args = ["-c", "small.toml", "--work", "work"]
    args += ["--seconds", "0.1", "--warmup", "1", "--updates", "2", "--skip-compile"]
    args += ["--peak-seconds", "0.1"]  # the compile columns: the test below, in this process
    without = {BF16_OVERRIDE: "0"}  # a CPU without bf16: not measured, said once
    result = run_script("step_profile.py", *args, cwd=tmp_path, env=without)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    for line in (
        "distinct shapes an epoch",
        "padding (share of token positions)",
        "host syncs an update 0",
        "bf16: not measured, this CPU has no bf16 matrix instructions (TRANSLATOR_CPU_BF16=0)",
        "ratios: bf16/fp32=not measured",
    ):
        assert line in out, out
    assert "compiled:" not in out
    kinds = next(x for x in out.splitlines() if "kernel time of the ops, by kind:" in x)
    shares = [int(part.rsplit(" ", 1)[1].rstrip("%")) for part in kinds.split(": ")[1].split(", ")]
    assert "matmuls" in kinds and 98 <= sum(shares) <= 102  # every op in one kind, rounded


def test_step_profile_counts_no_graph_break_and_one_graph_a_static_shape(config):
    """The step profile's compile columns (TorchDynamo's tracing alone): the forward and
    loss have no graph break, and with static shapes a second batch of a shape reuses its
    graph."""
    trainer = Trainer(with_train(config, pad_to_multiple=8), progress=False)
    breaks, graphs, batches = compiled_counts(trainer, static=True, most=1)
    assert (breaks, graphs, batches) == (0, 1, 2)
