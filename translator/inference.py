"""Sentences in, translations out: normalise → encode → sort by length → batched search
→ restore the input order → decode pieces to text."""

from __future__ import annotations

import copy
import dataclasses
import logging
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from translator.checkpoint import load as load_checkpoint
from translator.config import Config, DecodeConfig, from_dict
from translator.data.batching import encode, pad, padding_mask
from translator.data.normalize import CONTROL, normalize_en
from translator.data.tokenizer import EOS, Tokenizer, load_tokenizer
from translator.decode import beam_search, greedy
from translator.model import Transformer
from translator.onednn import use_onednn
from translator.rundir import RunDir
from translator.runtime import pick_device

log = logging.getLogger(__name__)
_UNWRITABLE = re.compile(f"{CONTROL}|\ufffd")  # control characters, broken UTF-8


class TextTranslator:
    """The text side of translating, the same for every engine: normalise, encode, cut to
    the model's positions, search (the engine's), detokenize. Engines implement `search`."""

    def __init__(
        self, src_tok: Tokenizer, tgt_tok: Tokenizer, decode: DecodeConfig, max_positions: int
    ):
        self.src_tok = src_tok
        self.tgt_tok = tgt_tok
        self.decode = decode
        self.max_positions = max_positions

    def with_decode(self, **changes) -> TextTranslator:
        """The same engine and model with other decoding settings, e.g. beam=5."""
        other = copy.copy(self)
        other.decode = dataclasses.replace(self.decode, **changes)
        return other

    def translate(
        self,
        sentences: str | Sequence[str],
        *,
        beam: int | None = None,
        length_penalty: float | None = None,
    ):
        """English sentences → Chinese, in input order (one string → one string). Blank
        inputs give blank outputs. `beam` and `length_penalty` apply to this call only."""
        if isinstance(sentences, str):
            return self.translate([sentences], beam=beam, length_penalty=length_penalty)[0]
        if changes := overrides(beam, length_penalty):
            return self.with_decode(**changes).translate(sentences)
        texts = [normalize_en(s) for s in sentences]
        todo = [i for i, text in enumerate(texts) if text]
        results = [""] * len(texts)
        outputs = self.search(self.encode([texts[i] for i in todo], [i + 1 for i in todo]))
        for i, ids in zip(todo, outputs, strict=True):
            results[i] = self.detokenize(ids)
        return results

    def detokenize(self, ids: list[int]) -> str:
        """Output ids → one line of text. With byte fallback the model can write any byte:
        bytes that form no whole UTF-8 character (U+FFFD) and control characters are
        dropped and whitespace runs made one space, as in every training target, so an
        output never breaks into two lines."""
        text = _UNWRITABLE.sub("", self.tgt_tok.decode(ids))
        return " ".join(text.split())

    def encode(self, texts: Sequence[str], lines: Sequence[int] | None = None) -> list[np.ndarray]:
        """Normalised text → source ids ending in EOS, cut to the model's max_positions
        with a warning naming the input's line (`lines`, default 1, 2, …)."""
        limit = self.max_positions
        sources = encode(texts, self.src_tok)
        lines = lines or range(1, len(texts) + 1)
        for i, seq in enumerate(sources):
            if len(seq) > limit:
                log.warning(
                    "input %d has %d tokens; only the first %d are translated",
                    lines[i],
                    len(seq),
                    limit,
                )
                sources[i] = np.append(seq[: limit - 1], EOS).astype(seq.dtype)
        return sources

    def limits(self, source_lengths: Sequence[int]) -> torch.Tensor:
        """How many tokens each sentence may produce: a × source length + b, within the
        model's positions (BOS takes one)."""
        lengths = torch.tensor(source_lengths)
        limit = (lengths * self.decode.max_len_a + self.decode.max_len_b).long()
        return limit.clamp(max=self.max_positions - 1)

    def search(self, sources: Sequence[np.ndarray]) -> list[list[int]]:
        """Source ids → output ids (no BOS/EOS), in input order."""
        raise NotImplementedError

    def batches(self, sources: Sequence[np.ndarray]) -> list[list[int]]:
        """The indices of `sources`, sorted by length, in batches of `decode.batch_size`."""
        order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
        size = self.decode.batch_size
        return [order[start : start + size] for start in range(0, len(order), size)]


