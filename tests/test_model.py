import pytest
import torch

from translator.config import ModelConfig, TrainConfig
from translator.data.batching import padding_mask
from translator.data.tokenizer import PAD
from translator.model.loss import sequence_loss
from translator.model.transformer import Transformer
from translator.training.optimizer import build_optimizer, parameter_groups

SRC_V, TGT_V = 50, 60


def model(**overrides) -> Transformer:
    torch.manual_seed(0)
    model_cfg = ModelConfig(
        encoder_layers=2,
        decoder_layers=2,
        d_model=32,
        heads=4,
        ff_dim=64,
        dropout=0.0,
        max_positions=40,
        **overrides,
    )
    return Transformer(model_cfg, SRC_V, TGT_V).eval()


def ids(batch: int, length: int, vocab: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(4, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_output_shape(norm):
    src, tgt = ids(3, 7, SRC_V), ids(3, 5, TGT_V)
    assert model(norm=norm)(src, tgt, padding_mask(src)).shape == (3, 5, TGT_V)


def test_decoder_is_causal():
    m = model()
    src, tgt = ids(2, 6, SRC_V), ids(2, 8, TGT_V)
    changed = tgt.clone()
    changed[:, 5:] = ids(2, 3, TGT_V, seed=1)
    a, b = m(src, tgt, padding_mask(src)), m(src, changed, padding_mask(src))
    torch.testing.assert_close(a[:, :5], b[:, :5])
    assert not torch.allclose(a[:, 5:], b[:, 5:])


def test_source_padding_is_invisible():
    m = model()
    src, tgt = ids(1, 5, SRC_V), ids(1, 4, TGT_V)
    padded = torch.cat([src, torch.full((1, 3), PAD)], dim=1)
    alone = m(src, tgt, padding_mask(src))
    torch.testing.assert_close(m(padded, tgt, padding_mask(padded)), alone)
    # and a padded row in a batch gives what it gives alone
    other = ids(1, 8, SRC_V, seed=2)
    both = torch.cat([padded, other])
    out = m(both, torch.cat([tgt, tgt]), padding_mask(both))
    torch.testing.assert_close(out[:1], alone)


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_incremental_decoding_matches_full_pass(norm):
    m = model(norm=norm)
    src, tgt = ids(3, 6, SRC_V), ids(3, 7, TGT_V)
    src[1, 4:] = PAD
    mask = padding_mask(src)
    full = m(src, tgt, mask)
    torch.testing.assert_close(step_by_step(m, src, tgt), full, atol=1e-5, rtol=1e-5)


def step_by_step(m: Transformer, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """The logits of `tgt` decoded one position at a time, with the cache."""
    mask = padding_mask(src)
    state = m.start_decoding(m.encode(src, mask), mask)
    steps = []
    for t in range(tgt.size(1)):
        logits, state = m.decode(tgt[:, t : t + 1], state)
        steps.append(logits)
    return torch.cat(steps, dim=1)


@pytest.mark.parametrize("zero_start", [False, True])
def test_a_zero_start_decoder_never_reads_its_first_token(zero_start):
    """model.zero_start: the first target position's embedding is zero whatever its id,
    in a full pass and in incremental decoding alike; later positions read theirs."""
    m = model(norm="post", zero_start=zero_start)
    src, tgt = ids(2, 6, SRC_V), ids(2, 5, TGT_V)
    other = tgt.clone()
    other[:, 0] = tgt[:, 0] % (TGT_V - 5) + 4 + 1  # another first token
    mask = padding_mask(src)
    first, second = m(src, tgt, mask), m(src, other, mask)
    assert torch.equal(first, second) == zero_start
    torch.testing.assert_close(step_by_step(m, src, other), second, atol=1e-5, rtol=1e-5)
    later = tgt.clone()
    later[:, 2] = other[:, 0]
    assert not torch.allclose(m(src, later, mask)[:, 2:], first[:, 2:])


def test_tied_embeddings_share_one_matrix():
    tied, untied = model(tie_embeddings=True), model(tie_embeddings=False)
    assert tied.project.weight is tied.tgt_embed.tokens.weight
    extra = TGT_V * 32
    assert (
        sum(p.numel() for p in untied.parameters()) - sum(p.numel() for p in tied.parameters())
        == extra
    )


def test_label_smoothed_loss_ignores_padding():
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 10)
    target = torch.tensor([[5, 6, 7, 3], [8, 3, PAD, PAD]])
    loss = sequence_loss(logits, target, smoothing=0.1)
    # the same loss computed by hand over the 6 real positions only
    real = target != PAD
    logp = logits[real].log_softmax(-1)
    nll = -logp.gather(1, target[real][:, None]).squeeze(1)
    smooth = -logp.mean(-1)
    torch.testing.assert_close(loss, (0.9 * nll + 0.1 * smooth).sum())
    noisy = logits.clone()
    noisy[1, 2:] = 1e3 * torch.randn(2, 10)  # whatever the model says at padding...
    torch.testing.assert_close(sequence_loss(noisy, target, smoothing=0.1), loss)  # ...is ignored


@pytest.mark.parametrize("p", [0.1, 0.3])
def test_dropout_drops_p_and_keeps_the_expectation(p):
    from translator.model.dropout import Dropout

    drop = Dropout(p)
    x = torch.ones(1000, 1000, requires_grad=True)
    torch.manual_seed(0)
    y = drop(x)
    dropped = (y == 0).float().mean().item()
    assert abs(dropped - p) < 0.002
    assert abs(y.mean().item() - 1.0) < 0.005
    torch.testing.assert_close(
        y[y != 0], torch.full_like(y[y != 0], 1 / (1 - p)), rtol=2e-5, atol=0
    )
    y.sum().backward()
    assert torch.equal(x.grad == 0, y == 0)  # the gradient flows exactly where values did
    torch.manual_seed(0)
    assert torch.equal(drop(x), y)  # seeded like every other random op
    assert drop.eval()(x) is x


def test_dropout_in_bf16_rounds_once_and_stays_bf16():
    """bf16 values (train.precision): each kept value and its gradient is the value times
    1/(1 - p) rounded once to bf16, the rest 0, and nothing turns float32."""
    from translator.model.dropout import Dropout

    drop = Dropout(0.1)
    x = torch.randn(300, 300).bfloat16().requires_grad_()
    y = drop(x)
    g = torch.randn(300, 300).bfloat16()
    y.backward(g)
    kept = y != 0
    assert y.dtype == x.grad.dtype == torch.bfloat16
    assert abs(1 - kept.float().mean().item() - 0.1) < 0.01
    expected = (x.detach().float() * drop.scale).bfloat16()
    assert torch.equal(y.detach(), torch.where(kept, expected, 0))
    assert torch.equal(x.grad, torch.where(kept, (g.float() * drop.scale).bfloat16(), 0))


def test_forward_flops_match_pytorchs_count():
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    from translator.model.flops import forward_flops

    m = model()
    src, tgt = ids(3, 7, SRC_V), ids(3, 5, TGT_V)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        m(src, tgt, padding_mask(src))  # the math kernel shows attention as countable bmm
    assert counter.get_total_flops() == 3 * forward_flops(m.model_cfg, 7, 5, TGT_V)


@pytest.mark.parametrize("tie", [True, False])
def test_weight_decay_reaches_matrices_only(tie):
    net = model(tie_embeddings=tie)
    decayed, kept = (group["params"] for group in parameter_groups(net, 0.01))
    names = {id(p): n for n, p in net.named_parameters()}
    decayed_names = {names[id(p)] for p in decayed}
    kept_names = {names[id(p)] for p in kept}
    assert len(decayed) + len(kept) == len(list(net.parameters()))  # each once
    assert all(p.ndim == 2 for p in decayed)
    assert not any("norm" in n or n.endswith(".bias") or "embed" in n for n in decayed_names)
    assert "decoder.0.self_attn.qkv.weight" in decayed_names
    assert "tgt_embed.tokens.weight" in kept_names  # the tied projection with it
    assert ("project.weight" in decayed_names) == (not tie)
    optimizer = build_optimizer(net, TrainConfig(weight_decay=0.01))
    assert [g["weight_decay"] for g in optimizer.param_groups] == [0.01, 0.0]
