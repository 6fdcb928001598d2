"""Decoding precision (`decode.precision`, inference/precision.py) on both engines, and the
engine `decode.engine auto` takes (inference/factory.py): fp32 is today's output exactly,
bf16 and int8 stay close to it, and the export beside a checkpoint is taken only when it is
an export of that very checkpoint and ctranslate2 is there."""

from __future__ import annotations

import dataclasses
import importlib.util
import shutil

import pytest
import torch
from conftest import ct2_translator, run_cli, tiny_config, to_toml

from translator.config import DecodeConfig
from translator.data.layout import read_split
from translator.errors import UserError
from translator.inference import ct2_engine, factory, precision
from translator.inference.text import Translator

CPU = torch.device("cpu")
has_ct2 = importlib.util.find_spec("ctranslate2") is not None


def lines_of(trained) -> list[str]:
    data = trained.parents[2] / "prepared"
    return read_split(data, "test")[0] + read_split(data, "valid")[0]


def decode(name: str, **changes) -> DecodeConfig:
    return dataclasses.replace(DecodeConfig(), precision=name, **changes)


def test_auto_follows_the_cpu(monkeypatch):
    monkeypatch.setenv("TRANSLATOR_CPU_BF16", "1")
    assert precision.resolve("auto", CPU)[0] == "bf16"
    monkeypatch.setenv("TRANSLATOR_CPU_BF16", "0")
    chosen, why = precision.resolve("auto", CPU)
    assert chosen == "fp32" and "no bf16 matrix instructions" in why
    assert precision.resolve("auto", torch.device("cuda"))[0] == "fp32"
    for name in ("fp32", "bf16", "int8"):
        assert precision.resolve(name, CPU) == (name, f"decode.precision = {name}")


def test_ctranslate2_precision_is_its_compute_type():
    cpu = {"float32", "int8", "int8_float32"}
    assert ct2_engine.resolve_precision("auto", "cpu", cpu)[0] == "int8"
    assert ct2_engine.resolve_precision("auto", "cuda", {"float32", "float16"})[0] == "as exported"
    assert ct2_engine.resolve_precision("fp32", "cpu", cpu)[0] == "fp32"
    with pytest.raises(UserError, match="cannot compute in bfloat16 on this cpu"):
        ct2_engine.resolve_precision("bf16", "cpu", cpu)


def test_fp32_is_todays_output(trained):
    """fp32 decodes the float32 model through oneDNN, as every release before did."""
    lines = lines_of(trained)
    ours = Translator.from_checkpoint(trained, CPU, decode("fp32"))
    assert ours.engine.about.precision == "fp32"
    plain = Translator.from_checkpoint(trained, CPU, decode("fp32", onednn=False))
    assert ours.translate(lines) == plain.translate(lines)


@pytest.mark.parametrize("name", ["bf16", "int8"])
def test_bf16_and_int8_stay_close_to_fp32(trained, name):
    lines = lines_of(trained)
    fp32 = Translator.from_checkpoint(trained, CPU, decode("fp32"))
    other = Translator.from_checkpoint(trained, CPU, decode(name))
    assert other.engine.about.precision == name
    if name == "bf16":
        assert next(other.engine.model.parameters()).dtype == torch.bfloat16
    else:
        quantized = torch.ao.nn.quantized.dynamic.Linear
        assert sum(isinstance(m, quantized) for m in other.engine.model.modules()) > 10
    same = sum(a == b for a, b in zip(fp32.translate(lines), other.translate(lines), strict=True))
    assert same >= 0.8 * len(lines), f"{same} of {len(lines)} as fp32"
    # the scores of one sentence's n best, read back in float32, near fp32's
    best = fp32.with_decode(beam=3, nbest=3).translate(lines[:8])
    near = other.with_decode(beam=3, nbest=3).translate(lines[:8])
    for a, b in zip(best, near, strict=True):
        assert abs(a[0].score - b[0].score) < 0.25


def test_int8_is_refused_on_cuda_tensors():
    with pytest.raises(ValueError, match="CPU only"):
        precision.quantized(torch.nn.Linear(2, 2).to("meta"))


@pytest.mark.skipif(not has_ct2, reason="ctranslate2 is not installed")
def test_ctranslate2_fp32_equals_ours_and_int8_stays_close(trained, tmp_path):
    from translator.deploy.export import export

    exported = export(trained, tmp_path / "ct2")
    lines = lines_of(trained)
    ours = Translator.from_checkpoint(trained, CPU, decode("fp32")).translate(lines)
    theirs = ct2_translator(exported, decode("fp32"))
    assert theirs.engine.about.precision == "fp32"
    assert theirs.translate(lines) == ours
    int8 = ct2_translator(exported, decode("int8"))
    same = sum(a == b for a, b in zip(int8.translate(lines), ours, strict=True))
    assert int8.engine.about.precision == "int8" and same >= 0.8 * len(lines)


