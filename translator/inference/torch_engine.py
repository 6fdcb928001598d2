"""Our PyTorch model as the engine (engine.py's `Engine`): a checkpoint loaded once (model,
tokenizers, config), searched batch by batch as search.py searches, in the precision
`decode.precision` chooses (precision.py). decode.engine auto falls back on it."""

from __future__ import annotations

import platform
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
from torch import nn

from translator.config import Config, DecodeConfig, from_dict
from translator.data import known_words
from translator.data.batching import pad, padding_mask
from translator.data.tokenizer import BOS, EOS, Tokenizer, load_tokenizer
from translator.inference import precision as precisions
from translator.inference.engine import About, Forced, Found, SearchBatch, Sources
from translator.inference.search import search
from translator.model.checkpoint import load as load_checkpoint
from translator.model.transformer import Transformer
from translator.runtime import pick_device

NAME = "torch"  # decode.engine's name for it (pyproject.toml's entry point)


class TorchEngine:
    """Our model as the engine."""

    reads_dir = False  # a checkpoint
    auto_rank = 0  # decode.engine auto: what decodes where no other engine takes it

    def __init__(
        self,
        model: Transformer,
        src_tok: Tokenizer,
        tgt_tok: Tokenizer,
        src_prefix: str = "",
        about: About | None = None,
    ):
        self.model = model
        self.src_tok, self.tgt_tok, self.src_prefix = src_tok, tgt_tok, src_prefix
        self.max_positions = model.model_cfg.max_positions
        self.about = about or About(NAME, "fp32", precision_reason="the model as given")
        self.known_words: frozenset[str] | None = None  # known_words.py: none where not given
        self.config: Config | None = None  # the checkpoint's, when loaded from one

    @classmethod
    def auto(cls, checkpoint: Path) -> tuple[str | None, str]:
        return "", "ours"

    @classmethod
    def open(cls, config: Config, checkpoint: Path, model_dir: str, reason: str) -> TorchEngine:
        device = pick_device(config.train.device)
        return cls.from_checkpoint(checkpoint, device, config.decode, reason)

    @classmethod
    def from_checkpoint(
        cls, path: Path, device: torch.device, decode_cfg: DecodeConfig, reason: str = ""
    ) -> TorchEngine:
        """The model and tokenizers saved in a checkpoint, on `device`, in the precision
        `decode_cfg.precision` means there; `reason`: why this engine (for `about`)."""
        payload = load_checkpoint(path)
        config = from_dict(payload["config"])
        src_tok = load_tokenizer(payload["tokenizer_models"]["src"])
        tgt_tok = load_tokenizer(payload["tokenizer_models"]["tgt"])
        model = Transformer(config.model, src_tok.get_piece_size(), tgt_tok.get_piece_size())
        model.load_state_dict(payload["model"])
        chosen, why = precisions.resolve(decode_cfg.precision, device)
        model = for_decoding(model.to(device), decode_cfg, chosen)
        about = About(NAME, chosen, Path(path), reason, why)
        engine = cls(model, src_tok, tgt_tok, config.data.src_prefix, about)
        engine.config = config
        engine.known_words = known_words.known(known_words.listed(payload.get("source_words")))
        return engine

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def batch_size(self, decode_cfg: DecodeConfig) -> int:
        return decode_cfg.batch_size

    def search(
        self, sources: Sources, batches: Sequence[SearchBatch], decode_cfg: DecodeConfig
    ) -> Found:
        """Each batch searched as `decode_cfg` asks (search.py). Sampling draws from a
        generator seeded with `decode.seed` for each call."""
        generator = None
        if decode_cfg.sample:
            generator = torch.Generator(self.device).manual_seed(decode_cfg.seed)
        outputs: Found = [[] for _ in sources]
        with evaluating(self.model):
            for batch in batches:
                src = pad([sources[i] for i in batch.rows]).to(self.device)
                max_lens = torch.tensor(batch.most()).clamp(max=self.max_positions - 1)
                found = search(
                    self.model, src, max_lens, decode_cfg, generator, batch.never, batch.prefixes
                )
                for i, hypotheses in zip(batch.rows, found, strict=True):
                    outputs[i] = hypotheses
        return outputs

    def expected(self, sources: Sources, batches: Sequence[Forced]) -> list[list[float]]:
        """One teacher-forced pass a batch, each distinct source encoded once."""
        with evaluating(self.model):
            return [gain for batch in batches for gain in self._expected(sources, *batch)]

    @torch.inference_mode()
    def _expected(self, sources: Sources, rows, outputs, tokens) -> list[list[float]]:
        distinct = {i: n for n, i in enumerate(dict.fromkeys(rows))}
        where = torch.tensor([distinct[i] for i in rows], device=self.device)
        src = pad([sources[i] for i in distinct]).to(self.device)
        target = pad([np.asarray([*ids, EOS]) for ids in outputs]).to(self.device)
        given = torch.cat([torch.full_like(target[:, :1], BOS), target[:, :-1]], dim=1)
        mask = padding_mask(src)
        memory = self.model.encode(src, mask).index_select(0, where)
        mask = mask.index_select(0, where)
        logits, _ = self.model.decode(given, self.model.start_decoding(memory, mask))
        token = torch.tensor(list(tokens), device=self.device)[:, None, None]
        wanted = logits.gather(2, token.expand(-1, logits.size(1), 1)).float()
        gain = (wanted - logits.gather(2, target[:, :, None]).float())[:, :, 0].tolist()
        return [row[: len(ids) + 1] for row, ids in zip(gain, outputs, strict=True)]


