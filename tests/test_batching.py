import random

import numpy as np
import torch
from reference import collate, make_batches

from translator.data.batching import collate_padded, epoch_order, plan_batches
from translator.data.ids import Ids
from translator.data.tokenizer import BOS, EOS, PAD


def test_token_budget_respected_and_every_example_once():
    rng = random.Random(0)
    src = [rng.randint(1, 40) for _ in range(1000)]
    tgt = [rng.randint(1, 40) for _ in range(1000)]
    batches = plan_batches(np.array(src), np.array(tgt), max_tokens=256)
    flat = [i for batch in batches for i in batch]
    assert sorted(flat) == list(range(1000))
    for batch in batches:
        assert len(batch) * max(max(src[i], tgt[i]) for i in batch) <= 256
    assert len(batches) < 1000 / 4  # they are really batched, not one example each


def test_example_longer_than_budget_gets_its_own_batch():
    batches = [b.tolist() for b in plan_batches(np.array([5, 100, 6]), np.array([5, 90, 6]), 50)]
    assert [1] in batches and sorted(i for b in batches for i in b) == [0, 1, 2]


def greedy_batches(src, tgt, max_tokens):
    """The plain loop the vectorised planner must agree with, example by example."""
    order = sorted(range(len(src)), key=lambda i: (tgt[i], src[i]))
    batches, current, longest = [], [], 0
    for i in order:
        length = max(src[i], tgt[i])
        if current and max(longest, length) * (len(current) + 1) > max_tokens:
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, length)
    return batches + ([current] if current else [])


def test_vectorised_plan_equals_the_greedy_loop():
    rng = np.random.default_rng(0)
    cases = ((1, 5, 8), (500, 40, 256), (3000, 120, 1024), (200, 300, 100), (300, 70_000, 10**5))
    for n, high, budget in cases:  # the last: lengths past 16 bits
        src, tgt = rng.integers(1, high, n), rng.integers(1, high, n)
        planned = [b.tolist() for b in plan_batches(src, tgt, budget)]
        assert planned == greedy_batches(src.tolist(), tgt.tolist(), budget)


def test_batches_collated_from_flat_ids_equal_batches_of_sequences():
    rng = np.random.default_rng(1)
    seqs = [rng.integers(4, 50, rng.integers(1, 9)).astype(np.int32) for _ in range(40)]
    tokens = np.concatenate(seqs).astype(np.uint16)
    offsets = np.concatenate([[0], np.cumsum([len(s) for s in seqs])])
    ids = Ids(tokens, offsets)
    rows = np.array([3, 17, 0, 39, 8])
    with_eos = [np.append(seqs[i], EOS) for i in rows]
    reversed_eos = [np.append(seqs[i][::-1], EOS) for i in rows]
    expected = collate(with_eos, reversed_eos)
    flipped = Ids(np.concatenate([s[::-1] for s in seqs]).astype(np.uint16), offsets)
    got = collate_padded(ids.padded(rows), flipped.padded(rows))
    for name in ("src", "tgt_in", "tgt_out", "src_mask"):
        assert torch.equal(getattr(got, name), getattr(expected, name)), name
    assert got.n_tokens == expected.n_tokens


def test_batches_are_length_sorted_and_shuffled_per_epoch():
    seqs = [np.arange(4, 4 + n, dtype=np.int32) for n in range(1, 60)]
    batches = make_batches(seqs, seqs, max_tokens=64)
    widths = [b.tgt_out.size(1) for b in batches]
    assert widths == sorted(widths)

    def shuffled(seed, epoch):
        return [batches[i] for i in epoch_order(len(batches), seed, epoch)]

    epoch0 = [b.tgt_out.size(1) for b in shuffled(seed=1, epoch=0)]
    epoch1 = [b.tgt_out.size(1) for b in shuffled(seed=1, epoch=1)]
    assert sorted(epoch0) == sorted(widths) and epoch0 != epoch1
    assert epoch0 == [b.tgt_out.size(1) for b in shuffled(seed=1, epoch=0)]


def test_collate_pads_shifts_and_masks():
    src = [np.array([5, 6, EOS], dtype=np.int32), np.array([7, EOS], dtype=np.int32)]
    tgt = [np.array([8, EOS], dtype=np.int32), np.array([9, 10, 11, EOS], dtype=np.int32)]
    batch = collate(src, tgt)
    assert batch.src.tolist() == [[5, 6, EOS], [7, EOS, PAD]]
    assert batch.tgt_in.tolist() == [[BOS, 8, PAD, PAD], [BOS, 9, 10, 11]]
    assert batch.tgt_out.tolist() == [[8, EOS, PAD, PAD], [9, 10, 11, EOS]]
    assert batch.src_mask.shape == (2, 1, 1, 3)
    assert batch.src_mask[:, 0, 0].tolist() == [[True, True, True], [True, True, False]]
    assert batch.n_tokens == 6 == int((batch.tgt_out != PAD).sum())
    assert batch.src.dtype == torch.long