def project(trained, tmp_path):
    """A copy of the tiny model in tmp_path (an export beside the shared one would change
    every other test's engine) and a config file for it."""
    checkpoint = tmp_path / "model.pt"
    shutil.copy(trained, checkpoint)
    config_file = tmp_path / "tiny.toml"
    config = tiny_config(trained.parents[2], decode={"precision": "auto"})
    config_file.write_text(to_toml(config.to_dict()))
    return checkpoint, config_file


def test_auto_without_an_export_decodes_with_ours(trained, tmp_path):
    checkpoint, config_file = project(trained, tmp_path)
    given = ["-c", str(config_file), "--checkpoint", str(checkpoint)]
    result = run_cli("translate", *given, "Tom can see the cat.", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "engine: torch" in result.stderr
    assert "decode.engine auto: no export beside the checkpoint" in result.stderr


@pytest.mark.skipif(not has_ct2, reason="ctranslate2 is not installed")
def test_auto_takes_the_export_beside_the_checkpoint(trained, tmp_path):
    checkpoint, config_file = project(trained, tmp_path)
    given = ["-c", str(config_file), "--checkpoint", str(checkpoint)]
    exported = run_cli("export", str(checkpoint), cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert (tmp_path / "model.ct2" / "model.bin").is_file()
    text = ["Tom can see the cat.", "Tom has a book."]
    auto = run_cli("translate", *given, *text, cwd=tmp_path)
    assert auto.returncode == 0, auto.stderr
    assert f"engine: ctranslate2, int8 (decode.engine auto: {tmp_path / 'model.ct2'}" in (
        auto.stderr
    )
    forced = run_cli("translate", *given, "--engine", "torch", *text, cwd=tmp_path)
    assert "engine: torch" in forced.stderr
    fp32 = ["--precision", "fp32"]
    same = run_cli("translate", *given, *fp32, *text, cwd=tmp_path)
    ours = run_cli("translate", *given, *fp32, "--engine", "torch", *text, cwd=tmp_path)
    assert "engine: ctranslate2, fp32" in same.stderr
    assert same.stdout == ours.stdout  # greedy: the same translations on either engine


@pytest.mark.skipif(not has_ct2, reason="ctranslate2 is not installed")
def test_auto_leaves_an_export_of_another_checkpoint(trained, tmp_path, monkeypatch):
    from translator.deploy.export import export

    checkpoint, config_file = project(trained, tmp_path)
    export(checkpoint, ct2_engine.beside(checkpoint))
    config = tiny_config(trained.parents[2])
    assert factory.choose_engine(config, checkpoint).engine == "ctranslate2"
    with checkpoint.open("ab") as f:  # trained further, or replaced: another file
        f.write(b"\0")
    choice = factory.choose_engine(config, checkpoint)
    assert choice.engine == "torch" and "of another checkpoint" in choice.reason
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert "needs ctranslate2" in factory.choose_engine(config, checkpoint).reason


def test_the_engine_line_names_engine_and_precision(trained):
    config = tiny_config(trained.parents[2])
    config = dataclasses.replace(config, decode=decode("int8"))
    translator = Translator.open(config, trained)
    assert translator.engine_line.startswith("engine: torch, int8 (")
    assert translator.engine.about.name == "torch" and translator.engine.about.origin == trained


@pytest.mark.skipif(not has_ct2, reason="ctranslate2 is not installed")
def test_the_python_api_takes_the_engine_the_command_takes(trained, tmp_path):
    """With an export beside the checkpoint, `Translator.from_checkpoint` decodes through
    it as `translate` does, and says so; `engine="torch"` forces ours."""
    from translator.deploy.export import export

    checkpoint, _ = project(trained, tmp_path)
    export(checkpoint, ct2_engine.beside(checkpoint))
    api = Translator.from_checkpoint(checkpoint, CPU, precision="fp32")
    assert api.engine_line.startswith("engine: ctranslate2, fp32 (decode.engine auto: ")
    ours = Translator.from_checkpoint(checkpoint, CPU, precision="fp32", engine="torch")
    assert ours.engine_line.startswith("engine: torch, fp32 (decode.engine = torch;")
    lines = lines_of(trained)
    assert api.translate(lines) == ours.translate(lines)  # greedy, fp32: the same output
