"""Which of the teacher's n best translations of a train line the student learns from.

With one (`--nbest 1`) it is the teacher's best, as Kim & Rush's sequence-level distillation
takes it. With N > 1 it is the one of the N closest to the line's human translation by
sentence chrF: Kim & Rush's sequence-level interpolation, which mozilla's Firefox
translation pipeline does too (its bestbleu step over an 8-best list). The student then
learns the teacher's kind of output, but the one that says what the human said. (It does not
lengthen the targets: on Tatoeba the 5-best choices were 0.6 % shorter than the best.)

Only train lines are scored against their references, so valid and test stay held out.
chrF rather than sentence BLEU: on sentences of a dozen characters, sentence BLEU is zero or
smoothed for most hypotheses, while chrF's character n-grams still rank them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sacrebleu.metrics import CHRF

from translator.inference.text import Hypothesis, TextTranslator

Translate = Callable[[list[str], list[str]], list[str]]  # English, human Chinese → outputs


def teacher_outputs(translator: TextTranslator, nbest: int) -> Translate:
    """The function that turns train lines (and their human translations) into targets."""
    if nbest <= 1:
        return lambda english, human: translator.translate(english, nbest=0)
    chrf = CHRF()

    def closest_of_nbest(english: list[str], human: list[str]) -> list[str]:
        found = translator.translate(english, nbest=nbest)
        return [
            closest(hypotheses, ref, chrf) for hypotheses, ref in zip(found, human, strict=True)
        ]

    return closest_of_nbest


def closest(hypotheses: Sequence[Hypothesis], reference: str, chrf: CHRF) -> str:
    """The text of the hypothesis with the highest chrF against `reference`; the first
    (the teacher's best) among equals, and "" when there is none."""
    best, best_score = "", -1.0
    for hypothesis in hypotheses:
        score = chrf.sentence_score(hypothesis.text, [reference]).score
        if score > best_score:
            best, best_score = hypothesis.text, score
    return best
