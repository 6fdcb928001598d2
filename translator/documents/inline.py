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

import bisect
import re
from collections import Counter
from collections.abc import Callable, Generator, Hashable, Sequence
from dataclasses import dataclass, field

from translator.data.glossary import key
from translator.data.splitting import join, sentences
from translator.documents.document import Run, Unit

_WORDY = re.compile(r"\w")
_CONTENT = re.compile(r"[^\W\d_]{4,}|\d")
_EDGES = " \t\r\n.,;:!?。，；：！？、…"  # stripped from a span's translation alone
MAX_SPANS = 64  # a sentence's formatted spans placed (the work: its length times these)
_PREFIXES = ("QZ", "ZQ", "QX", "XQ", "ZX")


Placed = tuple[int, int, int]  # a span's place in a translation: start, end, its index


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
    prefix: str = "QZ"  # of its stand-ins: QZ-10, QZ-11, …
    owners: list[int | None] = field(default_factory=list)  # each span's sentence


def steps(
    units: Sequence[Unit], counts: Counts, split: bool = True
) -> Generator[Request, list[str], list[Unit]]:
    """Each unit translated (a unit without a letter or digit as it is), sentence by
    sentence where `split` (decode.split): a span retried costs its sentence, not its unit."""
    pieces = {i: piece(unit) for i, unit in enumerate(units) if wordy(unit)}
    for p in pieces.values():
        p.sentences = sentences(p.source) if split else [p.source]
        dropped = assign(p)
        counts.spans += dropped  # their words translated, their formatting dropped
        counts.spans_unplaced += dropped
    counts.units += len(pieces)
    counts.spans += sum(len(p.spans) for p in pieces.values())
    alone = unique([text for p in pieces.values() for text, _ in p.spans])
    first = unique([s for p in pieces.values() for s in p.sentences])
    asked = unique(first + alone)
    found = dict(zip(asked, (yield Request(asked)), strict=True))
    spans = {text: found[text].strip(_EDGES) or found[text] for text in alone}
    done = {i: [found[s] for s in p.sentences] for i, p in pieces.items()}
    again = {i: retried_sentences(p, done[i], spans) for i, p in pieces.items()}
    again = {i: where for i, where in again.items() if where}
    if again:
        texts = unique([pieces[i].sentences[j] for i, where in again.items() for j in where])
        terms = one_each([(t, spans[t]) for i in again for t in missing(pieces[i], done[i], spans)])
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
    tail = [r for r in trail if r.text] + list(unit[end:])
    return Piece(source, base, spans, kept, head, tail, prefix=prefix)


def span_of(group: list[Run], base: Hashable) -> list[tuple[str, Hashable]]:
    """A run of one mark as a span: none where it is the base's or has no words."""
    text = " ".join("".join(run.text for run in group).split())
    return [(text, group[0].mark)] if group[0].mark != base and _WORDY.search(text) else []


def stand_in_prefix(text: str) -> str:
    """Letters no stand-in of this unit can be mistaken for."""
    upper = text.upper()
    return next((p for p in _PREFIXES if p not in upper), "QZQ")


def assign(piece: Piece) -> int:
    """Each span given to the sentence it stands in (`owners`), found by where it starts in
    the unit's text, in one pass (spans and sentences are in reading order). A span over
    sentences becomes a span in each. Beyond MAX_SPANS a sentence, a span's formatting is
    dropped: how many were."""
    starts = sentence_starts(piece.source, piece.sentences)
    spans, owners, taken, dropped, at = [], [], Counter(), 0, 0
    for text, mark in piece.spans:
        found = piece.source.find(text, at)
        if found < 0:  # not in its text as written (cannot happen): placed in the whole unit
            parts = [(text, None)]
        else:
            at = found + len(text)
            first, last = owner_at(starts, found), owner_at(starts, at - 1)
            parts = [(text, first)] if first == last else across(text, piece, found, starts)
        for part, owner in parts:
            if taken[owner] == MAX_SPANS:
                dropped += 1
                continue
            taken[owner] += 1
            spans.append((part, mark))
            owners.append(owner)
    piece.spans, piece.owners = spans, owners
    return dropped


def sentence_starts(source: str, sentences_: list[str]) -> list[int]:
    """Where each sentence starts in `source` (the splitter keeps their order and words)."""
    starts, at = [], 0
    for sentence in sentences_:
        found = source.find(sentence, at)
        starts.append(found if found >= 0 else at)
        at = found + len(sentence) if found >= 0 else at
    return starts


def owner_at(starts: list[int], offset: int) -> int | None:
    """The sentence holding the character at `offset`."""
    return max(bisect.bisect_right(starts, offset) - 1, 0) if starts else None


def across(text: str, piece: Piece, found: int, starts: list[int]) -> list[tuple[str, int | None]]:
    """A span over sentences (starting at `found`; the sentences start at `starts`) as a span
    in each sentence it covers."""
    out, at = [], found
    for part in [part for part in sentences(text) if _WORDY.search(part)] or [text]:
        where = piece.source.find(part, at)
        at = where + len(part) if where >= 0 else at
        out.append((part, owner_at(starts, where) if where >= 0 else None))
    return out


