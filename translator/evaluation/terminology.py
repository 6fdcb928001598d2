"""`translator eval --glossary FILE`: how well a model keeps a glossary, measured on the same
sentences with the glossary and without it (the measures: docs/translating.md#glossaries).
Term use is WMT 2021's exact-match accuracy: of the occurrences of an entry's English in
the sources (as translate finds them), the share whose Chinese the translation holds, a
term found twice needing its Chinese twice.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from translator.data import spans
from translator.data.glossary import Glossary
from translator.evaluation.scoring import score
from translator.inference.terms import missing_terms


@dataclass
class Side:
    """The figures of one set of translations (with the glossary, or without it)."""

    bleu: float  # every sentence
    chrf: float
    term_bleu: float  # the sentences that hold a term
    term_chrf: float
    terms_used: int  # occurrences whose Chinese the translation holds
    unasked: int  # the glossary's Chinese written beyond what the sources ask for
    duplicated: int  # of those, a term the source holds, written more often than it does
    overridden_bleu: float  # the sentences where the glossary overrides the model
    overridden_chrf: float

    def term_use(self, occurrences: int) -> float:
        return self.terms_used / occurrences if occurrences else 1.0


@dataclass
class TermScores:
    glossary: str  # where the entries came from
    entries: int
    sentences: int
    term_sentences: int  # sentences holding at least one term
    occurrences: int  # term occurrences in the sources
    overridden: int  # sentences with a term the translation without the glossary misses
    without: Side
    with_glossary: Side

    def to_dict(self) -> dict:
        out = asdict(self)
        out["term_use_without"] = self.without.term_use(self.occurrences)
        out["term_use_with"] = self.with_glossary.term_use(self.occurrences)
        return out


def source_terms(glossary: Glossary, sources: Sequence[str]) -> list[list[str]]:
    """The Chinese of each source's entries (one per occurrence), as translate finds them."""
    return [[m.chinese for m in glossary.find(s, spans.ranges(s))] for s in sources]


def written(glossary_chinese: set[str], longest: int, text: str) -> Counter[str]:
    """The glossary's Chinese in `text`, the longest at each place, none overlapping."""
    found: Counter[str] = Counter()
    at = 0
    while at < len(text):
        for size in range(min(longest, len(text) - at), 0, -1):
            if text[at : at + size] in glossary_chinese:
                found[text[at : at + size]] += 1
                at += size
                break
        else:
            at += 1
    return found


def subset_scores(hypotheses, references, rows: Sequence[int]) -> tuple[float, float]:
    """BLEU and chrF of the sentences `rows` (NaN where there are none)."""
    if not rows:
        return float("nan"), float("nan")
    found = score([hypotheses[i] for i in rows], [references[i] for i in rows])
    return found.bleu, found.chrf


def side(
    hypotheses: Sequence[str],
    references: Sequence[Sequence[str]],
    terms: Sequence[Sequence[str]],
    chinese: set[str],
    overridden: Sequence[int],
) -> Side:
    """One set of translations' figures."""
    everything = score(hypotheses, references)
    holding = [i for i, t in enumerate(terms) if t]
    term_bleu, term_chrf = subset_scores(hypotheses, references, holding)
    used = sum(len(t) - len(missing_terms(t, h)) for t, h in zip(terms, hypotheses, strict=True))
    longest = max(map(len, chinese), default=0)
    beyond = [
        written(chinese, longest, h) - Counter(t) for t, h in zip(terms, hypotheses, strict=True)
    ]
    unasked = sum(sum(extra.values()) for extra in beyond)
    duplicated = sum(extra[c] for extra, t in zip(beyond, terms, strict=True) for c in set(t))
    return Side(
        everything.bleu, everything.chrf, term_bleu, term_chrf, used, unasked, duplicated,
        *subset_scores(hypotheses, references, overridden),
    )  # fmt: skip


def term_scores(
    glossary: Glossary,
    sources: Sequence[str],
    references: Sequence[Sequence[str]],
    without: Sequence[str],
    with_glossary: Sequence[str],
) -> TermScores:
    """Both sets of translations of `sources` scored against `references` and `glossary`."""
    terms = source_terms(glossary, sources)
    chinese = set(glossary.entries.values())
    overridden = [
        i for i, (t, h) in enumerate(zip(terms, without, strict=True)) if missing_terms(t, h)
    ]
    return TermScores(
        glossary=glossary.origin,
        entries=len(glossary),
        sentences=len(sources),
        term_sentences=sum(1 for t in terms if t),
        occurrences=sum(map(len, terms)),
        overridden=len(overridden),
        without=side(without, references, terms, chinese, overridden),
        with_glossary=side(with_glossary, references, terms, chinese, overridden),
    )


def table(result: TermScores) -> list[str]:
    """The lines eval prints."""
    n = result.occurrences
    a, b = result.without, result.with_glossary
    return [
        f"glossary: {result.glossary}, {result.entries:,} entries; {result.term_sentences:,} of "
        f"{result.sentences:,} sentences hold a term ({n:,} occurrences)",
        f"{'':34} {'without':>8} {'with':>8}",
        f"{'term use':34} {a.term_use(n):8.1%} {b.term_use(n):8.1%}",
        f"{'BLEU, sentences with a term':34} {a.term_bleu:8.2f} {b.term_bleu:8.2f}",
        f"{'chrF, sentences with a term':34} {a.term_chrf:8.2f} {b.term_chrf:8.2f}",
        f"{'BLEU, all sentences':34} {a.bleu:8.2f} {b.bleu:8.2f}",
        f"{'chrF, all sentences':34} {a.chrf:8.2f} {b.chrf:8.2f}",
        f"{f'BLEU, {result.overridden:,} sentences overridden':34} "
        f"{a.overridden_bleu:8.2f} {b.overridden_bleu:8.2f}",
        f"{f'chrF, {result.overridden:,} sentences overridden':34} "
        f"{a.overridden_chrf:8.2f} {b.overridden_chrf:8.2f}",
        f"{'terms written the source lacks':34} {a.unasked:8,} {b.unasked:8,}",
        f"{'terms written more often than asked':34} {a.duplicated:8,} {b.duplicated:8,}",
    ]
