"""Search over the model's incremental decoder."""

from __future__ import annotations

import torch

from translator.data.tokenizer import BOS, EOS, PAD
from translator.model import Transformer

NEVER_OUTPUT = [PAD, BOS]  # ids the decoder may not produce


@torch.inference_mode()
def greedy(
    model: Transformer, src: torch.Tensor, src_mask: torch.Tensor, max_lens: torch.Tensor
) -> list[list[int]]:
    """Batched greedy decoding. src (B,S), src_mask (B,1,1,S), max_lens (B,) the most
    tokens each sentence may produce. Returns each sentence's ids without BOS/EOS.
    Stops as soon as every sentence has produced EOS or reached its limit; a finished
    sentence keeps being fed PAD until then."""
    batch = src.size(0)
    state = model.start_decoding(model.encode(src, src_mask), src_mask)
    tokens = torch.full((batch, 1), BOS, dtype=torch.long, device=src.device)
    finished = torch.zeros(batch, dtype=torch.bool, device=src.device)
    max_lens = max_lens.to(src.device)
    steps = []
    for step in range(int(max_lens.max())):
        logits, state = model.decode(tokens, state)
        scores = logits[:, -1]
        scores[:, NEVER_OUTPUT] = float("-inf")
        best = scores.argmax(dim=-1).masked_fill(finished, PAD)
        steps.append(best)
        finished |= (best == EOS) | (step + 1 >= max_lens)
        if bool(finished.all()):
            break
        tokens = best[:, None]
    rows = torch.stack(steps, dim=1).tolist() if steps else [[] for _ in range(batch)]
    return [_strip(row) for row in rows]


def _strip(ids: list[int]) -> list[int]:
    """Cut at the first EOS (or PAD) and drop it."""
    for i, token in enumerate(ids):
        if token in (EOS, PAD):
            return ids[:i]
    return ids
