"""How a model is made to keep a glossary: the mechanisms measured side by side on one
model and one terminology test (docs/studies.md#glossaries-the-mechanism).

    # the terminology tests (scripts/term_test.py), valid to choose on, test to report
    python scripts/term_test.py --data data/prepared/tatoeba-3k-ph3 --split valid \\
        --out terms.valid.tsv
    python scripts/term_test.py --data data/prepared/tatoeba-3k-ph3 --out terms.test.tsv
    # each mechanism on a trained model (its config's decoding: beam 5, the guards)
    python scripts/study_glossary.py measure -c configs/tatoeba-cpu.toml \\
        --checkpoint runs/tatoeba-cpu/checkpoints/average5.pt --glossary terms.test.tsv
    # inline annotations: a copy of the prepared directory whose train pairs carry their
    # dictionary terms, then a model trained on it and measured with --annotated
    python scripts/study_glossary.py annotate --data data/prepared/tatoeba-3k-ph3 \\
        --out data/prepared/tatoeba-3k-ph3-annotated
    translator train -c configs/tatoeba-cpu.toml --max-minutes 20 \\
        --set data.dir=data/prepared/tatoeba-3k-ph3-annotated \\
        --set train.run_dir=runs/study-annotated
    translator average runs/study-annotated --last 5
    python scripts/study_glossary.py measure -c configs/tatoeba-cpu.toml \\
        --set data.dir=data/prepared/tatoeba-3k-ph3-annotated \\
        --checkpoint runs/study-annotated/checkpoints/average5.pt --glossary terms.test.tsv \\
        --annotated

The rows (each the same sentences, scored as `eval --glossary` scores them):

    none          no glossary
    n-best 8      beam 8, its 8 best: the one holding the most terms (the best of those)
    placeholders  each term as ⦅n⦆, its Chinese put in its place (decode.glossary_mode;
                  a model trained with placeholders)
    search        constrained beam search at the config's beam: (missing) the default,
                  searched again with constraints only where the plain translation misses
                  a term; (all) every sentence holding a term searched with them; with
                  --beams, greedy decoding whose term sentences take that many beams
    ctranslate2   the CTranslate2 export, term insertion
    annotations   (--annotated) each term followed by ⦅t⦆ its Chinese ⦅/t⦆ in the source,
                  as the model was trained; and the same with the search on top

Speed is not measured here (the rows run one after another in one process, which favours
the later ones): scripts/bench_glossary.py measures what a glossary costs, each way in a
fresh process.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
from common import cedict_lines, load_config, noun_terms

from translator.data.glossary import Glossary
from translator.data.layout import read_references, split_file
from translator.data.spans import PLACEHOLDERS, ranges
from translator.data.tokenizer import Sample, train_tokenizer
from translator.evaluation.terminology import side, source_terms
from translator.inference.text import missing_terms

TAGS = ("⦅t⦆", "⦅/t⦆")  # an inline annotation: "the GPU ⦅t⦆ 显卡 ⦅/t⦆"


def annotated(text: str, glossary: Glossary) -> str:
    """`text` with each of `glossary`'s terms followed by its Chinese between the tags."""
    out, last = [], 0
    for match in glossary.find(text, ranges(text)):
        out += [text[last : match.end], f" {TAGS[0]} {match.chinese} {TAGS[1]}"]
        last = match.end
    return "".join(out) + text[last:]


def annotate(data: Path, out: Path, share: float, seed: int) -> dict:
    """A copy of `data` whose train pairs (a `share` of those with a dictionary noun whose
    Chinese is in their target) carry each such term annotated; the English tokenizer
    trained again with the tags as pieces, every split encoded again."""
    from translator.data.ids import encode_splits

    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(data, out)
    terms = noun_terms(cedict_lines())
    finder = Glossary({english: english for english in terms})
    english_file, chinese_file = split_file(out, "train", "en"), split_file(out, "train", "zh")
    english = english_file.read_text(encoding="utf-8").splitlines()
    chinese = chinese_file.read_text(encoding="utf-8").splitlines()
    rng = np.random.default_rng(seed)
    holding = marked = 0
    for i, (source, target) in enumerate(zip(english, chinese, strict=True)):
        found = {}
        for match in finder.find(source, ranges(source)):
            held = [c for c in sorted(terms[match.chinese], key=len, reverse=True) if c in target]
            if held:
                found[match.chinese] = held[0]
        if found:
            holding += 1
            if rng.random() < share:
                english[i] = annotated(source, Glossary(found))
                marked += 1
    english_file.write_text("".join(line + "\n" for line in english), encoding="utf-8")
    size = train_tokenizer(
        english_file, out / "spm.en", 3000, 1.0, "data.src_vocab_size",
        sample=Sample(), symbols=(*PLACEHOLDERS, *TAGS),
    )  # fmt: skip
    encode_splits(out, 2)
    return {"train pairs": len(english), "with a term": holding, "annotated": marked,
            "English vocabulary": size}  # fmt: skip


