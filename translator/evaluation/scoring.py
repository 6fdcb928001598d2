"""Scoring with sacrebleu: BLEU with the Chinese tokenizer (tokenize="zh") and chrF, against
one or several references per sentence.

Each source sentence is scored once against all its references: one sacrebleu stream per
reference, padded with None (`nrefs:var`). Scoring each (sentence, reference) pair as a
segment would count one hypothesis several times and penalise it against every translation
it did not happen to match. The score against the first reference alone is kept too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from sacrebleu.metrics import BLEU, CHRF

from translator.data.lines import read_lines
from translator.errors import UserError


@dataclass
class Scores:
    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str
    sentences: int  # source sentences scored, each once
    references: int  # reference translations, all sentences together
    bleu_1ref: float  # against each sentence's first reference only
    chrf_1ref: float
    bleu_1ref_signature: str

    def to_dict(self) -> dict:
        return asdict(self)


def reference_streams(references: Sequence[Sequence[str]]) -> list[list[str | None]]:
    """Per-sentence reference lists → sacrebleu's reference streams, padded with None."""
    width = max(len(refs) for refs in references)
    return [[refs[i] if i < len(refs) else None for refs in references] for i in range(width)]


def _bleu_chrf(hyps: list[str], streams: list[list[str | None]]) -> tuple[float, float, str, str]:
    """BLEU, chrF and their signatures (read after scoring: they name the reference count)."""
    bleu, chrf = BLEU(tokenize="zh"), CHRF()
    bleu_score, chrf_score = bleu.corpus_score(hyps, streams), chrf.corpus_score(hyps, streams)
    return bleu_score.score, chrf_score.score, str(bleu.get_signature()), str(chrf.get_signature())


def score(hypotheses: Sequence[str], references: Sequence[Sequence[str]]) -> Scores:
    """BLEU and chrF of one hypothesis per sentence against that sentence's references."""
    if len(hypotheses) != len(references):
        raise UserError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    if not references:
        raise UserError("nothing to score: no reference sentences")
    if any(len(refs) == 0 for refs in references):
        raise UserError("every sentence needs at least one reference")
    hyps, streams = list(hypotheses), reference_streams(references)
    every_ref = _bleu_chrf(hyps, streams)
    first_ref = _bleu_chrf(hyps, streams[:1])[:3]  # BLEU, chrF and BLEU's signature
    return Scores(*every_ref, len(hyps), sum(len(refs) for refs in references), *first_ref)


def read_eval_set(src: Path, refs: Sequence[Path]) -> tuple[list[str], list[list[str]]]:
    """A source file and reference files line-aligned with it → the sentences and each
    one's references; a blank reference line means that sentence has one fewer."""
    sources = read_lines(src)
    columns = []
    for ref in refs:
        lines = read_lines(ref)
        if len(lines) != len(sources):
            raise UserError(f"{src} has {len(sources)} lines but {ref} has {len(lines)}")
        columns.append(lines)
    return sources, [[r for r in refs if r.strip()] for refs in zip(*columns, strict=True)]


def score_files(hypotheses: Path, refs: Sequence[Path]) -> Scores:
    """`translator eval --hyp`: a hypothesis file scored against reference files."""
    return score(*read_eval_set(hypotheses, refs))
