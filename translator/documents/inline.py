"""A document's units translated with their inline markup kept around the words it covers.

1. Each unit's text and, alone, the text of each of its formatted spans (a bold word, a
   link) are translated in one call, each distinct text once. A `kept` run inside a unit
   travels as a stand-in (`QZ-10`, a code the text path protects; on a model trained with
   placeholders, ⦅n⦆) and comes back as it was written.
2. Where a span's translation stands in its unit's translation, the formatting goes back
   around it. Units with a span not found are translated again with their spans'
   translations as glossary terms, which the search must write (terms.py).
3. A span still not found keeps its words and loses its formatting; a stand-in the model
   did not write puts its run at the unit's end. Both are counted (`Counts`).

`steps` is a generator: it yields each call's `Request` and is sent the translations, so
the CLI and the Python API (`run`) and the server (its batcher, asynchronously) drive the
same steps.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Generator, Hashable, Sequence
from dataclasses import dataclass, field

from translator.data.splitting import join, sentences
from translator.documents.document import Run, Unit

_WORDY = re.compile(r"\w")
_CONTENT = re.compile(r"[^\W\d_]{4,}|\d")
_EDGES = " \t\r\n.,;:!?。，；：！？、…"  # stripped from a span's translation alone
MAX_SPANS = 64  # a unit's formatted spans placed (the work is its length times these)
_PREFIXES = ("QZ", "ZQ", "QX", "XQ", "ZX")


@dataclass(frozen=True)
class Request:
    """One call: texts to translate, with glossary terms the search must write (the
    user's glossary laid over them)."""

    texts: list[str]
    terms: dict[str, str] = field(default_factory=dict)


@dataclass
class Counts:
    units: int = 0  # translated
    spans: int = 0  # inline formatted spans translated
    retried: int = 0  # sentences translated again with a span's translation as a term
    spans_near: int = 0  # placed around most of their words' characters, not all
    spans_unplaced: int = 0  # whose formatting was dropped: the words kept, not where they went
    kept_moved: int = 0  # kept runs (code, placeholders) put at their unit's end


@dataclass
class Piece:
    """A unit ready to translate: its text with stand-ins, what stands around it, its
    formatted spans, and what each stand-in stands for."""

    source: str
    base: Hashable  # the mark of its plain text (the one most of its characters have)
    spans: list[tuple[str, Hashable]]  # (text, mark)
    kept: dict[str, Run]  # stand-in → run
    head: Unit  # runs before its words (kept, blank, the blank its words begin with)
    tail: Unit
    sentences: list[str] = field(default_factory=list)  # of `source`, as translated


def steps(
    units: Sequence[Unit], counts: Counts, split: bool = True
) -> Generator[Request, list[str], list[Unit]]:
    """Each unit translated (a unit without a letter or digit as it is), sentence by
    sentence where `split` (decode.split): a span retried costs its sentence, not its unit."""
    pieces = {i: piece(unit) for i, unit in enumerate(units) if wordy(unit)}
    for p in pieces.values():  # a span over sentences: a span in each
        p.sentences = sentences(p.source) if split else [p.source]
        p.spans = [(part, m) for text, m in p.spans for part in within(text, p.sentences)]
        counts.spans_unplaced += max(len(p.spans) - MAX_SPANS, 0)  # beyond: words kept
        p.spans = p.spans[:MAX_SPANS]
    counts.units += len(pieces)
    counts.spans += sum(len(p.spans) for p in pieces.values())
    alone = unique([text for p in pieces.values() for text, _ in p.spans])
    first = unique([s for p in pieces.values() for s in p.sentences])
    found = dict(zip(first + alone, (yield Request(first + alone)), strict=True))
    spans = {text: found[text].strip(_EDGES) or found[text] for text in alone}
    done = {i: [found[s] for s in p.sentences] for i, p in pieces.items()}
    again = {i: retried_sentences(p, done[i], spans) for i, p in pieces.items()}
    again = {i: where for i, where in again.items() if where}
    if again:
        texts = unique([pieces[i].sentences[j] for i, where in again.items() for j in where])
        terms = {text: spans[text] for i in again for text in missing(pieces[i], done[i], spans)}
        counts.retried += len(texts)
        retried = dict(zip(texts, (yield Request(texts, terms)), strict=True))
        for i, where in again.items():
            sources = pieces[i].sentences
            new = [retried[sources[j]] if j in where else t for j, t in enumerate(done[i])]
            before = missing(pieces[i], done[i], spans)
            if len(missing(pieces[i], new, spans)) < len(before):
                done[i] = new
    out = [list(unit) for unit in units]
    for i, p in pieces.items():
        out[i] = rebuilt(p, done[i], spans, counts)
    return out


def run(
    units: Sequence[Unit],
    translate: Callable[[Request], list[str]],
    counts: Counts,
    split: bool = True,
):
    """`steps` driven by `translate` (one call a Request)."""
    walk = steps(units, counts, split)
    request = next(walk)
    while True:
        try:
            request = walk.send(translate(request))
        except StopIteration as end:
            return end.value


def wordy(unit: Unit) -> bool:
    """Whether a unit has words to translate (a letter or digit outside its kept runs)."""
    return any(not run.kept and _WORDY.search(run.text) for run in unit)


def unique(texts: list[str]) -> list[str]:
    return list(dict.fromkeys(texts))


def piece(unit: Unit) -> Piece:
    """A unit as it is translated: kept and blank runs at its ends set aside, the rest joined
    with a stand-in for each kept run, its spans those of a mark other than the base."""
    start, end = 0, len(unit)
    while start < end and (unit[start].kept or not unit[start].text.strip()):
        start += 1
    while end > start and (unit[end - 1].kept or not unit[end - 1].text.strip()):
        end -= 1
    body = unit[start:end]
    weight: Counter[Hashable] = Counter()
    for run in body:
        if not run.kept:
            weight[run.mark] += len(run.text)
    base = weight.most_common(1)[0][0]
    prefix = stand_in_prefix("".join(run.text for run in unit))
    parts, kept, spans = [], {}, []
    group: list[Run] = []
    for run in [*body, Run("", base)]:
        if group and (run.kept or run.mark != group[0].mark):
            spans += span_of(group, base)
            group = []
        if run.kept:
            token = f"{prefix}-{10 + len(kept)}"
            kept[token] = run
            parts.append(f" {token} ")
        else:
            group.append(run)
            parts.append(run.text)
    source = re.sub(r"\s+", " ", "".join(parts)).strip()
    first, last = body[0].text, body[-1].text
    lead = [Run(first[: len(first) - len(first.lstrip())], body[0].mark)]
    trail = [Run(last[len(last.rstrip()) :], body[-1].mark)]
    head = list(unit[:start]) + [r for r in lead if r.text]
    return Piece(source, base, spans, kept, head, [r for r in trail if r.text] + list(unit[end:]))


def span_of(group: list[Run], base: Hashable) -> list[tuple[str, Hashable]]:
    """A run of one mark as a span: none where it is the base's or has no words."""
    text = " ".join("".join(run.text for run in group).split())
    return [(text, group[0].mark)] if group[0].mark != base and _WORDY.search(text) else []


def stand_in_prefix(text: str) -> str:
    """Letters no stand-in of this unit can be mistaken for."""
    upper = text.upper()
    return next((p for p in _PREFIXES if p not in upper), "QZQ")


def within(text: str, sentences_: list[str]) -> list[str]:
    """A span's text as spans each in one sentence: itself where a sentence holds it."""
    if len(sentences_) < 2 or any(text in sentence for sentence in sentences_):
        return [text]
    return [part for part in sentences(text) if _WORDY.search(part)] or [text]


def places(
    piece: Piece, written: str, spans: dict[str, str], taken: list[tuple[int, int, int]]
) -> list[tuple[int, int, int]]:
    """`taken` and where each other span's translation stands in `written`: (start, end, the
    span's index), the longest first, none overlapping; a span not found has none."""
    taken = list(taken)
    done = {k for _, _, k in taken}
    order = sorted(range(len(piece.spans)), key=lambda k: -len(spans[piece.spans[k][0]]))
    for k in (k for k in order if k not in done):
        target, at = spans[piece.spans[k][0]], 0
        while target and (at := written.find(target, at)) >= 0:
            end = at + len(target)
            if not any(s < end and at < e for s, e, _ in taken):
                taken.append((at, end, k))
                break
            at += 1
    return taken


def near(written: str, target: str, taken: list[tuple[int, int, int]]) -> tuple[int, int] | None:
    """Where `written` holds most of `target`'s characters within a stretch of its length,
    outside `taken` (more than half of them): a span whose translation in its sentence reads
    a little differently alone. None where no stretch does. One pass (a sliding window)."""
    size = len(target)
    if not size or len(written) < size:
        return None
    hit = [ch in target for ch in written]
    for start, end, _ in taken:
        hit[start:end] = [False] * (end - start)
    count, best, where = sum(hit[:size]), size // 2, None
    for start in range(len(written) - size + 1):
        if start:
            count += hit[start + size - 1] - hit[start - 1]
        if count > best:
            first = hit.index(True, start)
            last = start + size - 1 - hit[start : start + size][::-1].index(True)
            best, where = count, (first, last + 1)
    return where


def placements(
    piece: Piece, parts: list[str], spans: dict[str, str], fallback: bool = False
) -> tuple[str, list[tuple[int, int, int]], int]:
    """A unit's translation (`parts`, of its sentences) joined, where each span goes in it,
    and how many went only near their words. A span that is a whole sentence takes that
    sentence's translation; another where its translation stands (`places`), else `near`,
    else (with `fallback`) its sentence's free stretch."""
    written, ranges = joined([tight(part, piece.kept) for part in parts])
    placed = places(piece, written, spans, [(*ranges[j], k) for k, j in whole(piece)])
    exact = len(placed)
    for k, (text, _) in enumerate(piece.spans):
        if k in {k for _, _, k in placed}:
            continue
        found = near(written, spans[text], placed)
        if found is None and fallback and (within_ := sentence_of(text, piece.sentences, ranges)):
            found = free_stretch(written, within_, placed)
        if found:
            placed.append((*found, k))
    return written, placed, len(placed) - exact


def whole(piece: Piece) -> list[tuple[int, int]]:
    """The spans that are a whole sentence: (the span's index, the sentence's), each
    sentence taken once."""
    free: dict[str, list[int]] = {}
    for j, sentence in enumerate(piece.sentences):
        free.setdefault(sentence, []).append(j)
    return [(k, free[text].pop(0)) for k, (text, _) in enumerate(piece.spans) if free.get(text)]


def missing(piece: Piece, parts: list[str], spans: dict[str, str]) -> list[str]:
    """The spans of `piece` that its translation `parts` has no place for and that a glossary
    term may ask for: a translation alone to ask for, and a word of four letters or a digit
    (a function word alone, "my" or "Do", translates too loosely to be forced into a
    sentence)."""
    placed = {k for _, _, k in placements(piece, parts, spans)[1]}
    texts = [text for k, (text, _) in enumerate(piece.spans) if k not in placed]
    return [text for text in texts if spans[text] and _CONTENT.search(text)]


def retried_sentences(piece: Piece, parts: list[str], spans: dict[str, str]) -> set[int]:
    """The sentences to translate again for the spans their translation `parts` lacks: those
    that hold one (all of the unit's, for a span across sentences)."""
    where: set[int] = set()
    for text in missing(piece, parts, spans):
        holding = {j for j, sentence in enumerate(piece.sentences) if text in sentence}
        where |= holding or set(range(len(piece.sentences)))
    return where


def rebuilt(piece: Piece, parts: list[str], spans: dict[str, str], counts: Counts) -> Unit:
    """A unit's translation (`parts`, of its sentences) as runs: the base's mark, each
    span's around its words (`placements`, its sentence's translation at worst, so that a
    link keeps its target), each kept run where its stand-in is (or at the end), the runs
    set aside at its ends."""
    written, placed, approximate = placements(piece, parts, spans, fallback=True)
    counts.spans_near += approximate
    counts.spans_unplaced += len(piece.spans) - len(placed)
    marks: list[Hashable] = [piece.base] * len(written)
    for start, end, k in placed:
        marks[start:end] = [piece.spans[k][1]] * (end - start)
    cuts: dict[int, tuple[int, Run]] = {}
    moved = []
    for token, run in piece.kept.items():
        at = written.find(token)
        if at < 0:
            moved.append(run)
        else:
            cuts[at] = (at + len(token), run)
    counts.kept_moved += len(moved)
    return list(piece.head) + cut_runs(written, marks, cuts) + moved + piece.tail


def tight(text: str, kept: dict[str, Run]) -> str:
    """No blank between a stand-in and the Chinese beside it."""
    for token in kept:
        text = re.sub(rf"(?<=[^\x00-\x7f]) ?{token} ?(?=[^\x00-\x7f]|$)", token, text)
        text = re.sub(rf"^ ?{token} ?(?=[^\x00-\x7f])", token, text)
    return text


def joined(parts: list[str]) -> tuple[str, list[tuple[int, int]]]:
    """`parts` joined as `join` joins sentences, and where each stands in the result."""
    text, ranges = "", []
    for part in parts:
        longer = join([text, part])
        ranges.append((len(longer) - len(part), len(longer)))
        text = longer
    return text, ranges


def sentence_of(
    text: str, sources: list[str], ranges: list[tuple[int, int]]
) -> tuple[int, int] | None:
    """Where the translation of the sentence holding span `text` stands (None where no one
    sentence holds it)."""
    return next((r for s, r in zip(sources, ranges, strict=True) if text in s), None)


def free_stretch(
    written: str, within: tuple[int, int], taken: list[tuple[int, int, int]]
) -> tuple[int, int] | None:
    """The longest stretch of `within` no placement takes, its edge marks and blanks left
    out; None where none is left."""
    best: tuple[int, int] | None = None
    start = None
    for i in range(within[0], within[1] + 1):
        free = i < within[1] and not any(s <= i < e for s, e, _ in taken)
        if free and start is None:
            start = i
        elif not free and start is not None:
            if best is None or i - start > best[1] - best[0]:
                best = (start, i)
            start = None
    if best is None:
        return None
    start, end = best
    while start < end and written[start] in _EDGES:
        start += 1
    while end > start and written[end - 1] in _EDGES:
        end -= 1
    return (start, end) if start < end else None


def cut_runs(written: str, marks: list[Hashable], cuts: dict[int, tuple[int, Run]]) -> Unit:
    """`written` as runs of one mark each, a kept run where a cut (its stand-in) starts."""
    runs: Unit = []
    i = text_start = 0
    while i <= len(written):
        cut = cuts.get(i)
        if i == len(written) or cut or (i > text_start and marks[i] != marks[text_start]):
            if i > text_start:
                runs.append(Run(written[text_start:i], marks[text_start]))
            if cut:
                runs.append(cut[1])
                i = text_start = cut[0]
                continue
            text_start = i
        i += 1
    return runs
