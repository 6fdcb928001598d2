"""Every config shipped in configs/ loads, and its model can be built and run."""

from pathlib import Path

import pytest
import torch

from translator.config import load
from translator.data.batching import padding_mask
from translator.model.transformer import Transformer

CONFIGS = sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.toml"))


def test_the_documented_configs_are_shipped():
    assert {p.name for p in CONFIGS} >= {"tiny.toml", "tatoeba-cpu.toml", "tatoeba-gpu.toml"}


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_config_loads_and_builds_a_working_model(path):
    config = load(path)
    assert config.data.inputs, "a shipped config names its corpus"
    model = Transformer(config.model, config.data.src_vocab_size, config.data.tgt_vocab_size)
    src = torch.randint(4, 50, (2, 7))
    tgt = torch.randint(4, 50, (2, 5))
    logits = model(src, tgt, padding_mask(src))
    assert logits.shape == (2, 5, config.data.tgt_vocab_size)


SPLIT_KEYS = (  # the data settings that decide which pairs are held out
    "inputs exclude format max_chars min_length_ratio max_length_ratio valid_size test_size seed"
)


def test_the_tatoeba_configs_hold_out_the_same_test_split():
    """Their figures are compared with each other in docs/quality.md: every data setting
    that decides which pairs are held out must agree."""
    names = {"tatoeba-cpu.toml", "tatoeba-cpu-60.toml", "tatoeba-gpu.toml"}
    tatoeba = [load(p).data for p in CONFIGS if p.name in names]
    assert len(tatoeba) == len(names)
    for key in SPLIT_KEYS.split():
        assert len({repr(getattr(d, key)) for d in tatoeba}) == 1, key
