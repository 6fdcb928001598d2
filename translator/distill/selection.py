"""Which of the teacher's n best translations of a train line the student learns from: its
best, or with N > 1 its best at least as long as the human translation (only the length is
read, never the words). A beam writes shorter than people do, a student's greedy search
shorter still; these targets are as long as the human ones (docs/studies.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from translator.inference.hypothesis import Hypothesis
from translator.inference.text import Translator

Translate = Callable[[list[str], list[str]], list[str]]  # English, human Chinese → outputs


def teacher_outputs(translator: Translator, nbest: int) -> Translate:
    """The function that turns train lines (and their human translations) into targets."""
    if nbest <= 1:
        return lambda english, human: translator.translate(english, nbest=0)

    def pick_of_nbest(english: list[str], human: list[str]) -> list[str]:
        found = translator.translate(english, nbest=nbest)
        return [not_shorter(hypotheses, ref) for hypotheses, ref in zip(found, human, strict=True)]

    return pick_of_nbest


def not_shorter(hypotheses: Sequence[Hypothesis], reference: str) -> str:
    """The first hypothesis with at least as many characters as `reference` (whitespace not
    counted), else the first longest; "" when there is none."""
    wanted = _length(reference)
    longest, longest_length = "", -1
    for hypothesis in hypotheses:
        length = _length(hypothesis.text)
        if length >= wanted:
            return hypothesis.text
        if length > longest_length:
            longest, longest_length = hypothesis.text, length
    return longest


def _length(text: str) -> int:
    return len("".join(text.split()))
