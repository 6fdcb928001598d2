"""Training on 2 processes (torchrun, gloo on the CPU) equals 1 process accumulating 2
batches per update, and a resumed 2-process run equals an uninterrupted one; the batch
dealing is balanced and the same on every rank."""

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import cli_process
import numpy as np
import pytest
import torch
from conftest import tiny_config, to_toml

from translator.corpus.preparer import prepare
from translator.model import checkpoint
from translator.model.rundir import RunDir
from translator.training import distributed
from translator.training.distributed import deal, gloo_threads
from translator.training.trainer import train

TORCHRUN = Path(sys.executable).with_name("torchrun")


def torchrun(config_file: Path, *options: str) -> None:
    """`torchrun --nproc_per_node 2 -m translator train …`, as a user launches it."""
    command = [str(TORCHRUN), "--standalone", "--nproc_per_node", "2", "-m", "translator"]
    command += ["train", "-c", str(config_file), *options]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]


def two_ranks(config_file: Path, *options: str) -> None:
    """The two workers torchrun would start, each given the variables torchrun sets, forked
    (tests/cli_process.py) rather than started by torchrun: the same training, without
    three interpreters' start-up."""
    port = free_port()
    workers = []
    for rank in range(2):
        env = os.environ | {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2"}
        env |= {"LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        env.setdefault("OMP_NUM_THREADS", "1")  # as torchrun does for several processes
        args = ["train", "-c", str(config_file), *options]
        workers.append(cli_process.Forked(args, config_file.parent, None, env))
    for worker in workers:
        result = worker.result(300)
        assert result.returncode == 0, result.stderr[-3000:]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return checkpoint.load(run_dir / "checkpoints/last.pt")["model"]


def without_key_biases(model: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The weights but the key part of each attention bias. Its gradient is zero in exact
    arithmetic (softmax ignores a constant added to every score), so what it gets is
    rounding noise, which Adam (eps 1e-9) scales up to ±lr whenever two runs add their
    gradients in a different order: up to 4.6e-4 apart after 8 updates, all else 3e-8."""
    kept = dict(model)
    for name, tensor in model.items():
        if name.endswith("qkv.bias"):
            d = len(tensor) // 3
            kept[name] = torch.cat([tensor[:d], tensor[2 * d :]])
        elif name.endswith("kv.bias"):
            kept[name] = tensor[len(tensor) // 2 :]
    return kept


def test_deal_balances_tokens_and_gives_every_batch_once():
    tokens = np.array([100, 90, 80, 10, 10, 5])
    shares = deal([0, 1, 2, 3, 4, 5], tokens, 2)
    assert sorted(i for share in shares for i in share) == [0, 1, 2, 3, 4, 5]
    assert shares == [[0, 3, 4, 5], [1, 2]]  # largest first, to the lighter rank: 125 / 170
    assert deal([2, 0, 1], tokens, 3) == [[0], [1], [2]]
    assert deal([5], tokens, 2) == [[5], []]  # a rank may get nothing: it joins with 0 loss


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="threads are read from /proc")
def test_finish_joins_the_control_groups_threads_while_the_interpreter_lives(monkeypatch):
    """One process as torchrun starts it: `init` joins the default group and the control
    group (gloo, threads of their own) and `finish` leaves no thread of either behind, so
    none can be killed at the interpreter's shutdown (the teardown abort)."""
    env = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1"}
    for name, value in {**env, "MASTER_PORT": str(free_port())}.items():
        monkeypatch.setenv(name, value)
    before = gloo_threads()
    ranks, _ = distributed.init(torch.device("cpu"))
    for _ in range(200):  # gloo starts its threads as it may: on a busy machine, a moment later
        if gloo_threads() > before:
            break
        time.sleep(0.01)
    assert ranks.active and gloo_threads() > before
    assert distributed.highest(3, ranks) == 3  # a collective of a tensor made in Python
    distributed.finish()
    assert gloo_threads() == before


@pytest.mark.skipif(not TORCHRUN.exists(), reason="torchrun is not installed")
def test_two_processes_equal_one_accumulating_and_resume_exactly(tmp_path, corpus):
    config = tiny_config(tmp_path, model={"dropout": 0.0}, train={"max_epochs": 2})
    prepare(config.data)
    single = tiny_config(tmp_path, model={"dropout": 0.0}, train={"max_epochs": 2})
    single.train.update_freq = 2
    single.train.run_dir = str(tmp_path / "single")
    train(single, progress=False)

    raw = config.to_dict()
    raw["train"].update(run_dir=str(tmp_path / "ddp"), device="cpu", max_epochs=1)
    (tmp_path / "one.toml").write_text(to_toml(raw))
    two_ranks(tmp_path / "one.toml")
    shutil.copy(tmp_path / "ddp/metrics.tsv", tmp_path / "after-epoch-1.tsv")
    raw["train"]["max_epochs"] = 2
    (tmp_path / "two.toml").write_text(to_toml(raw))
    two_ranks(tmp_path / "two.toml", "--resume")

    ddp, straight = (without_key_biases(weights(tmp_path / d)) for d in ("ddp", "single"))
    largest = max((ddp[n] - t).abs().max().item() for n, t in straight.items())
    assert largest < 1e-5, largest
    payload = checkpoint.load(tmp_path / "ddp/checkpoints/last.pt")
    assert (
        payload["train_state"]["step"]
        == checkpoint.load(tmp_path / "single/checkpoints/last.pt")["train_state"]["step"]
    )
    assert len(payload["rng"]) == 2  # each rank's random state
    rows = (tmp_path / "ddp/metrics.tsv").read_text().splitlines()
    assert len(rows) == 3 and rows[:2] == (tmp_path / "after-epoch-1.tsv").read_text().splitlines()
    # the gradient norm: each rank clips the same all-reduced gradients, counted once
    ddp_rows, single_rows = (RunDir(tmp_path / d).metric_rows() for d in ("ddp", "single"))
    for ddp_row, single_row in zip(ddp_rows, single_rows, strict=True):
        for column in ("grad_norm", "grad_norm_max"):
            assert float(ddp_row[column]) == pytest.approx(float(single_row[column]), rel=1e-4)


@pytest.mark.skipif(not TORCHRUN.exists(), reason="torchrun is not installed")
def test_two_processes_resume_mid_epoch_exactly_with_dropout(tmp_path, corpus):
    """Cut by the time budget after the first update, then resumed: each rank's random
    state (its own dropout masks) and the epoch position come back."""
    config = tiny_config(tmp_path, model={"dropout": 0.3}, train={"max_epochs": 1})
    prepare(config.data)
    raw = config.to_dict()
    runs = {}
    for name in ("straight", "cut"):
        raw["train"].update(run_dir=str(tmp_path / name), device="cpu")
        runs[name] = tmp_path / f"{name}.toml"
        runs[name].write_text(to_toml(raw))
    torchrun(runs["straight"])  # torchrun itself once; the rest forked as it would start them
    two_ranks(runs["cut"], "--max-minutes", "1e-6")
    cut = checkpoint.load(tmp_path / "cut/checkpoints/last.pt")["train_state"]
    assert cut["position"] == 2 and cut["epoch"] == 0  # one update of 2 batches, mid-epoch
    two_ranks(runs["cut"], "--resume", "--max-minutes", "0")
    straight, resumed = (weights(tmp_path / d) for d in ("straight", "cut"))
    for name, tensor in straight.items():
        torch.testing.assert_close(resumed[name], tensor, rtol=0, atol=1e-6, msg=name)
    metrics = [(tmp_path / d / "metrics.tsv").read_text().splitlines() for d in runs]
    columns = metrics[0][0].split("\t")
    timing = [columns.index(c) for c in ("train_tokens_per_s", "minutes")]
    strip = lambda rows: [[v for i, v in enumerate(r.split("\t")) if i not in timing] for r in rows]  # noqa: E731
    assert strip(metrics[0]) == strip(metrics[1])
