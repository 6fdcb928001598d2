"""What `decode.no_repeat_ngram` does to quality: BLEU and the number of outputs that repeat
a 3-gram of target pieces, for each guard size, on a prepared test split (all its
references) and on WMT newstest2021 (refA and refB).

    python scripts/studies/repetition.py runs/tatoeba-cpu/checkpoints/average5.pt \\
        --data data/prepared/tatoeba-3k-ph3 --beam 5 --sizes 0 2 3 4

Prints one markdown table row a guard size (0: off).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from translator.data.layout import read_references
from translator.evaluation.scoring import read_eval_set, score
from translator.inference.text import Translator
from translator.model.rundir import checkpoint_in

# scripts/common.py, the helpers every script shares, loaded by its path: Python puts the
# study's own folder first on the module path, not scripts/ (docs/architecture.md#the-scripts)
_spec = importlib.util.spec_from_file_location("common", Path(__file__).parents[1] / "common.py")
common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(common)


def repeats_a_trigram(pieces: list[str]) -> bool:
    grams = [tuple(pieces[i : i + 3]) for i in range(len(pieces) - 2)]
    return len(grams) != len(set(grams))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--data", type=Path, required=True, help="a prepared directory")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--sizes", type=int, nargs="+", default=[0, 2, 3, 4])
    args = parser.parse_args()
    sets = {"test split": read_references(args.data, "test")}
    news = common.WMT / "newstest2021.en-zh.en"
    if news.is_file():
        refs = [
            common.WMT / "newstest2021.en-zh.refA.zh",
            common.WMT / "newstest2021.en-zh.refB.zh",
        ]
        sets["newstest2021"] = read_eval_set(news, refs)
    base = Translator.from_checkpoint(
        checkpoint_in(args.checkpoint), "cpu", beam=args.beam, engine="torch"
    )
    header = " | ".join(f"{name} BLEU | {name} repeated 3-gram" for name in sets)
    print(f"beam {args.beam}\n\n| no_repeat_ngram | {header} |")
    print("| --- |" + " --- | --- |" * len(sets))
    for size in args.sizes:
        translator = base.with_decode(no_repeat_ngram=size, split=False)
        cells = []
        for sources, references in sets.values():
            hypotheses = translator.translate(sources)
            looping = sum(
                repeats_a_trigram(translator.tgt_tok.encode_as_pieces(h)) for h in hypotheses
            )
            cells.append(f"{score(hypotheses, references).bleu:.2f} | {looping} / {len(sources)}")
        print(f"| {size or 'off'} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
