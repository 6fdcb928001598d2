"""`translator export`: a checkpoint → a CTranslate2 model directory, through CTranslate2's
own Transformer spec and converter API (as its fairseq and OpenNMT-py converters do).

Our model maps onto `TransformerSpec` one to one, but our sinusoidal table interleaves sin
and cos where CTranslate2's puts all sines first (so the table is stored) and our LayerNorm
epsilon (1e-5) is written into the config. The directory
(docs/formats.md#the-ctranslate2-directory) holds all that `--engine ctranslate2` needs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from translator.config import ModelConfig, from_dict
from translator.data import known_words
from translator.data.tokenizer import load_tokenizer
from translator.errors import UserError
from translator.inference.ct2_engine import (
    METADATA,
    SOURCE_SPM,
    SOURCE_WORDS,
    TARGET_SPM,
    require_ctranslate2,
)
from translator.model.checkpoint import digest
from translator.model.checkpoint import load as load_checkpoint
from translator.model.transformer import sinusoids

QUANTIZATIONS = (
    *("int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16"),
    *("float16", "bfloat16", "float32"),
)


def build_spec(model_cfg: ModelConfig, weights: dict[str, Any], vocabularies: tuple[list, list]):
    """The CTranslate2 TransformerSpec holding `weights` (our state dict, as numpy)."""
    from ctranslate2.specs import common_spec, transformer_spec

    spec = transformer_spec.TransformerSpec.from_config(
        (model_cfg.encoder_layers, model_cfg.decoder_layers),
        model_cfg.heads,
        pre_norm=model_cfg.norm == "pre",
        activation=getattr(common_spec.Activation, model_cfg.activation.upper()),  # same names
    )
    table = sinusoids(model_cfg.max_positions, model_cfg.d_model).numpy()
    encoder, decoder = spec.encoder, spec.decoder
    _embedding(encoder, weights["src_embed.tokens.weight"], table)
    _embedding(decoder, weights["tgt_embed.tokens.weight"], table)
    decoder.start_from_zero_embedding = model_cfg.zero_start
    for i, layer in enumerate(encoder.layer):
        at = f"encoder.{i}."
        _linears(layer.self_attention.linear, weights, at + "attn.", ("qkv", "out"))
        _norm(layer.self_attention.layer_norm, weights, at + "attn_block.norm")
        _ffn(layer.ffn, weights, at)
    for i, layer in enumerate(decoder.layer):
        at = f"decoder.{i}."
        _linears(layer.self_attention.linear, weights, at + "self_attn.", ("qkv", "out"))
        _norm(layer.self_attention.layer_norm, weights, at + "self_block.norm")
        _linears(layer.attention.linear, weights, at + "cross_attn.", ("q", "kv", "out"))
        _norm(layer.attention.layer_norm, weights, at + "cross_block.norm")
        _ffn(layer.ffn, weights, at)
    if model_cfg.norm == "pre":
        _norm(encoder.layer_norm, weights, "encoder_norm")
        _norm(decoder.layer_norm, weights, "decoder_norm")
    decoder.projection.weight = weights["project.weight"]
    if model_cfg.output_bias:
        decoder.projection.bias = weights["project.bias"]
    spec.register_source_vocabulary(vocabularies[0])
    spec.register_target_vocabulary(vocabularies[1])
    spec.config.unk_token, spec.config.bos_token, spec.config.eos_token = "<unk>", "<s>", "</s>"
    spec.config.decoder_start_token = "<s>"
    spec.config.add_source_eos = True
    spec.config.layer_norm_epsilon = 1e-5
    return spec


def _embedding(stack, tokens, table) -> None:
    embeddings = stack.embeddings[0] if isinstance(stack.embeddings, list) else stack.embeddings
    embeddings.weight = tokens
    stack.scale_embeddings = True  # × √D, as ours
    stack.position_encodings.encodings = table


def _linears(specs, weights, prefix: str, names: tuple[str, ...]) -> None:
    for spec, name in zip(specs, names, strict=True):
        spec.weight = weights[f"{prefix}{name}.weight"]
        spec.bias = weights[f"{prefix}{name}.bias"]


def _norm(spec, weights, name: str) -> None:
    spec.gamma, spec.beta = weights[f"{name}.weight"], weights[f"{name}.bias"]


def _ffn(spec, weights, prefix: str) -> None:
    _norm(spec.layer_norm, weights, prefix + "ff_block.norm")
    _linears((spec.linear_0, spec.linear_1), weights, prefix + "ff.", ("0", "3"))


def export(checkpoint: Path, out: Path, quantization: str | None = None, force: bool = False):
    """Write the CTranslate2 directory `out` for `checkpoint`. Returns `out`."""
    ctranslate2 = require_ctranslate2()
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise UserError(
            f"unknown quantization {quantization!r} (choose from {', '.join(QUANTIZATIONS)})"
        )
    if out.exists() and not force:
        raise UserError(f"{out} exists; pass --force to replace it")
    payload = load_checkpoint(checkpoint)
    config = from_dict(payload["config"])
    models = payload["tokenizer_models"]
    tokenizers = [load_tokenizer(models[side]) for side in ("src", "tgt")]
    vocabularies = tuple(
        [tok.id_to_piece(i) for i in range(tok.get_piece_size())] for tok in tokenizers
    )
    weights = {name: t.detach().float().cpu().numpy() for name, t in payload["model"].items()}

    class Converter(ctranslate2.converters.Converter):
        def _load(self):
            return build_spec(config.model, weights, vocabularies)

    Converter().convert(str(out), quantization=quantization, force=True)  # replaces `out`
    for name, side in ((SOURCE_SPM, "src"), (TARGET_SPM, "tgt")):
        (out / name).write_bytes(models[side])  # serialized in the checkpoint
    if words := known_words.listed(payload.get("source_words")):
        (out / SOURCE_WORDS).write_text("\n".join(words), encoding="ascii")
    metadata = {
        "checkpoint": str(checkpoint),
        "checkpoint_sha256": digest(checkpoint),  # decode.engine auto takes only this one's
        "quantization": quantization or "float32",
        "max_positions": config.model.max_positions,
        "src_prefix": config.data.src_prefix,
        "decode": payload["config"]["decode"],
        "model": payload["config"]["model"],
    }
    (out / METADATA).write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
    return out
