"""Diverse beam search (Vijayakumar et al., 2018, with one beam a group): each beam in
turn picks its candidates with the tokens the beams before it picked at this step
penalised by `strength`, so that the n best differ from each other more than beam
search's do. `decode.search = "diverse_beam"` with decode.beam beams."""

from __future__ import annotations

import torch

from translator.config import DecodeConfig
from translator.inference.search import Beams

STRENGTH = 0.5  # the penalty for a token an earlier beam picked at this step


class DiverseBeam:
    """A selection (search.py's `Selection`) that ends as beam search does."""

    ending, dtype, scoring, draws = Beams, torch.float32, True, False

    def __init__(self, beam: int, strength: float = STRENGTH):
        self.beam, self.strength = beam, strength

    def scored(self, logits: torch.Tensor) -> torch.Tensor:
        return logits.log_softmax(dim=-1)

    def candidates(self, scores, logp, alive):
        """Two candidates of each beam, the beams taken in turn, then all of them best
        first: 2K, as the loop takes them."""
        n, width, vocab = logp.shape
        total = scores[:, :, None] + logp
        if width == 1:  # the first step: one beam, its 2K best
            top, token = total[:, 0].topk(2 * self.beam, dim=1)
            return top, torch.zeros_like(token), token
        picked = torch.zeros(n, vocab, device=logp.device, dtype=total.dtype)
        tops, tokens = [], []
        for b in range(width):
            top, token = (total[:, b] - self.strength * picked).topk(2, dim=1)
            picked.scatter_add_(1, token[:, :1], torch.ones_like(top[:, :1]))
            tops.append(top)
            tokens.append(token)
        top, token = torch.cat(tops, dim=1), torch.cat(tokens, dim=1)
        origin = torch.arange(width, device=logp.device).repeat_interleave(2).expand(n, -1)
        top, order = top.sort(dim=1, descending=True, stable=True)
        return top, origin.gather(1, order), token.gather(1, order)


def diverse_beam(decode_cfg: DecodeConfig, generator: torch.Generator | None = None):
    """The search the registry builds for decode.search = "diverse_beam"."""
    return DiverseBeam(decode_cfg.beam)
