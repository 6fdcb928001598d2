"""Checkpoints written before the stage packages (commit c0ed2c0, tests/data/) still work:
they load, translate exactly as they did, describe themselves, average, and resume."""

import json
import shutil
from pathlib import Path

import pytest
from conftest import tiny_config

from translator.inference.text import Translator
from translator.inspect.info import describe
from translator.model import checkpoint
from translator.training.trainer import train

OLD = Path(__file__).parent / "data" / "checkpoint-c0ed2c0"


@pytest.fixture(scope="module")
def expected() -> dict:
    return json.loads((OLD / "expected.json").read_text(encoding="utf-8"))


def test_an_old_checkpoint_translates_exactly_as_before(expected):
    translator = Translator.from_checkpoint(OLD / "last.pt", "cpu", precision="fp32")
    assert translator.translate(expected["sentences"]) == expected["greedy"]
    assert translator.translate(expected["sentences"], beam=4) == expected["beam4"]


def test_an_old_snapshot_averages_and_describes_itself(tmp_path, expected):
    averaged = tmp_path / "average.pt"
    checkpoint.save(checkpoint.average([OLD / "epoch0012.pt", OLD / "epoch0012.pt"]), averaged)
    translator = Translator.from_checkpoint(averaged, "cpu", precision="fp32")
    assert translator.translate(expected["sentences"]) == expected["greedy"]
    lines = describe(OLD / "last.pt")
    assert any("12 epochs complete" in line for line in lines), lines


def test_an_old_training_state_resumes(tmp_path):
    shutil.copytree(OLD / "prepared", tmp_path / "prepared")
    (tmp_path / "run/checkpoints").mkdir(parents=True)
    shutil.copy(OLD / "last.pt", tmp_path / "run/checkpoints/last.pt")
    config = tiny_config(tmp_path, train={"max_epochs": 13, "lr": 3e-3})
    result = train(config, resume=True, progress=False)
    assert result.state.epoch == 13 and len(result.history) == 1
    assert result.history[0]["epoch"] == 13 and len(result.state.history) == 13
