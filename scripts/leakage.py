"""How much of a prepared split's held-out data is really held out: for valid and test, the
references that appear verbatim as training targets, the English sentences found in train
(exactly, and after folding case and punctuation), and the BLEU of a lookup baseline that
copies the Chinese of the training pair whose English shares the most words with each
held-out sentence (Jaccard overlap of lower-cased word types). A leaking split lets the
lookup score high on the leaked sentences; on a sound split it has nothing to copy.

    python scripts/leakage.py data/prepared/tatoeba-3k-ph3
    python scripts/leakage.py OLD_DIR NEW_DIR            # side by side

BLEU is sacrebleu's (tokenize="zh"), each distinct English sentence against all its
references, and against the first one only (1 ref, also on the leaked and clean parts).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pandas as pd
import torch

from translator.corpus.split import loose_form
from translator.data.layout import group_references, read_split
from translator.evaluation.scoring import score

WORD = re.compile(r"\w+")


def word_sets(sentences: list[str]) -> list[set[str]]:
    return [set(WORD.findall(s.lower())) for s in sentences]


def incidence(sets: list[set[str]], vocab: dict[str, int]) -> torch.Tensor:
    """Sparse (sentences × vocabulary) 0/1 matrix of which words each sentence has."""
    rows = [i for i, words in enumerate(sets) for w in words if w in vocab]
    cols = [vocab[w] for words in sets for w in words if w in vocab]
    values = torch.ones(len(rows))
    shape = (len(sets), len(vocab))
    return torch.sparse_coo_tensor([rows, cols], values, shape, check_invariants=False).coalesce()


def lookup(train_en: list[str], train_zh: list[str], queries: list[str]) -> list[str]:
    """For each query, the Chinese of the training pair with the highest Jaccard word
    overlap (ties: the first such pair)."""
    train_sets, query_sets = word_sets(train_en), word_sets(queries)
    vocab = {w: i for i, w in enumerate(sorted(set().union(*train_sets)))}
    train = incidence(train_sets, vocab)
    train_sizes = torch.tensor([len(s) for s in train_sets], dtype=torch.float32)
    found = []
    for start in range(0, len(queries), 256):
        chunk = query_sets[start : start + 256]
        shared = torch.sparse.mm(train, incidence(chunk, vocab).to_dense().T).T  # (Q, N)
        sizes = torch.tensor([len(s) for s in chunk], dtype=torch.float32)[:, None]
        jaccard = shared / (sizes + train_sizes[None, :] - shared).clamp(min=1)
        found += [train_zh[i] for i in jaccard.argmax(dim=1).tolist()]
    return found


def report(data_dir: Path) -> None:
    train_en, train_zh = read_split(data_dir, "train")
    train_targets, train_sources = set(train_zh), set(train_en)
    train_loose = set(loose_form(pd.Series(train_en, dtype=object)))
    print(f"{data_dir}: {len(train_en):,} training pairs")
    for split in ("valid", "test"):
        en, zh = read_split(data_dir, split)
        sources, references = group_references(en, zh)
        leaked_refs = sum(z in train_targets for z in zh)
        exact = sum(s in train_sources for s in sources)
        loose = sum(s in train_loose for s in loose_form(pd.Series(sources, dtype=object)))
        print(
            f"  {split}: {len(zh):,} references of {len(sources):,} English sentences; "
            f"references found verbatim among training targets: {leaked_refs:,} "
            f"({leaked_refs / len(zh):.1%}); English found in train: {exact:,} exactly, "
            f"{loose:,} ignoring case and punctuation"
        )
        hyps = lookup(train_en, train_zh, sources)
        scores = score(hyps, references)
        leaked = [any(r in train_targets for r in refs) for refs in references]
        parts = []
        for name, keep in (("leaked", leaked), ("clean", [not x for x in leaked])):
            if any(keep):
                part = score(
                    [h for h, k in zip(hyps, keep, strict=True) if k],
                    [r[:1] for r, k in zip(references, keep, strict=True) if k],
                )
                parts.append(f"{part.bleu:.1f} on the {sum(keep):,} {name}")
        print(
            f"    lookup baseline: BLEU {scores.bleu:.1f} (all references), "
            f"{scores.bleu_1ref:.1f} (1 ref: {', '.join(parts)})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_dirs", nargs="+", type=Path, help="prepared data directories")
    for data_dir in parser.parse_args().data_dirs:
        if not (data_dir / "train.en").is_file():
            print(
                f"error: {data_dir} holds no prepared split (train.en); "
                "run `translator prepare` for it first",
                file=sys.stderr,
            )
            sys.exit(2)
        report(data_dir)


if __name__ == "__main__":
    main()
