"""Sentences in, translations out: normalise → encode → sort by length → batched search
→ restore the input order → decode pieces to text."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import torch

from translator.checkpoint import load as load_checkpoint
from translator.config import Config, DecodeConfig, from_dict
from translator.data.batching import encode, pad, padding_mask
from translator.data.normalize import normalize_en
from translator.data.tokenizer import EOS, Tokenizer, load_tokenizer
from translator.decode import greedy
from translator.errors import UserError
from translator.model import Transformer

log = logging.getLogger(__name__)


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise UserError(f"unknown device {name!r} (use auto, cpu or cuda)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"device {name!r} requested but CUDA is not available")
    return device


class Translator:
    def __init__(
        self, model: Transformer, src_tok: Tokenizer, tgt_tok: Tokenizer, decode: DecodeConfig
    ):
        self.model = model
        self.src_tok = src_tok
        self.tgt_tok = tgt_tok
        self.decode = decode

    @classmethod
    def from_checkpoint(cls, path: str | Path, device: torch.device) -> tuple[Translator, Config]:
        payload = load_checkpoint(path)
        config = from_dict(payload["config"])
        src_tok = load_tokenizer(payload["tokenizer_models"]["src"])
        tgt_tok = load_tokenizer(payload["tokenizer_models"]["tgt"])
        model = Transformer(config.model, src_tok.get_piece_size(), tgt_tok.get_piece_size())
        model.load_state_dict(payload["model"])
        model.to(device).eval()
        return cls(model, src_tok, tgt_tok, config.decode), config

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def translate(self, sentences: Sequence[str]) -> list[str]:
        """Translate in batches of similar length; the output keeps the input order.
        Blank inputs give blank outputs."""
        was_training = self.model.training
        self.model.eval()
        limit = self.model.cfg.max_positions
        texts = [normalize_en(s) for s in sentences]
        todo = [i for i, text in enumerate(texts) if text]
        ids = dict(zip(todo, encode([texts[i] for i in todo], self.src_tok), strict=True))
        for i, seq in ids.items():
            if len(seq) > limit:
                log.warning(
                    "input %d has %d tokens; only the first %d are translated",
                    i + 1,
                    len(seq),
                    limit,
                )
                seq = seq[:limit].copy()
                seq[-1] = EOS
                ids[i] = seq
        todo.sort(key=lambda i: len(ids[i]))
        results = [""] * len(texts)
        size = self.decode.batch_size
        for start in range(0, len(todo), size):
            rows = todo[start : start + size]
            src = pad([ids[i] for i in rows]).to(self.device)
            lengths = torch.tensor([len(ids[i]) for i in rows])
            max_lens = (lengths * self.decode.max_len_a + self.decode.max_len_b).long()
            max_lens = max_lens.clamp(max=limit - 1)  # BOS takes the first position
            for i, out in zip(
                rows, greedy(self.model, src, padding_mask(src), max_lens), strict=True
            ):
                results[i] = self.tgt_tok.decode(out)
        self.model.train(was_training)
        return results
