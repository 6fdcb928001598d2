"""`Hypothesis`, one translation as every engine gives it, in a module of its own that
imports nothing heavy: `serve`'s HTTP process unpickles the decoding process's answers,
and must not import PyTorch to do it (a first request that did so took two seconds)."""

from __future__ import annotations

from typing import NamedTuple


class Hypothesis(NamedTuple):
    """One of a line's n best translations, and its score: the log-probability the search
    ranked it by (divided by the length penalty; summed over a line's sentences); `lost`:
    the protected spans of the source that it does not hold verbatim; `appended`: those
    the model did not write, that decode.span_guard put at the end of their sentence;
    `missed`: the glossary's Chinese for terms of the source that it does not hold."""

    text: str
    score: float
    lost: tuple[str, ...] = ()
    appended: tuple[str, ...] = ()
    missed: tuple[str, ...] = ()