@contextmanager
def evaluating(model: nn.Module):
    """`model` in eval mode for the block, then back in the mode it was in (the trainer
    validates with the model it trains)."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


def for_decoding(model: Transformer, decode_cfg: DecodeConfig, chosen: str = "fp32") -> Transformer:
    """`model` set up to decode and nothing else: eval mode, in the `chosen` precision
    (precision.py), and in fp32 on the CPU its linear layers through oneDNN (`decode.onednn`)."""
    model = precisions.apply(model.eval(), chosen)
    if chosen == "fp32" and next(model.parameters()).device.type == "cpu":
        use_onednn(model, decode_cfg.onednn)
    return model


# ---- decoding on x86 CPUs: the linear layers multiplied by oneDNN instead of MKL ----
# PyTorch's CPU `nn.Linear` calls MKL's sgemm, which takes its AVX2 path on AMD processors;
# oneDNN's kernels use AVX-512 where the CPU has it (docs/deploy.md#ctranslate2-export-and-engine).


def available() -> bool:
    """oneDNN's linear operator is built into this PyTorch and the CPU is x86-64."""
    return (
        platform.machine().lower() in ("x86_64", "amd64")
        and torch.backends.mkldnn.is_available()
        and hasattr(torch.ops.mkldnn, "_linear_pointwise")
    )


class OneDNNLinear(nn.Linear):
    """`nn.Linear` whose inference forward runs oneDNN's fp32 inner product: the same
    parameters, state dict and ties, only the kernel (results agree to rounding).

    Fewer than `min_rows` rows stay with MKL: oneDNN starts its threads for every product,
    and one sentence at a time on a busy CPU (16 clients of an unbatched server on 2 cores)
    served 38-39 requests/s through oneDNN against 50 through MKL."""

    min_rows = 8

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        fp32 = x.dtype == self.weight.dtype == torch.float32
        few_rows = x.numel() < self.min_rows * x.size(-1)
        if torch.is_grad_enabled() or not x.is_cpu or not fp32 or few_rows:
            return super().forward(x)
        return torch.ops.mkldnn._linear_pointwise(x, self.weight, self.bias, "none", [], "")


def use_onednn(model: nn.Module, enabled: bool = True) -> int:
    """Switch the linear layers of `model` in place to `OneDNNLinear` where oneDNN is
    available (or back to `nn.Linear` with enabled=False); returns how many it switched."""
    if enabled and not available():
        return 0
    old, new = (nn.Linear, OneDNNLinear) if enabled else (OneDNNLinear, nn.Linear)
    switched = 0
    for module in model.modules():
        if type(module) is old:
            module.__class__ = new
            switched += 1
    return switched
