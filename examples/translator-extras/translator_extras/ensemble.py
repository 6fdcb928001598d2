"""An ensemble of checkpoints as one engine: `decode.engine = "ensemble"` with
`decode.model_dir` a directory of checkpoints (e.g. the epochs of one run, or runs with
other seeds). Each step the members' log-probabilities are averaged in probability
space, as fairseq's `EnsembleModel` does; every search, the glossary and the text path
work as with one model, since the ensemble is a model like ours to them."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from translator.config import Config
from translator.errors import UserError
from translator.inference.engine import About
from translator.inference.torch_engine import TorchEngine
from translator.runtime import pick_device


class Ensemble(nn.Module):
    """Models with one vocabulary, decoded as one: what search.py asks of a model
    (`project`, `encode`, `start_decoding`, `decode`)."""

    def __init__(self, members: list[nn.Module]):
        super().__init__()
        self.members = nn.ModuleList(members)
        self.project = members[0].project  # its out_features: the vocabulary
        self.model_cfg = members[0].model_cfg

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """Every member's memory, side by side on the last axis (B,S,n×D)."""
        return torch.cat([m.encode(src, src_mask) for m in self.members], dim=-1)

    def start_decoding(self, memory: torch.Tensor, src_mask: torch.Tensor, beams: int = 1):
        parts = memory.chunk(len(self.members), dim=-1)
        return States(
            [m.start_decoding(p, src_mask, beams) for m, p in zip(self.members, parts, strict=True)]
        )

    def decode(self, tgt: torch.Tensor, state: States):
        """The members' mean probability, as log-probabilities (B,T,V)."""
        found = [m.decode(tgt, s) for m, s in zip(self.members, state.members, strict=True)]
        logp = torch.stack([logits.float().log_softmax(dim=-1) for logits, _ in found])
        mean = logp.logsumexp(dim=0) - math.log(len(found))
        return mean, States([s for _, s in found])


@dataclass
class States:
    """Each member's decoder state, reordered together."""

    members: list

    def reorder(self, rows, sentences=None, beams: int = 0) -> States:
        return States([s.reorder(rows, sentences, beams) for s in self.members])


class EnsembleEngine(TorchEngine):
    """Every checkpoint of `decode.model_dir`, decoded as one model by our search."""

    reads_dir = True  # decode.model_dir: the directory of checkpoints
    auto_rank = None  # only when named

    @classmethod
    def auto(cls, checkpoint: Path) -> tuple[str | None, str]:
        return None, "an ensemble is only used when named"

    @classmethod
    def open(cls, config: Config, checkpoint: Path, model_dir: str, reason: str):
        paths = sorted(Path(model_dir).glob("*.pt"))
        if not paths:
            raise UserError(f"decode.model_dir {model_dir}: no checkpoint (*.pt) to ensemble")
        device = pick_device(config.train.device)
        members = [TorchEngine.from_checkpoint(p, device, config.decode) for p in paths]
        first = members[0]
        for path, member in zip(paths, members, strict=True):
            if member.tgt_tok.get_piece_size() != first.tgt_tok.get_piece_size():
                raise UserError(f"{path} has another vocabulary than {paths[0]}")
        precision = first.about.precision
        why = f"{len(paths)} checkpoints; {first.about.precision_reason}"
        about = About("ensemble", precision, Path(model_dir), reason, why)
        engine = cls(Ensemble([m.model for m in members]), first.src_tok, first.tgt_tok,
                     first.src_prefix, about)  # fmt: skip
        engine.known_words = first.known_words
        return engine
