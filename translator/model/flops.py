"""Counting a model: parameters, and the matrix-multiply FLOPs of a forward pass (for MFU)."""

from torch import nn

from translator.config import ModelConfig


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def forward_flops(model_cfg: ModelConfig, src_len: int, tgt_len: int, tgt_vocab_size: int) -> int:
    """Matrix-multiply FLOPs (2 per multiply-add) of one teacher-forced forward pass over one
    sentence pair with S source and T target tokens; attention scores are counted over the
    full S×S, T×T and T×S matrices. A training step costs about three times this."""
    d, f, s, t = model_cfg.d_model, model_cfg.ff_dim, src_len, tgt_len
    encoder_layer = 2 * s * d * 4 * d + 4 * s * d * f + 4 * s * s * d  # QKV+out, FF, QK·V
    decoder_layer = (
        2 * t * d * 4 * d
        + 4 * t * t * d  # self-attention
        + 2 * t * d * 2 * d
        + 2 * s * d * 2 * d
        + 4 * t * s * d  # cross: Q+out, KV, QK·V
        + 4 * t * d * f  # feed-forward
    )
    output = 2 * t * d * tgt_vocab_size
    return (
        model_cfg.encoder_layers * encoder_layer + model_cfg.decoder_layers * decoder_layer + output
    )