class Translator(TextTranslator):
    """Our PyTorch model as the engine."""

    def __init__(
        self, model: Transformer, src_tok: Tokenizer, tgt_tok: Tokenizer, decode: DecodeConfig
    ):
        super().__init__(src_tok, tgt_tok, decode, model.cfg.max_positions)
        self.model = model
        self.config: Config | None = None  # the checkpoint's, when loaded from one

    @classmethod
    def from_checkpoint(
        cls,
        path: str | Path,
        device: str | torch.device = "auto",
        decode: DecodeConfig | None = None,
        *,
        beam: int | None = None,
        length_penalty: float | None = None,
    ) -> Translator:
        """The model and tokenizers saved in a checkpoint, loaded once. Decoding settings:
        `decode`, else the ones the checkpoint was trained with; `beam` and
        `length_penalty` override either. The checkpoint's config is `.config`."""
        payload = load_checkpoint(path)
        config = from_dict(payload["config"])
        src_tok = load_tokenizer(payload["tokenizer_models"]["src"])
        tgt_tok = load_tokenizer(payload["tokenizer_models"]["tgt"])
        model = Transformer(config.model, src_tok.get_piece_size(), tgt_tok.get_piece_size())
        model.load_state_dict(payload["model"])
        decode = dataclasses.replace(decode or config.decode, **overrides(beam, length_penalty))
        device = pick_device(device) if isinstance(device, str) else device
        translator = cls(for_decoding(model.to(device), decode), src_tok, tgt_tok, decode)
        translator.config = config
        return translator

    @classmethod
    def from_run(cls, run_dir: str | Path, device: str | torch.device = "auto", **options):
        """The best checkpoint of a training run directory (`train.run_dir`)."""
        return cls.from_checkpoint(RunDir(run_dir).best, device, **options)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def search(self, sources: Sequence[np.ndarray]) -> list[list[int]]:
        """Source ids → output ids (no BOS/EOS), in input order. Sentences are sorted by
        length into batches of `decode.batch_size`; `decode.beam` picks greedy or beam
        search; each may write `max_len_a × source length + max_len_b` tokens."""
        cfg = self.decode
        was_training = self.model.training
        self.model.eval()
        outputs: list[list[int]] = [[] for _ in sources]
        for rows in self.batches(sources):
            src = pad([sources[i] for i in rows]).to(self.device)
            max_lens = self.limits([len(sources[i]) for i in rows])
            if cfg.beam == 1:
                found = greedy(self.model, src, padding_mask(src), max_lens)
            else:
                found = beam_search(
                    self.model, src, padding_mask(src), max_lens, cfg.beam, cfg.length_penalty
                )
            for i, ids in zip(rows, found, strict=True):
                outputs[i] = ids
        self.model.train(was_training)
        return outputs


def overrides(beam: int | None, length_penalty: float | None) -> dict:
    """The Python API's decoding arguments that were given, checked as the config checks
    them, as DecodeConfig changes."""
    if beam is not None and beam < 1:
        raise ValueError(f"beam must be at least 1, got {beam}")
    if length_penalty is not None and length_penalty < 0:
        raise ValueError(f"length_penalty must be >= 0, got {length_penalty}")
    changes = {"beam": beam, "length_penalty": length_penalty}
    return {key: value for key, value in changes.items() if value is not None}


def for_decoding(model: Transformer, decode: DecodeConfig) -> Transformer:
    """`model` set up to decode and nothing else: eval mode, and on the CPU its linear
    layers through oneDNN (`decode.onednn`)."""
    if next(model.parameters()).device.type == "cpu":
        use_onednn(model, decode.onednn)
    return model.eval()


def open_translator(config: Config, checkpoint: Path) -> TextTranslator:
    """The engine `decode.engine` names: our model from `checkpoint` (on `train.device`),
    or the CTranslate2 directory `decode.model_dir`; decoding settings from `decode`."""
    device = pick_device(config.train.device)
    if config.decode.engine == "ctranslate2":
        from translator.ct2 import CTranslate2Translator

        return CTranslate2Translator.from_dir(
            config.decode.model_dir,
            config.decode,
            device=device.type,
            threads=config.decode.threads,
            workers=config.decode.workers,
        )
    return Translator.from_checkpoint(checkpoint, device, config.decode)


def output_origin(config: Config, checkpoint: Path) -> Path:
    """What the engine decodes from: eval writes its hypotheses beside it, serve names it."""
    return Path(config.decode.model_dir) if config.decode.engine == "ctranslate2" else checkpoint
