"""oneDNN for the linear layers when decoding on the CPU: same numbers to rounding, same
outputs, same parameters, and training untouched."""

import copy
from dataclasses import replace

import pytest
import torch
from reference import greedy
from torch import nn

from translator.config import ModelConfig
from translator.data.batching import pad, padding_mask
from translator.inference import torch_engine as onednn
from translator.inference.search import TopK, beam_search
from translator.inference.text import Translator
from translator.inference.torch_engine import OneDNNLinear, use_onednn
from translator.model.transformer import Transformer

needs_onednn = pytest.mark.skipif(not onednn.available(), reason="oneDNN needs an x86-64 CPU")


def tiny_model(seed: int = 0) -> Transformer:
    torch.manual_seed(seed)
    model_cfg = ModelConfig(encoder_layers=2, decoder_layers=2, d_model=32, heads=4, ff_dim=64)
    return Transformer(model_cfg, 50, 60).eval()


def linear_kinds(model: nn.Module) -> set[type]:
    return {type(m) for m in model.modules() if isinstance(m, nn.Linear)}


@needs_onednn
def test_switching_keeps_parameters_ties_and_state_and_switches_back():
    model = tiny_model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    count = sum(type(m) is nn.Linear for m in model.modules())
    assert use_onednn(model) == count
    assert linear_kinds(model) == {OneDNNLinear}
    assert model.project.weight is model.tgt_embed.tokens.weight  # still tied
    after = model.state_dict()
    assert after.keys() == before.keys()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert use_onednn(model, enabled=False) == count
    assert linear_kinds(model) == {nn.Linear}


@needs_onednn
def test_forward_agrees_with_mkl_to_rounding():
    model = tiny_model()
    fast = copy.deepcopy(model)
    use_onednn(fast)
    src = torch.randint(4, 50, (6, 9))
    tgt = torch.randint(4, 60, (6, 7))
    with torch.inference_mode():
        expected = model(src, tgt, padding_mask(src))
        got = fast(src, tgt, padding_mask(src))
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


@needs_onednn
def test_training_through_a_switched_model_is_plain_autograd():
    """With gradients on, the layer computes as nn.Linear: same loss, same gradients."""
    model = tiny_model().train()
    fast = copy.deepcopy(model)
    use_onednn(fast)
    src = torch.randint(4, 50, (4, 8))
    tgt = torch.randint(4, 60, (4, 6))
    losses = []
    for m in (model, fast):
        torch.manual_seed(1)  # the same dropout masks
        loss = m(src, tgt, padding_mask(src)).logsumexp(-1).mean()
        loss.backward()
        losses.append(loss.item())
    assert losses[0] == losses[1]
    for (name, a), b in zip(model.named_parameters(), fast.parameters(), strict=True):
        assert torch.equal(a.grad, b.grad), name


def test_unavailable_off_x86(monkeypatch):
    monkeypatch.setattr(onednn.platform, "machine", lambda: "arm64")
    model = tiny_model()
    assert not onednn.available()
    assert use_onednn(model) == 0
    assert linear_kinds(model) == {nn.Linear}


@needs_onednn
def test_decoding_outputs_equal_with_either_kernel(trained):
    """The tiny trained model decodes the same sentences the same way with either kernel
    (greedy and beam 4); from_checkpoint switches only when decode.onednn says so."""
    translator = Translator.from_checkpoint(trained, torch.device("cpu"))
    config = translator.engine.config
    assert config.decode.onednn and linear_kinds(translator.engine.model) == {OneDNNLinear}
    off = Translator.from_checkpoint(
        trained, torch.device("cpu"), replace(config.decode, onednn=False)
    )
    assert linear_kinds(off.engine.model) == {nn.Linear}
    sentences = ["i have a cat .", "where is the big station ?", "he goes with her ."] * 4
    src = pad(translator.encode(sentences))
    mask, limits = padding_mask(src), torch.full((len(sentences),), 12)
    for search in (
        lambda m: greedy(m, src, mask, limits),
        lambda m: [h[0][0] for h in beam_search(m, src, mask, limits, TopK(4))],
    ):
        assert search(translator.engine.model) == search(off.engine.model)


@needs_onednn
def test_few_rows_stay_with_mkl():
    """Under `min_rows` rows the layer calls nn.Linear's kernel; from there on oneDNN's."""
    layer = nn.Linear(16, 8)
    use_onednn(layer)

    def ops_run(rows: int) -> set[str]:
        with torch.inference_mode(), torch.profiler.profile() as prof:
            layer(torch.randn(rows, 1, 16))
        return {event.key for event in prof.key_averages()}

    assert "mkldnn::_linear_pointwise" not in ops_run(OneDNNLinear.min_rows - 1)
    assert "mkldnn::_linear_pointwise" in ops_run(OneDNNLinear.min_rows)
