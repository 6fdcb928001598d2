"""scripts/bench_peer.py is a benchmark, not a test: `make test` never installs eole. What
is tested is how it reads both toolkits' reports and makes its table, on saved logs."""

from pathlib import Path

import bench_peer as peer
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