def one_each(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """Glossary terms, the first of each English as a glossary looks it up (case aside): two
    spans "Save" and "SAVE" must not make one glossary of two entries."""
    terms: dict[str, str] = {}
    seen: set[str] = set()
    for english, chinese in pairs:
        if (looked_up := key(english)[0]) not in seen and chinese:
            seen.add(looked_up)
            terms[english] = chinese
    return terms


def places(sub: str, ks: list[int], piece: Piece, spans: dict[str, str]) -> list[Placed]:
    """Where each of the spans `ks` stands in `sub` (one sentence's translation): a span
    that is the whole sentence takes it all; another where its translation is, the longest
    first, none overlapping."""
    taken: list[Placed] = []
    for k in ks:
        if piece.owners[k] is not None and piece.spans[k][0] == piece.sentences[piece.owners[k]]:
            taken.append((0, len(sub), k))
            break
    for k in sorted(
        (k for k in ks if k not in {t for *_, t in taken}),
        key=lambda k: -len(spans[piece.spans[k][0]]),
    ):
        target, at = spans[piece.spans[k][0]], 0
        while target and (at := sub.find(target, at)) >= 0:
            end = at + len(target)
            if not any(s < end and at < e for s, e, _ in taken):
                taken.append((at, end, k))
                break
            at += 1
    return taken


def near(written: str, target: str, taken: list[Placed]) -> tuple[int, int] | None:
    """Where `written` holds most of `target`'s characters within a stretch of its length,
    outside `taken` (more than half of them): a span whose translation in its sentence reads
    a little differently alone. None where no stretch does. One pass (a sliding window)."""
    size, wanted = len(target), set(target)
    if not size or len(written) < size:
        return None
    hit = [ch in wanted for ch in written]
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
) -> tuple[str, list[Placed], int]:
    """A unit's translation (`parts`, of its sentences) joined, where each span goes in it
    (looked for in its own sentence's translation: `places`, else `near`, else with
    `fallback` that translation's longest free stretch), and how many went only near."""
    written, ranges = joined([tight(part, piece.prefix) for part in cleaned(parts, piece)])
    groups: dict[int | None, list[int]] = {}
    for k, owner in enumerate(piece.owners):
        groups.setdefault(owner, []).append(k)
    placed, approximate = [], 0
    for owner, ks in groups.items():
        lo, hi = ranges[owner] if owner is not None else (0, len(written))
        sub = written[lo:hi]
        local = places(sub, ks, piece, spans)
        exact = len(local)
        for k in ks:  # then those near their words, before any takes its sentence's rest
            if k not in {t for *_, t in local} and (
                found := near(sub, spans[piece.spans[k][0]], local)
            ):
                local.append((*found, k))
        for k in ks if fallback and owner is not None else []:
            if k not in {t for *_, t in local} and (
                found := free_stretch(sub, (0, len(sub)), local)
            ):
                local.append((*found, k))
        approximate += len(local) - exact
        placed += [(start + lo, end + lo, k) for start, end, k in local]
    return written, placed, approximate


def missing(piece: Piece, parts: list[str], spans: dict[str, str]) -> list[str]:
    """The spans of `piece` that its translation `parts` has no place for and that a glossary
    term may ask for: a translation alone to ask for, and a word of four letters or a digit
    (a function word alone, "my" or "Do", translates too loosely to be forced into a
    sentence)."""
    placed = {k for _, _, k in placements(piece, parts, spans)[1]}
    texts = [text for k, (text, _) in enumerate(piece.spans) if k not in placed]
    return [text for text in texts if spans[text] and _CONTENT.search(text)]


def retried_sentences(piece: Piece, parts: list[str], spans: dict[str, str]) -> set[int]:
    """The sentences to translate again for the spans their translation `parts` lacks: each
    one's sentence (all of the unit's, for a span of none)."""
    lacking = set(missing(piece, parts, spans))
    where: set[int] = set()
    for (text, _), owner in zip(piece.spans, piece.owners, strict=True):
        if text in lacking:
            where |= {owner} if owner is not None else set(range(len(piece.sentences)))
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
    for match in re.finditer(rf"{piece.prefix}-\d+(?!\d)", written):  # each once (cleaned)
        cuts[match.start()] = (match.end(), piece.kept[match.group(0)])
    used = {written[start:end] for start, (end, _) in cuts.items()}
    moved = [run for token, run in piece.kept.items() if token not in used]
    counts.kept_moved += len(moved)
    return list(piece.head) + cut_runs(written, marks, cuts) + moved + piece.tail


def cleaned(parts: list[str], piece: Piece) -> list[str]:
    """The parts with each stand-in of `piece` where the model first wrote it, and no other
    (one written twice, or one it made up, would be left in the text)."""
    seen: set[str] = set()

    def first(match: re.Match) -> str:
        token = match.group(0)
        if token in piece.kept and token not in seen:
            seen.add(token)
            return token
        return ""

    pattern = re.compile(rf"{piece.prefix}-\d+(?!\d)")
    return [pattern.sub(first, part) for part in parts]


def tight(text: str, prefix: str) -> str:
    """No blank between a stand-in and the Chinese beside it (one pass)."""
    text = re.sub(rf"(?<=[^\x00-\x7f]) ?({prefix}-\d+(?!\d)) ?(?=[^\x00-\x7f]|$)", r"\1", text)
    return re.sub(rf"^ ?({prefix}-\d+(?!\d)) ?(?=[^\x00-\x7f])", r"\1", text)


def joined(parts: list[str]) -> tuple[str, list[tuple[int, int]]]:
    """`parts` joined as `join` joins sentences (a part after another, with a blank only
    between two Latin letters or digits: `join` of the last part written and the next),
    and where each stands in the result. Linear: no growing string is joined again."""
    pieces, ranges, size, last = [], [], 0, ""
    for part in parts:
        both = join([last, part])  # the last part and this: what join puts between them
        blank = both[len(last) : len(both) - len(part)] if part else ""
        pieces.append(blank + part)
        size += len(blank)
        ranges.append((size, size + len(part)))
        size += len(part)
        last = part or last
    return "".join(pieces), ranges


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
