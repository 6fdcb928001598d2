"""The repetition guard: fairseq's `no_repeat_ngram_size`, OpenNMT-py's `block_ngram_repeat`
and CTranslate2's `no_repeat_ngram_size` — a token that would complete an n-gram the
hypothesis already contains may not be chosen. Small models trained on short sentences
loop ("我 很 喜欢 我 很 喜欢 …"); this stops the loop at its second pass."""

from __future__ import annotations

import torch


def block_repeats(logits: torch.Tensor, history: torch.Tensor, n: int) -> None:
    """Set to -inf, in place, each row's logits (R,V) of the tokens that would repeat an
    n-gram of that row's `history` (R,T) of written tokens. One pass over all rows: the
    n-grams whose first n-1 tokens equal the row's last n-1 name the tokens to block."""
    if n <= 0 or history.size(1) < n:
        return
    windows = history.unfold(1, n, 1)  # (R, T-n+1, n): every n-gram written so far
    recent = history[:, history.size(1) - n + 1 :]  # (R, n-1)
    match = (windows[:, :, :-1] == recent[:, None, :]).all(dim=-1)  # (R, T-n+1)
    hits = torch.zeros_like(logits).scatter_add_(1, windows[:, :, -1], match.to(logits.dtype))
    logits.masked_fill_(hits > 0, float("-inf"))
