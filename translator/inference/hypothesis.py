"""`Hypothesis`, one translation as every engine gives it, in a module of its own that
imports nothing heavy: `serve`'s HTTP process unpickles the decoding process's answers,
and must not import PyTorch to do it (a first request that did so took two seconds)."""

from __future__ import annotations

from typing import NamedTuple


class Hypothesis(NamedTuple):
    """One of a line's n best translations."""

    text: str
    score: float  # what the search ranked by, log P / length penalty (summed over sentences)
    lost: tuple[str, ...] = ()  # the source's protected spans it does not hold verbatim
    appended: tuple[str, ...] = ()  # spans decode.span_guard put at the end of their sentence
    missed: tuple[str, ...] = ()  # the glossary's Chinese for source terms it does not hold
