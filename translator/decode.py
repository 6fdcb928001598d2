"""Search over the model's incremental decoder: greedy and beam search, both batched.

Both take a batch of sources (B,S) with its mask and each sentence's output limit, and
return each sentence's ids without BOS/EOS. A sentence that is finished leaves the batch:
the decoder state is reordered to the rows still being decoded, so finished sentences cost
nothing more.
"""

from __future__ import annotations

import torch

from translator.data.tokenizer import BOS, EOS, PAD
from translator.model import DecoderState, Transformer

NEVER_OUTPUT = [PAD, BOS]  # ids the decoder may not produce


def _next_log_probs(model: Transformer, tokens: torch.Tensor, state: DecoderState):
    logits, state = model.decode(tokens, state)
    logp = logits[:, -1].float().log_softmax(dim=-1)
    logp[:, NEVER_OUTPUT] = float("-inf")
    return logp, state


def _start(model: Transformer, src: torch.Tensor, src_mask: torch.Tensor) -> DecoderState:
    return model.start_decoding(model.encode(src, src_mask), src_mask)


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
        logp, state = _next_log_probs(model, tokens, state)
        best = logp.argmax(dim=-1)
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
            state, best = state.reorder(index), best[index]
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
    score / lp(limit) (alpha ≥ 0). After `limit` tokens only EOS is allowed, as greedy
    search writes at most `limit` tokens. With beam 1 this is exactly greedy search."""
    if alpha < 0:
        raise ValueError("the length penalty alpha must be >= 0")
    batch, k, device = src.size(0), beam, src.device
    state = _start(model, src, src_mask).reorder(
        torch.arange(batch, device=device).repeat_interleave(k)
    )
    limits = max_lens.to(device)
    scores = torch.full((batch, k), float("-inf"), device=device)
    scores[:, 0] = 0.0  # all beams start identical: let only the first one expand
    history = torch.empty(batch * k, 0, dtype=torch.long, device=device)
    tokens = torch.full((batch * k, 1), BOS, dtype=torch.long, device=device)
    alive = torch.arange(batch, device=device)  # which sentence each group of k rows is
    best: list[tuple[float, list[int]]] = [(float("-inf"), []) for _ in range(batch)]
    finished = [0] * batch
    for step in range(int(limits.max()) + 1 if batch else 0):
        logp, state = _next_log_probs(model, tokens, state)
        n, vocab = alive.numel(), logp.size(-1)
        logp = logp.view(n, k, vocab)
        at_limit = step >= limits[alive]  # `limit` tokens written: only EOS may follow
        logp[at_limit, :, :EOS] = float("-inf")
        logp[at_limit, :, EOS + 1 :] = float("-inf")
        top, flat = (scores[:, :, None] + logp).view(n, k * vocab).topk(2 * k, dim=1)
        origin, token = flat // vocab, flat % vocab
        is_eos = token == EOS

        ends = (is_eos[:, :k] & (top[:, :k] > float("-inf"))).nonzero().tolist()
        for i, j in ends:
            sentence = int(alive[i])
            if finished[sentence] >= k:
                continue
            finished[sentence] += 1
            hyp = history[i * k + int(origin[i, j])].tolist()
            score = float(top[i, j]) / length_penalty(len(hyp) + 1, alpha)
            if score > best[sentence][0]:
                best[sentence] = (score, hyp)

        # the k best candidates that do not end in EOS continue (stable sort keeps rank)
        rank = torch.sort(is_eos.to(torch.int8), dim=1, stable=True).indices[:, :k]
        scores = top.gather(1, rank)
        origin, token = origin.gather(1, rank), token.gather(1, rank)
        bound = scores.max(dim=1).values / length_penalty(limits[alive], alpha)
        best_done = torch.tensor([best[int(s)][0] for s in alive], device=device)
        count = torch.tensor([finished[int(s)] for s in alive], device=device)
        keep = ((count < k) & ~(best_done >= bound) & ~at_limit).nonzero().squeeze(1)
        if keep.numel() == 0:
            break
        rows = (keep[:, None] * k + origin[keep]).flatten()
        history = torch.cat([history[rows], token[keep].reshape(-1, 1)], dim=1)
        state = state.reorder(rows)
        scores, alive = scores[keep], alive[keep]
        tokens = token[keep].reshape(-1, 1)
    return [hyp for _, hyp in best]