def most_terms(engine, sources: Sequence[str], glossary: Glossary) -> list[str]:
    """Of the 8 best of a beam of 8, the hypothesis holding the most of its source's terms
    (the best-scoring of those)."""
    found = engine.translate(sources, split=False, beam=8, nbest=8)
    best = []
    for hypotheses, terms in zip(found, source_terms(glossary, sources), strict=True):
        chosen = min(hypotheses, key=lambda h: len(missing_terms(terms, h.text)), default=None)
        best.append(chosen.text if chosen else "")
    return best


def measure(args: argparse.Namespace) -> tuple[list[dict], int]:
    """Each row's figures (scored as `eval --glossary` scores), and the term occurrences."""
    import torch

    from translator.inference.torch_engine import Translator

    config = load_config(args.config, args.set or [])
    sources, references = read_references(config.data.dir, args.split)
    glossary = Glossary.load(args.glossary)
    terms = source_terms(glossary, sources)
    chinese = set(glossary.entries.values())
    decode = replace(config.decode, precision="fp32")  # the figures of studies.md
    engine = Translator.from_checkpoint(args.checkpoint, torch.device("cpu"), decode)
    rows: list[dict] = []

    def row(name: str, translate) -> None:
        figures = side(translate(), references, terms, chinese)
        rows.append({"row": name, **figures.__dict__})
        print(json.dumps(rows[-1], ensure_ascii=False), flush=True)

    def plain(translator, lines=sources, **options):
        return translator.translate(lines, split=False, nbest=0, **options)

    row("none", lambda: plain(engine))
    if args.annotated:
        marked = [annotated(s, glossary) for s in sources]
        row("annotations", lambda: plain(engine, marked))
        row("annotations + search", lambda: plain(engine, marked, glossary=glossary))
        return rows, sum(map(len, terms))
    row("n-best 8, most terms", lambda: most_terms(engine, sources, glossary))
    if engine.placeholders:
        placeholders = engine.with_decode(glossary_mode="placeholders")
        row("placeholders", lambda: plain(placeholders, glossary=glossary))
    beam = engine.decode_cfg.beam
    for search in ("missing", "all"):
        searched = engine.with_decode(glossary_search=search)
        row(f"search ({search}), beam {beam}", lambda e=searched: plain(e, glossary=glossary))
    if args.beams:
        row("greedy, none", lambda: plain(engine.with_decode(beam=1)))
    for beams in args.beams:
        for search in ("missing", "all"):
            greedy = engine.with_decode(beam=1, glossary_beam=beams, glossary_search=search)
            label = f"greedy, search ({search}) with {beams} beams"
            row(label, lambda g=greedy: plain(g, glossary=glossary))
    if args.ct2:
        from translator.deploy.export import export
        from translator.inference.ct2_engine import CTranslate2Translator

        with tempfile.TemporaryDirectory() as tmp:
            exported = export(args.checkpoint, Path(tmp) / "ct2")
            theirs = CTranslate2Translator.from_dir(exported, decode)
            row("ctranslate2, none", lambda: plain(theirs))
            row("ctranslate2, term insertion", lambda: plain(theirs, glossary=glossary))
    return rows, sum(map(len, terms))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    a = commands.add_parser("annotate", help="a prepared directory with annotated train pairs")
    a.add_argument("--data", required=True, type=Path)
    a.add_argument("--out", required=True, type=Path)
    a.add_argument("--share", type=float, default=0.5, help="of the pairs with a term")
    a.add_argument("--seed", type=int, default=1)
    m = commands.add_parser("measure", help="each mechanism on one model")
    m.add_argument("-c", "--config", required=True)
    m.add_argument("--set", action="append", help="a config override, as translator's --set")
    m.add_argument("--checkpoint", required=True, type=Path)
    m.add_argument("--glossary", required=True, type=Path)
    m.add_argument("--split", default="test", choices=("test", "valid"))
    m.add_argument("--annotated", action="store_true", help="the model was trained annotated")
    m.add_argument("--beams", type=lambda t: [int(b) for b in t.split(",")], default=[],
                   help="greedy decoding with these glossary beams, e.g. 2,3,4,5")  # fmt: skip
    m.add_argument("--ct2", action="store_true", help="also the CTranslate2 export")
    args = parser.parse_args(argv)
    if args.command == "annotate":
        print(json.dumps(annotate(args.data, args.out, args.share, args.seed)))
        return 0
    rows, occurrences = measure(args)
    print(f"\n{'row':44} {'term use':>8} {'term BLEU':>9} {'BLEU':>6} {'unasked':>7}")
    for r in rows:
        print(
            f"{r['row']:44} {r['terms_used'] / max(occurrences, 1):8.1%} {r['term_bleu']:9.2f} "
            f"{r['bleu']:6.2f} {r['unasked']:7,}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
