import random

import numpy as np
import torch

from translator.data.batching import collate, make_batches, shuffled, token_batches
from translator.data.tokenizer import BOS, EOS, PAD


def test_token_budget_respected_and_every_example_once():
    rng = random.Random(0)
    src = [rng.randint(1, 40) for _ in range(1000)]
    tgt = [rng.randint(1, 40) for _ in range(1000)]
    batches = token_batches(src, tgt, max_tokens=256)
    flat = [i for batch in batches for i in batch]
    assert sorted(flat) == list(range(1000))
    for batch in batches:
        assert len(batch) * max(max(src[i], tgt[i]) for i in batch) <= 256
    assert len(batches) < 1000 / 4  # they are really batched, not one example each


def test_example_longer_than_budget_gets_its_own_batch():
    batches = token_batches([5, 100, 6], [5, 90, 6], max_tokens=50)
    assert [1] in batches and sorted(i for b in batches for i in b) == [0, 1, 2]


def test_batches_are_length_sorted_and_shuffled_per_epoch():
    seqs = [np.arange(4, 4 + n, dtype=np.int32) for n in range(1, 60)]
    batches = make_batches(seqs, seqs, max_tokens=64)
    widths = [b.tgt_out.size(1) for b in batches]
    assert widths == sorted(widths)
    epoch0 = [b.tgt_out.size(1) for b in shuffled(batches, seed=1, epoch=0)]
    epoch1 = [b.tgt_out.size(1) for b in shuffled(batches, seed=1, epoch=1)]
    assert sorted(epoch0) == sorted(widths) and epoch0 != epoch1
    assert epoch0 == [b.tgt_out.size(1) for b in shuffled(batches, seed=1, epoch=0)]


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
