"""`translator eval --robustness`: the model on text as users type it. The test split's
distinct English sentences as they are, lowercased, UPPERCASED, Title Cased and without the
final `.`, `?` or `!` (the references stay: the same sentence typed another way has the
same translations), each scored as `eval` scores it, with its ratio to the original's BLEU;
and the entity suite (entities.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

from translator.evaluation import entities
from translator.evaluation.scoring import score
from translator.inference.text import Translator

_WORD_START = re.compile(r"(?:^|(?<=\s))([a-z])")
_FINAL_MARK_EN = re.compile(r"[.?!]+$")


def title_cased(text: str) -> str:
    """Each word's first letter upper-cased, the rest as written ("Tom's" stays)."""
    return _WORD_START.sub(lambda m: m.group(1).upper(), text)


def without_final_mark(text: str) -> str:
    return _FINAL_MARK_EN.sub("", text.rstrip()).rstrip()


VARIANTS: dict[str, Callable[[str], str]] = {  # name → how the English is typed
    "as it is": str,
    "lowercased": str.lower,
    "UPPERCASED": str.upper,
    "Title Cased": title_cased,
    "no final punctuation": without_final_mark,
}


@dataclass
class VariantScore:
    bleu: float
    chrf: float
    ratio: float | None  # this variant's BLEU ÷ the original's (None where that is 0)


@dataclass
class EntityScore:
    sentences: int
    spans: int
    kept: int
    by_kind: dict[str, tuple[int, int]]  # kind → (kept, spans)
    invented_digit_runs: int
    appended: int = 0  # of those kept, put at the end by decode.span_guard (not the model)

    @property
    def kept_share(self) -> float:
        return self.kept / self.spans if self.spans else 1.0

    @property
    def invented_per_1000(self) -> float:
        return 1000 * self.invented_digit_runs / self.sentences if self.sentences else 0.0


@dataclass
class Robustness:
    sentences: int  # distinct test sentences in each variant
    variants: dict[str, VariantScore]
    entities: EntityScore
    examples: list[dict] = field(default_factory=list)  # entity sentences that lost a span

    def to_dict(self) -> dict:
        out = asdict(self)
        out["entities"]["kept_share"] = self.entities.kept_share
        out["entities"]["invented_per_1000"] = self.entities.invented_per_1000
        return out


def variant_scores(
    translator: Translator, sources: Sequence[str], references: Sequence[Sequence[str]]
) -> dict[str, VariantScore]:
    """Each variant of the sources translated and scored; ratios to "as it is"."""
    results: dict[str, VariantScore] = {}
    for name, typed in VARIANTS.items():
        hypotheses = translator.translate([typed(s) for s in sources], split=False, nbest=0)
        scores = score(hypotheses, references)
        base = results["as it is"].bleu if results else scores.bleu
        ratio = scores.bleu / base if base else None
        results[name] = VariantScore(scores.bleu, scores.chrf, ratio)
    return results


def entity_score(
    translator: Translator, suite: Sequence[entities.EntitySentence]
) -> tuple[EntityScore, list[dict]]:
    """The suite translated and scored, and the sentences that lost a span."""
    appended = translator.counts["spans_appended"]
    outputs = translator.translate([s.text for s in suite], split=False, nbest=0)
    appended = translator.counts["spans_appended"] - appended
    by_kind = {kind: [0, 0] for kind in entities.KINDS}
    invented, lost_examples = 0, []
    for sentence, output in zip(suite, outputs, strict=True):
        found = entities.kept(output, sentence.spans)
        for span, ok in zip(sentence.spans, found, strict=True):
            by_kind[span.kind][0] += ok
            by_kind[span.kind][1] += 1
        invented += entities.invented_digit_runs(sentence.text, output)
        if not all(found):
            lost = [s.text for s, ok in zip(sentence.spans, found, strict=True) if not ok]
            lost_examples.append({"source": sentence.text, "output": output, "lost": lost})
    kept = sum(k for k, _ in by_kind.values())
    spans = sum(n for _, n in by_kind.values())
    kinds = {kind: (k, n) for kind, (k, n) in by_kind.items() if n}
    return EntityScore(len(suite), spans, kept, kinds, invented, appended), lost_examples


def robustness(
    translator: Translator,
    sources: Sequence[str],
    references: Sequence[Sequence[str]],
    entity_sentences: int = 500,
    seed: int = 1,
) -> Robustness:
    """Both parts for one model: the test split's variants and the entity suite."""
    variants = variant_scores(translator, sources, references)
    entity, lost = entity_score(translator, entities.suite(entity_sentences, seed))
    return Robustness(len(sources), variants, entity, lost)


def table(result: Robustness) -> list[str]:
    """The short table eval prints."""
    lines = [f"{'variant':<22} {'BLEU':>6} {'chrF':>6} {'ratio':>6}"]
    for name, v in result.variants.items():
        ratio = "-" if v.ratio is None else f"{v.ratio:.3f}"
        lines.append(f"{name:<22} {v.bleu:6.2f} {v.chrf:6.2f} {ratio:>6}")
    e = result.entities
    kinds = ", ".join(f"{kind} {k}/{n}" for kind, (k, n) in e.by_kind.items())
    lines.append(
        f"entities: {e.sentences:,} sentences, {e.kept:,} of {e.spans:,} spans kept verbatim "
        f"({e.kept_share:.1%}): {kinds}"
    )
    if e.appended:
        lines.append(f"of them put at the end by decode.span_guard: {e.appended:,}")
    lines.append(
        f"digit runs invented: {e.invented_digit_runs:,} "
        f"({e.invented_per_1000:.1f} per 1,000 sentences)"
    )
    return lines
