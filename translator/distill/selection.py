"""Which of the teacher's n best translations of a train line the student learns from.

With one (`--nbest 1`) it is the teacher's best, as Kim & Rush's sequence-level distillation
takes it. With N > 1, `--select` picks one of the N by the line's human translation:

- `chrf`: the closest to it by sentence chrF, Kim & Rush's sequence-level interpolation,
  which mozilla's Firefox translation pipeline does too (its bestbleu step over an 8-best
  list). The student learns the teacher's kind of output, but the one that says what the
  human said. (It does not lengthen the targets: on Tatoeba the 5-best choices were 0.6 %
  shorter than the best.) chrF rather than sentence BLEU: on sentences of a dozen
  characters, sentence BLEU is zero or smoothed for most hypotheses, while chrF's character
  n-grams still rank them.
- `length`: the teacher's best that is at least as long as the human translation (in
  characters), else its longest. Only the reference's length is read, never its words: the
  wording stays the teacher's, its next choice where its best leaves something out. A
  teacher's beam writes shorter than people do (on Tatoeba 3.1 % fewer characters) and a
  student's greedy search shorter still; these targets are as long as the human ones.

Only train lines are scored against their references, so valid and test stay held out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from sacrebleu.metrics import CHRF

from translator.inference.hypothesis import Hypothesis
from translator.inference.text import Translator

Translate = Callable[[list[str], list[str]], list[str]]  # English, human Chinese → outputs
Pick = Callable[[Sequence[Hypothesis], str], str]  # n best, human Chinese → the target


def teacher_outputs(translator: Translator, nbest: int, select: str = "chrf") -> Translate:
    """The function that turns train lines (and their human translations) into targets."""
    if nbest <= 1:
        return lambda english, human: translator.translate(english, nbest=0)
    pick = SELECTIONS[select]()

    def pick_of_nbest(english: list[str], human: list[str]) -> list[str]:
        found = translator.translate(english, nbest=nbest)
        return [pick(hypotheses, ref) for hypotheses, ref in zip(found, human, strict=True)]

    return pick_of_nbest


def closest(hypotheses: Sequence[Hypothesis], reference: str, chrf: CHRF) -> str:
    """The text of the hypothesis with the highest chrF against `reference`; the first
    (the teacher's best) among equals, and "" when there is none."""
    best, best_score = "", -1.0
    for hypothesis in hypotheses:
        score = chrf.sentence_score(hypothesis.text, [reference]).score
        if score > best_score:
            best, best_score = hypothesis.text, score
    return best


def not_shorter(hypotheses: Sequence[Hypothesis], reference: str) -> str:
    """The text of the first hypothesis (in the teacher's order) with at least as many
    characters as `reference`, whitespace not counted; else of the longest, the first among
    equals; "" when there is none."""
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


SELECTIONS: dict[str, Callable[[], Pick]] = {  # --select: the rule each name makes
    "chrf": lambda: partial(closest, chrf=CHRF()),
    "length": lambda: not_shorter,
}
