"""Plain, in-memory versions of what the library streams or batches, for the tests to compare
it against: pairs encoded into lists and batched at once, the split as a Series of names,
greedy search without its scores. (A corpus read whole is scripts/common.read_pairs.)"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from translator.corpus.split import SPLIT_NAMES, plan_split, sentence_keys
from translator.data.batching import Batch, collate_padded, pad, plan_batches
from translator.data.tokenizer import Tokenizer, encode
from translator.inference.search import Greedy, beam_search
from translator.model.transformer import Transformer


def encode_pairs(
    src_lines: Sequence[str],
    tgt_lines: Sequence[str],
    src_tok: Tokenizer,
    tgt_tok: Tokenizer,
    max_len: int,
) -> tuple[list[np.ndarray], list[np.ndarray], int]:
    """Encode parallel lines; pairs with a side longer than `max_len` ids (EOS included, and
    BOS on the target side) are dropped. Returns (src, tgt, number dropped)."""
    src, tgt = encode(src_lines, src_tok), encode(tgt_lines, tgt_tok)
    keep = [i for i in range(len(src)) if len(src[i]) <= max_len and len(tgt[i]) < max_len]
    return [src[i] for i in keep], [tgt[i] for i in keep], len(src) - len(keep)


def collate(src: Sequence[np.ndarray], tgt: Sequence[np.ndarray]) -> Batch:
    """A batch from in-memory sequences that end in EOS."""
    return collate_padded(pad(src).numpy(), pad(tgt).numpy())


def make_batches(
    src: Sequence[np.ndarray], tgt: Sequence[np.ndarray], max_tokens: int
) -> list[Batch]:
    """Batches of in-memory sequences (EOS included), all collated now."""
    lens = [np.array([len(s) for s in seqs], dtype=np.int64) for seqs in (src, tgt)]
    groups = plan_batches(*lens, max_tokens)
    return [collate([src[i] for i in g], [tgt[i] for i in g]) for g in groups]


@dataclass
class Split:
    names: pd.Series  # "train" / "valid" / "test" per pair, ordered as the files are written
    groups: int  # connected groups of pairs
    largest_group: int  # pairs in the largest one
    kept_in_train: int  # groups too large for any held-out split


def split_pairs(en: pd.Series, zh: pd.Series, valid_size: int, test_size: int, seed: int) -> Split:
    """`plan_split` on the keys of the sentences, as split names indexed like `en`."""
    plan = plan_split(sentence_keys(en), sentence_keys(zh), valid_size, test_size, seed)
    names = np.array(SPLIT_NAMES, dtype=object)[plan.split[plan.order]]
    result = pd.Series(names, index=en.index[plan.order])
    return Split(result, plan.groups, plan.largest_group, plan.kept_in_train)


def greedy(
    model: Transformer, src: torch.Tensor, src_mask: torch.Tensor, max_lens: torch.Tensor
) -> list[list[int]]:
    """Greedy search's ids, each sentence's most probable token at each step."""
    return [found[0][0] for found in beam_search(model, src, src_mask, max_lens, Greedy())]
