"""An engine and a search added from outside the package (examples/translator-extras,
docs/architecture.md#extending), installed as a user installs a package, and used through
the Python API, the CLI and serve: the ensemble engine over two copies of one checkpoint
writes what that checkpoint writes alone, and diverse beam search gives its n best."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import tiny_config, to_toml

from translator.data.layout import read_split
from translator.errors import UserError
from translator.inference.registry import ENGINES, SEARCHES
from translator.inference.text import Translator

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "translator-extras"
DOCS = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The example installed (pip, no dependencies) into a directory of its own."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--disable-pip-version-check", "--target", str(target), str(EXAMPLE)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    shutil.rmtree(EXAMPLE / "build", ignore_errors=True)
    return target


@pytest.fixture
def project(trained, tmp_path) -> tuple[Path, Path, Path]:
    """A config file, the checkpoint, and a directory of two copies of it (the ensemble)."""
    members = tmp_path / "members"
    members.mkdir()
    for name in ("a.pt", "b.pt"):
        shutil.copy(trained, members / name)
    config_file = tmp_path / "tiny.toml"
    config = tiny_config(trained.parents[2], decode={"precision": "fp32"})
    config_file.write_text(to_toml(config.to_dict()))
    return config_file, trained, members


def test_the_example_is_found_through_the_entry_points_and_used_by_the_api(
    installed, project, monkeypatch
):
    config_file, checkpoint, members = project
    monkeypatch.syspath_prepend(str(installed))
    assert "ensemble" in ENGINES.names() and "diverse_beam" in SEARCHES.names()
    config = tiny_config(checkpoint.parents[2], decode={"precision": "fp32"})
    lines = read_split(config.data.dir, "test")[0][:20]
    alone = Translator.open(config, checkpoint).translate(lines)
    together = dataclasses.replace(config.decode, engine="ensemble", model_dir=str(members))
    ensemble = Translator.open(dataclasses.replace(config, decode=together), checkpoint)
    assert ensemble.engine_line.startswith("engine: ensemble, fp32 (decode.engine = ensemble")
    assert ensemble.translate(lines) == alone  # one model twice: that model's outputs
    diverse = ensemble.with_decode(search="diverse_beam", beam=4, nbest=4).translate(lines[:5])
    for hypotheses in diverse:
        scores = [h.score for h in hypotheses]
        assert len(hypotheses) == 4 and scores == sorted(scores, reverse=True)
    with pytest.raises(UserError, match="translator.searches"):
        ensemble.with_decode(search="nonesuch").translate(lines[:1])


def fresh(installed: Path) -> dict:
    """A new interpreter's environment that finds the example as an installed package."""
    return os.environ | {"PYTHONPATH": str(installed)}


def test_the_cli_and_serve_decode_with_the_example(installed, project, tmp_path):
    config_file, checkpoint, members = project
    named = ["-c", str(config_file), "--checkpoint", str(checkpoint), "--engine", "ensemble",
             "--model", str(members), "--set", "decode.search=diverse_beam"]  # fmt: skip
    command = [sys.executable, "-m", "translator"]
    texts = ["Tom can see the cat.", "I like books."]
    result = subprocess.run(
        [*command, "translate", *named, "--beam", "2", *texts],
        cwd=tmp_path, env=fresh(installed), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "engine: ensemble" in result.stderr
    port = free_port()
    server = subprocess.Popen(
        [*command, "serve", *named, "--port", str(port)],
        cwd=tmp_path, env=fresh(installed), stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        answer = translate_when_ready(url, texts, server)
        assert answer["translations"] == result.stdout.split("\n")[:2]  # as the CLI's
        health = json.loads(urllib.request.urlopen(url + "/health", timeout=10).read())
        assert health["engine"] == "ensemble" and health["decodes_from"] == "members"
    finally:
        server.terminate()
        server.wait(timeout=30)


def translate_when_ready(url: str, texts: list[str], server) -> dict:
    body = json.dumps({"text": texts, "beam": 2}).encode()
    for _ in range(600):
        if server.poll() is not None:
            pytest.fail(server.stderr.read())
        try:
            if urllib.request.urlopen(url + "/ready", timeout=5).status == 200:
                break
        except OSError:
            time.sleep(0.1)
    request = urllib.request.Request(url + "/translate", body, {"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(request, timeout=60).read())


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_docs_show_the_example_as_it_is():
    """docs/architecture.md#extending shows each file of the example whole."""
    text = DOCS.read_text(encoding="utf-8")
    for path in [EXAMPLE / "pyproject.toml", *sorted(EXAMPLE.glob("translator_extras/[a-z]*.py"))]:
        assert path.read_text(encoding="utf-8").strip() in text, path.name
