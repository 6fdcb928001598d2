"""The Python API: `from translator import Translator`, loaded once, called many times."""

import pytest

import translator.inference.torch_engine as inference
from translator import Translator
from translator.errors import UserError

SENTENCES = ["i have a cat .", "where is the big station ?", "", "he goes with her ."]


def test_from_run_loads_once_and_translates_lists_and_strings(trained, monkeypatch):
    loads = []
    real_load = inference.load_checkpoint
    monkeypatch.setattr(inference, "load_checkpoint", lambda p: loads.append(p) or real_load(p))
    model = Translator.from_run(trained.parent.parent, device="cpu")
    first = model.translate(SENTENCES)
    again = model.translate(SENTENCES)
    single = model.translate(SENTENCES[0])
    assert len(loads) == 1
    assert first == again and single == first[0]
    assert len(first) == 4 and first[2] == "" and all(first[i] for i in (0, 1, 3))
    assert first == Translator.from_checkpoint(trained, "cpu").translate(SENTENCES)


def test_beam_and_length_penalty_apply_to_the_call_or_the_load(trained):
    model = Translator.from_checkpoint(trained, "cpu")
    assert model.decode_cfg.beam == 1
    beam3 = model.translate(SENTENCES, beam=3, length_penalty=1.0)
    assert model.decode_cfg.beam == 1  # the call's settings do not stick
    loaded = Translator.from_checkpoint(trained, "cpu", beam=3, length_penalty=1.0)
    assert (loaded.decode_cfg.beam, loaded.decode_cfg.length_penalty) == (3, 1.0)
    assert loaded.translate(SENTENCES) == beam3
    assert model.with_decode(beam=3, length_penalty=1.0).translate(SENTENCES) == beam3


def test_bad_arguments_and_missing_runs_fail_clearly(trained, tmp_path):
    model = Translator.from_checkpoint(trained, "cpu")
    with pytest.raises(ValueError, match="decode.beam' must be positive"):
        model.translate(["hello ."], beam=0)
    with pytest.raises(ValueError, match="length_penalty"):
        Translator.from_checkpoint(trained, "cpu", length_penalty=-1)
    with pytest.raises(UserError, match="train first"):
        Translator.from_run(tmp_path / "no-such-run")
