"""scripts/bench_peer.py is a benchmark, not a test: `make test` never installs eole. What
is tested is how it reads both toolkits' reports and makes its table, on saved logs, and
that no process a command of it starts outlives it."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import bench_peer as peer
import common
import pytest

# eole 0.6.4's own lines (train, then predict -report_time) as it wrote them here, and ours
SAVED = Path(__file__).resolve().parent / "data" / "bench_peer"
EOLE_TRAIN = (SAVED / "eole-train.log").read_text(encoding="utf-8")
EOLE_PREDICT = (SAVED / "eole-predict.log").read_text(encoding="utf-8")
OURS_TRAIN = (SAVED / "ours-train.log").read_text(encoding="utf-8")


def test_reads_each_toolkits_reports():
    assert peer.our_train_rates(OURS_TRAIN) == [2038.0, 2400.0, 2500.0]
    assert peer.steady(peer.our_train_rates(OURS_TRAIN)) == 2450.0  # epoch 1 left out
    reports = peer.eole_reports(EOLE_TRAIN)
    assert reports[0] == (20, 401.0, 45.0) and reports[-1] == (80, 1784.0, 74.0)
    assert peer.steady([t for _, t, _ in reports]) == 1922.0
    assert abs(peer.updates_per_second(reports) - 60 / 29) < 1e-9
    assert abs(peer.eole_seconds(EOLE_PREDICT) - 2.50) < 1e-9
    line = "translated 1,001 lines in 1.25 s (800.8 lines/s, the model loaded)"
    assert peer.our_seconds("engine: torch\n" + line) == 1.25


def test_the_table_ends_with_the_ratios_line():
    row = peer.Row
    rows = [
        row("ours, defaults", {"greedy": 900.0, "beam5": 400.0}, {"greedy": 30.0, "beam5": 31.5}),
        row("ours, fp32", {"greedy": 450.0, "beam5": 200.0}, {"greedy": 30.1, "beam5": 31.4}),
        row("eole", {"greedy": 300.0, "beam5": 100.0}, {"greedy": 28.0, "beam5": 29.0}, 1000.0),
    ]
    rows[0].train_tok_s = 2000.0
    lines = peer.table(rows, 1001)
    assert lines[0].startswith("decoding 1,001 test sentences")
    assert "2,000" in lines[2] and "900.0" in lines[2] and "31.50" in lines[2]
    assert lines[-1] == "ratios: train=2.00 greedy=3.00 beam5=4.00 bleu=+2.50"


def test_an_unreported_time_is_an_error_not_a_zero():
    with pytest.raises(RuntimeError, match="reported no time"):
        peer.eole_seconds("nothing here")
    with pytest.raises(RuntimeError, match="reported no time"):
        peer.our_seconds("engine: torch")


# ---- every process a command starts ends with it (common.py's session) ------------------
# `sh -c` prints its own pid (its process group's: a session of its own) and that of a
# `sleep` it leaves running in the background, as eole's train left its data workers.
LEAVES_A_GRANDCHILD = ["sh", "-c", "echo $$; sleep 600 & echo $!"]
WAITS_FOR_IT = ["sh", "-c", "echo $$; sleep 600 & echo $!; wait"]
needs_linux = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="waiting for orphans needs Linux's subreaper"
)


@pytest.fixture(autouse=True)
def no_orphans_adopted_after():
    """The test process adopts its orphans (common.session) for these tests only."""
    yield
    common.adopt_orphans(False)


def assert_none_left(group: int, grandchild: int) -> None:
    """No process of the group is left, not even a zombie (each one was waited for)."""
    with pytest.raises(ProcessLookupError):
        os.killpg(group, 0)
    with pytest.raises(ProcessLookupError):
        os.kill(grandchild, 0)


@needs_linux
def test_a_command_that_ended_leaves_no_process_of_its_group():
    group, grandchild = map(int, peer.run(LEAVES_A_GRANDCHILD).split())
    assert group != os.getpgid(0)  # a group of its own, not the script's
    assert_none_left(group, grandchild)


@needs_linux
@pytest.mark.parametrize(
    "stop", [KeyboardInterrupt, signal.SIGTERM, RuntimeError], ids=["ctrl-c", "sigterm", "error"]
)
def test_a_command_cut_short_leaves_no_process_of_its_group(stop):
    """Ctrl-C, SIGTERM (`end_on_sigterm`: SystemExit) or an error while the command runs."""
    previous = signal.getsignal(signal.SIGTERM)
    common.end_on_sigterm()
    try:
        with (
            pytest.raises((KeyboardInterrupt, SystemExit, RuntimeError)) as stopped,
            common.session(WAITS_FOR_IT, stdout=subprocess.PIPE, text=True) as process,
        ):
            group, grandchild = int(process.stdout.readline()), int(process.stdout.readline())
            assert process.poll() is None  # sh waits for its sleep
            if stop == signal.SIGTERM:
                signal.raise_signal(stop)  # raises SystemExit here, at once
            raise stop
    finally:
        signal.signal(signal.SIGTERM, previous)
    if stop == signal.SIGTERM:
        assert stopped.type is SystemExit and stopped.value.code == 143
    else:
        assert stopped.type is stop
    assert_none_left(group, grandchild)
