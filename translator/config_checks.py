"""The config's cross-field checks, which a type alone cannot express: positive sizes,
ranges, and the decode section's combinations (also run on the Python API's per-call
settings). `translator.config` runs them once, when a config is built."""

from __future__ import annotations

from typing import TYPE_CHECKING

from translator.corpora import parse_corpora
from translator.errors import UserError

if TYPE_CHECKING:
    from translator.config import Config, DecodeConfig


def validate(config: Config) -> None:
    """Cross-field checks that a type alone cannot express."""
    parse_corpora(config.data.inputs)
    m = config.model
    if m.d_model % m.heads:
        raise UserError(f"model.d_model ({m.d_model}) must be divisible by model.heads ({m.heads})")
    positive = {
        "model.d_model": m.d_model,
        "model.heads": m.heads,
        "model.ff_dim": m.ff_dim,
        "model.max_positions": m.max_positions,
        "train.max_tokens": config.train.max_tokens,
        "train.lr": config.train.lr,
        "decode.batch_size": config.decode.batch_size,
        "decode.beam": config.decode.beam,
        "decode.workers": config.decode.workers,
        "serve.max_sentences": config.serve.max_sentences,
        "serve.max_chars": config.serve.max_chars,
        "serve.max_beam": config.serve.max_beam,
        "serve.max_queue": config.serve.max_queue,
        "serve.max_body_kb": config.serve.max_body_kb,
        "serve.read_timeout_s": config.serve.read_timeout_s,
        "serve.request_timeout_s": config.serve.request_timeout_s,
        "data.src_vocab_size": config.data.src_vocab_size,
        "data.tgt_vocab_size": config.data.tgt_vocab_size,
        "data.tokenizer_sentences": config.data.tokenizer_sentences,
        "train.update_freq": config.train.update_freq,
        "train.log_every": config.train.log_every,
    }
    for key, value in positive.items():
        if value <= 0:
            raise UserError(f"config key '{key}' must be positive, got {value}")
    if config.train.save_every < 0:
        raise UserError("config key 'train.save_every' must be >= 0 (0: at epoch ends only)")
    if config.data.workers < 0:
        raise UserError("config key 'data.workers' must be >= 0 (0: every core)")
    if not 0 <= config.serve.port <= 65535:
        raise UserError("config key 'serve.port' must be from 0 to 65535")
    if config.serve.batch_wait_ms < 0:
        raise UserError("config key 'serve.batch_wait_ms' must be >= 0")
    if config.decode.threads < 0:
        raise UserError("config key 'decode.threads' must be >= 0 (0: the engine's default)")
    if config.decode.engine == "ctranslate2" and not config.decode.model_dir:
        raise UserError(
            "the ctranslate2 engine needs decode.model_dir (--model DIR), a directory "
            "written by `translator export`"
        )
    check_decode(config.decode)
    if not 0 <= m.dropout < 1:
        raise UserError("config key 'model.dropout' must be in [0, 1)")
    if not 0 <= config.train.label_smoothing < 1:
        raise UserError("config key 'train.label_smoothing' must be in [0, 1)")
    if not 0 <= config.train.ema < 1:
        raise UserError("config key 'train.ema' must be in [0, 1) (0: off), e.g. 0.999")
    if config.train.rdrop < 0:
        raise UserError("config key 'train.rdrop' must be >= 0 (0: off), e.g. 5")
    if config.train.rdrop and not m.dropout:
        raise UserError("train.rdrop compares two dropout draws: it needs model.dropout > 0")
    if config.data.subword_sampling < 0:
        raise UserError("config key 'data.subword_sampling' must be >= 0 (0: off)")
    if not 0 < config.data.subword_alpha < 1:
        raise UserError("config key 'data.subword_alpha' must be in (0, 1), e.g. 0.1")


def check_decode(d: DecodeConfig) -> None:
    """The decode section's own checks (also run on the Python API's per-call settings)."""
    checks = {
        "length_penalty": (d.length_penalty >= 0, "must be >= 0"),
        "nbest": (d.nbest >= 0, "must be >= 0 (0: one translation a line, as text)"),
        "no_repeat_ngram": (d.no_repeat_ngram >= 0, "must be >= 0 (0: off)"),
        "topk": (d.topk >= 0, "must be >= 0 (0: all tokens)"),
        "topp": (0 < d.topp <= 1, "must be in (0, 1]"),
        "temperature": (d.temperature >= 0, "must be >= 0 (0: greedy)"),
    }
    for key, (ok, rule) in checks.items():
        if not ok:
            raise UserError(f"config key 'decode.{key}' {rule}, got {getattr(d, key)}")
    if not d.sample and d.nbest > d.beam:
        raise UserError(
            f"decode.nbest ({d.nbest}) must be at most decode.beam ({d.beam}): the search "
            "keeps only that many hypotheses (or sample with decode.sample)"
        )
