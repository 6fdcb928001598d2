"""Search over the model's incremental decoder: greedy and beam search, both batched.

Both take a batch of sources (B,S) with its mask and each sentence's output limit, and
return each sentence's ids without BOS/EOS. A sentence that is finished leaves the batch:
the decoder state is reordered to the rows still being decoded, so finished sentences cost
nothing more.
"""

from __future__ import annotations

import torch

from translator.data.tokenizer import BOS, EOS, PAD, UNK
from translator.model.transformer import DecoderState, Transformer

NEVER_OUTPUT = [PAD, UNK, BOS]  # ids the decoder may not produce (UNK would print " ⁇ ")


def _next_logits(model: Transformer, tokens: torch.Tensor, state: DecoderState):
    """Logits (B,V) for the next position, and the advanced state."""
    logits, state = model.decode(tokens, state)
    return logits[:, -1].float(), state


def _vocab_size(model: Transformer) -> int:
    return model.project.out_features


def _start(model: Transformer, src: torch.Tensor, src_mask: torch.Tensor, beams: int = 1):
    return model.start_decoding(model.encode(src, src_mask), src_mask, beams)


@torch.inference_mode()
def greedy(
    model: Transformer, src: torch.Tensor, src_mask: torch.Tensor, max_lens: torch.Tensor
) -> list[list[int]]:
    """Pick the most probable token at each step until EOS or the sentence's limit."""
    batch = src.size(0)
    state = _start(model, src, src_mask)
    limits = max_lens.tolist()
    outputs: list[list[int]] = [[] for _ in range(batch)]
    alive = list(range(batch))  # which sentence each row of the state belongs to
    tokens = torch.full((batch, 1), BOS, dtype=torch.long, device=src.device)
    for step in range(max(limits, default=0)):
        logits, state = _next_logits(model, tokens, state)
        logits[:, NEVER_OUTPUT] = float("-inf")
        best = logits.argmax(dim=-1)
        keep = []
        for row, (sentence, token) in enumerate(zip(alive, best.tolist(), strict=True)):
            if token != EOS:
                outputs[sentence].append(token)
            if token != EOS and step + 1 < limits[sentence]:
                keep.append(row)
        if not keep:
            break
        if len(keep) < len(alive):
            index = torch.tensor(keep, device=src.device)
            state, best = state.reorder(index, index), best[index]
            alive = [alive[row] for row in keep]
        tokens = best[:, None]
    return outputs


def length_penalty(length: int | torch.Tensor, alpha: float):
    """GNMT's lp(Y) = ((5 + |Y|) / 6) ** alpha; a hypothesis scores log P(Y) / lp(Y)."""
    return ((5 + length) / 6) ** alpha


@torch.inference_mode()
def beam_search(
    model: Transformer,
    src: torch.Tensor,
    src_mask: torch.Tensor,
    max_lens: torch.Tensor,
    beam: int,
    alpha: float = 0.6,
) -> list[list[int]]:
    """Beam search over sentences × beams in one batch, with GNMT length penalty `alpha`.

    Each step extends every live beam by every token and keeps the 2K best candidates per
    sentence: those ending in EOS among the first K are finished hypotheses (kept, scored
    with the length penalty), the K best others continue. A sentence is done when it has K
    finished hypotheses, or when no live beam can beat its best finished one any more: a
    live beam's log-probability only falls, so it can score at most
    score / lp(limit + 1) (alpha ≥ 0). After `limit` tokens only EOS is allowed, as greedy
    search writes at most `limit` tokens. With beam 1 this is exactly greedy search."""
    if alpha < 0:
        raise ValueError("the length penalty alpha must be >= 0")
    batch, k, device = src.size(0), beam, src.device
    # all beams start identical: the first step runs one row per sentence where the
    # vocabulary has 2k candidates to offer, and the k best then become the beams
    width = 1 if _vocab_size(model) >= 2 * k else k
    state = _start(model, src, src_mask, beams=width)
    limits = max_lens.to(device)
    scores = torch.full((batch, width), float("-inf"), device=device)
    scores[:, 0] = 0.0  # with width k: let only the first of the identical beams expand
    history = torch.empty(batch * width, 0, dtype=torch.long, device=device)
    tokens = torch.full((batch * width, 1), BOS, dtype=torch.long, device=device)
    alive = torch.arange(batch, device=device)  # which sentence each group of rows is
    best_score = torch.full((batch,), float("-inf"), device=device)  # of finished hypotheses
    finished = torch.zeros(batch, dtype=torch.long, device=device)  # how many per sentence
    best: list[list[int]] = [[] for _ in range(batch)]
    for step in range(int(limits.max()) + 1 if batch else 0):
        logits, state = _next_logits(model, tokens, state)
        logp = logits.log_softmax(dim=-1)  # then mask, as fairseq does: no renormalising
        logp[:, NEVER_OUTPUT] = float("-inf")
        n, vocab = alive.numel(), logp.size(-1)
        logp = logp.view(n, width, vocab)
        at_limit = step >= limits[alive]  # `limit` tokens written: only EOS may follow
        logp[at_limit, :, :EOS] = float("-inf")
        logp[at_limit, :, EOS + 1 :] = float("-inf")
        top, flat = (scores[:, :, None] + logp).view(n, width * vocab).topk(2 * k, dim=1)
        origin, token = flat // vocab, flat % vocab
        is_eos = token == EOS

        # finished hypotheses: EOS among the first k candidates, up to k per sentence
        ends = is_eos[:, :k] & (top[:, :k] > float("-inf"))
        ends &= ends.cumsum(dim=1) + finished[alive, None] <= k
        if ends.any():
            score = top[:, :k] / length_penalty(step + 1, alpha)  # all have step+1 tokens
            score = score.masked_fill(~ends, float("-inf"))
            top_score, column = score.max(dim=1)
            better = (top_score > best_score[alive]).nonzero().squeeze(1)
            for i, j in zip(better.tolist(), column[better].tolist(), strict=True):
                best[int(alive[i])] = history[i * width + int(origin[i, j])].tolist()
            best_score[alive[better]] = top_score[better]
            finished[alive] += ends.sum(dim=1)

        # the k best candidates that do not end in EOS continue (stable sort keeps rank)
        rank = torch.sort(is_eos.to(torch.int8), dim=1, stable=True).indices[:, :k]
        scores = top.gather(1, rank)
        origin, token = origin.gather(1, rank), token.gather(1, rank)
        # the longest a live hypothesis can get: `limit` tokens and EOS
        bound = scores.max(dim=1).values / length_penalty(limits[alive] + 1, alpha)
        done = (finished[alive] >= k) | (best_score[alive] >= bound) | at_limit
        keep = (~done).nonzero().squeeze(1)
        if keep.numel() == 0:
            break
        rows = (keep[:, None] * width + origin[keep]).flatten()
        history = torch.cat([history[rows], token[keep].reshape(-1, 1)], dim=1)
        state = state.reorder(rows, keep if keep.numel() < n else None, beams=k)
        scores, alive, width = scores[keep], alive[keep], k
        tokens = token[keep].reshape(-1, 1)
    return best
