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
