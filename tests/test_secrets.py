"""No API key is ever written to disk: a key given in a config (`serve.api_keys`) stays in
force for the command that reads it, and is left out of everything saved (config.json,
checkpoints, releases, exports); a key an older version saved is dropped when read, with a
warning; keys also come from the environment and from `serve.api_key_file`."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
from conftest import (
    assert_one_line_error,
    generated_pairs,
    run_cli,
    tiny_config,
    to_toml,
    write_tatoeba,
)

from translator import config as config_module
from translator.config import ServeConfig
from translator.corpus.preparer import prepare
from translator.deploy.access import ENVIRONMENT, api_keys
from translator.deploy.release import release
from translator.errors import UserError
from translator.inference.text import Translator
from translator.model import checkpoint
from translator.training.trainer import train

KEY = "s3cret-key-XYZ"


def files_holding(directory: Path, text: str = KEY) -> list[Path]:
    """Every file under `directory` whose raw bytes hold `text`."""
    needle = text.encode()
    return [p for p in sorted(directory.rglob("*")) if p.is_file() and needle in p.read_bytes()]


@pytest.fixture(scope="module")
def keyed_run(tmp_path_factory) -> Path:
    """A tiny run trained (one epoch) with an API key in its config: its directory."""
    tmp = tmp_path_factory.mktemp("keyed")
    write_tatoeba(tmp / "corpus.tsv", generated_pairs(300))
    config = tiny_config(
        tmp,
        train={"max_epochs": 1, "bleu_samples": 4},
        serve={"api_keys": [KEY], "api_key_file": str(tmp / "keys.txt")},
    )
    prepare(config.data)
    train(config, progress=False)
    return tmp / "run"


def test_a_config_keeps_its_keys_in_force_but_saves_none_of_them(tmp_path):
    path = tmp_path / "tiny.toml"
    raw = tiny_config(tmp_path).to_dict()
    raw["serve"].update(api_keys=[KEY], api_key_file="keys.txt")
    path.write_text(to_toml(raw), encoding="utf-8")
    config = config_module.load(path)  # the user's own TOML: its key is in force
    assert config.serve.api_keys == [KEY]
    saved = config.to_dict()
    assert saved["serve"]["api_keys"] == [] and saved["serve"]["api_key_file"] == "keys.txt"
    assert config.serve.api_keys == [KEY]  # saving leaves the config itself alone


def test_a_run_trained_with_a_key_writes_it_in_no_file_and_no_release(keyed_run, tmp_path):
    assert (keyed_run / "config.json").is_file() and (keyed_run / "checkpoints/best.pt").is_file()
    assert files_holding(keyed_run) == []  # config.json, last.pt, best.pt, final.json, ...
    saved = checkpoint.load(keyed_run / "checkpoints/best.pt")["config"]["serve"]
    assert saved["api_keys"] == [] and saved["api_key_file"].endswith("keys.txt")  # the path
    done = release(keyed_run, tmp_path / "model.pt")
    assert files_holding(done.path.parent) == []


def test_exports_of_a_run_trained_with_a_key_hold_none(keyed_run, tmp_path):
    pytest.importorskip("ctranslate2")
    pytest.importorskip("transformers")
    from translator.deploy.export import export
    from translator.deploy.hf import export_hf

    best = keyed_run / "checkpoints/best.pt"
    export(best, tmp_path / "ct2")
    export_hf(best, tmp_path / "hf")
    assert files_holding(tmp_path / "ct2") == [] and files_holding(tmp_path / "hf") == []


def test_an_older_checkpoint_holding_a_key_loads_without_it_with_one_warning(
    keyed_run, tmp_path, caplog
):
    payload = checkpoint.load(keyed_run / "checkpoints/best.pt")
    payload["config"]["serve"]["api_keys"] = [KEY]  # as a version before this one saved it
    old = tmp_path / "old.pt"
    torch.save(payload, old)
    assert files_holding(tmp_path) == [old]
    with caplog.at_level(logging.WARNING, logger="translator.model.checkpoint"):
        translator = Translator.from_checkpoint(old, torch.device("cpu"))  # reads it twice
        done = release(old, tmp_path / "released" / "model.pt")
    assert translator.engine.config.serve.api_keys == []
    assert files_holding(done.path.parent) == []
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert str(old) in warnings[0] and "serve.api_keys" in warnings[0]
    assert "dropped" in warnings[0] and ENVIRONMENT in warnings[0]
    assert KEY not in warnings[0]


def test_keys_come_from_the_config_the_environment_and_the_key_file(tmp_path, monkeypatch):
    key_file = tmp_path / "keys.txt"
    key_file.write_text("# the team's keys\n\n  file-one  \n#not-a-key\nfile-two\n\n")
    monkeypatch.setenv(ENVIRONMENT, "env-one, ,env-two")
    serve = ServeConfig(api_keys=["configured"], api_key_file=str(key_file))
    assert api_keys(serve) == ["configured", "env-one", "env-two", "file-one", "file-two"]
    monkeypatch.delenv(ENVIRONMENT)
    assert api_keys(ServeConfig(api_key_file=str(key_file))) == ["file-one", "file-two"]
    assert api_keys(ServeConfig()) == []


def test_a_key_file_missing_or_without_keys_is_one_clear_error(tmp_path):
    missing = tmp_path / "nowhere.txt"
    with pytest.raises(UserError, match=r"serve\.api_key_file.*nowhere\.txt"):
        api_keys(ServeConfig(api_key_file=str(missing)))
    empty = tmp_path / "empty.txt"
    empty.write_text("# no keys yet\n\n")
    with pytest.raises(UserError, match=r"serve\.api_key_file.*empty\.txt holds no key"):
        api_keys(ServeConfig(api_key_file=str(empty)))


def test_serve_with_a_missing_key_file_stops_at_start_up_with_one_line(tmp_path):
    raw = tiny_config(tmp_path).to_dict()
    raw["serve"]["api_key_file"] = str(tmp_path / "nowhere.txt")
    (tmp_path / "tiny.toml").write_text(to_toml(raw), encoding="utf-8")
    result = run_cli("serve", "-c", "tiny.toml", cwd=tmp_path)
    assert_one_line_error(result, "serve.api_key_file", str(tmp_path / "nowhere.txt"))
