"""The entity suite of `translator eval --robustness`: English sentences generated from
templates written here (never from a split's text, so nothing in it can have been trained
on) carrying spans a translation must pass through unchanged, and the two measures of what
came out (`kept`, `invented_digit_runs`). The single-word names (Linux; "Tom" is translated,
汤姆, so such names are not among them) come last, so the other sentences stay as they were.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

KINDS = ("url", "email", "handle", "decimal", "integer", "code", "emoji", "name", "word name")

# {kind} slots; each template is a plain everyday sentence around its spans
TEMPLATES = (
    "Please visit {url} for more information.",
    "The instructions are at {url}.",
    "I found the answer on {url} yesterday.",
    "Send your questions to {email}.",
    "Tom's email address is {email}.",
    "You can write to me at {email} any time.",
    "Follow {handle} for the latest news.",
    "My friend's account is {handle}.",
    "The price went up to {decimal} dollars yesterday.",
    "I paid {decimal} euros for this book.",
    "The temperature reached {decimal} degrees today.",
    "The town has {integer} inhabitants.",
    "We sold {integer} copies last month.",
    "The bridge is {integer} meters long.",
    "Your order number is {code}.",
    "Please quote {code} when you call us.",
    "The part {code} is out of stock.",
    "I love this song {emoji}",
    "Thank you so much {emoji}",
    "We won the game {emoji}",
    "I use {name} every day.",
    "She works at {name} now.",
    "Do you have {name} on your phone?",
    "I paid {decimal} dollars at {url} on Monday.",
    "Send {integer} dollars to {email} today.",
    "Order {code} costs {decimal} dollars.",
    "{name} has {integer} users in this city.",
    "Ask {handle} about order {code}.",
)
# single-word names, mid-sentence and first ({word name} is filled from _WORD_NAMES)
WORD_NAME_TEMPLATES = (
    "Do you use {word name} at work?",
    "{word name} is used by many students.",
    "My sister installed {word name} yesterday.",
    "I read about it on {word name}.",
    "Why did you stop using {word name}?",
)

_WORDS = (
    "example", "travel", "garden", "music", "school", "weather", "books", "kitchen", "river",
    "market", "photo", "station", "planet", "coffee", "lantern", "harbor", "maple", "summit",
)  # fmt: skip
_TLDS = ("com", "org", "net", "io", "cn", "dev")
_PEOPLE = ("tom", "mary", "li.wei", "zhang", "anna", "ken", "lucy", "wang.fang", "john", "mei")
_EMOJI = ("😀", "🎉", "👍", "❤️", "🚀", "🌟", "😂", "🙏", "🔥", "🎵")
_NAMES = (
    "GitHub", "PayPal", "YouTube", "iPhone", "LinkedIn", "WordPress", "JavaScript",
    "PowerPoint", "TikTok", "WhatsApp", "DeepMind", "OpenStreetMap", "iPad", "eBay",
)  # fmt: skip
# names kept in Latin script in Chinese text, not English words (a model has no other
# translation for them to learn)
_WORD_NAMES = (
    "Linux", "Python", "Wikipedia", "Spotify", "Instagram", "Netflix", "Dropbox", "Ubuntu",
    "Reddit", "Photoshop", "Gmail", "Kotlin", "Figma", "Trello", "Shopify", "Duolingo",
)  # fmt: skip


def _url(rng: random.Random) -> str:
    host = f"{rng.choice(_WORDS)}.{rng.choice(_TLDS)}"
    path = "/".join(rng.sample(_WORDS, rng.randint(0, 2)))
    return f"https://{host}/{path}" if path else f"https://{host}"


def _handle(rng: random.Random) -> str:
    return f"@{rng.choice(_WORDS)}_{rng.choice(_PEOPLE).split('.')[0]}{rng.randint(1, 99)}"


def _integer(rng: random.Random) -> str:
    value = rng.randint(1000, 9_999_999)
    return f"{value:,}" if rng.random() < 0.3 else str(value)


def _code(rng: random.Random) -> str:
    letters = "".join(rng.choice("ABCDEFGHJKLMNPRSTUVWXYZ") for _ in range(2))
    return f"{letters}-{rng.randint(1000, 9999)}"


FILLERS: dict[str, Callable[[random.Random], str]] = {
    "url": _url,
    "email": lambda rng: f"{rng.choice(_PEOPLE)}@{rng.choice(_WORDS)}.{rng.choice(_TLDS)}",
    "handle": _handle,
    "decimal": lambda rng: f"{rng.randint(1, 999)}.{rng.randint(1, 99):02d}",
    "integer": _integer,
    "code": _code,
    "emoji": lambda rng: rng.choice(_EMOJI),
    "name": lambda rng: rng.choice(_NAMES),
    "word name": lambda rng: rng.choice(_WORD_NAMES),
}
_SLOT = re.compile(r"\{(\w+(?: \w+)?)\}")
_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True)
class Span:
    kind: str
    text: str


@dataclass(frozen=True)
class EntitySentence:
    text: str
    spans: tuple[Span, ...]


def suite(n: int, seed: int = 1) -> list[EntitySentence]:
    """`n` sentences, the templates in turn, each slot filled at random (seeded), then
    n // 5 with single-word names: the same for the same `n` and `seed` on every machine."""
    return _filled(TEMPLATES, n, random.Random(seed)) + _filled(
        WORD_NAME_TEMPLATES, n // 5, random.Random(seed + 1)
    )


def _filled(templates: Sequence[str], n: int, rng: random.Random) -> list[EntitySentence]:
    sentences = []
    for i in range(n):
        parts = _SLOT.split(templates[i % len(templates)])  # text, kind, text, kind, …, text
        spans = tuple(Span(kind, FILLERS[kind](rng)) for kind in parts[1::2])
        parts[1::2] = [span.text for span in spans]
        sentences.append(EntitySentence("".join(parts), spans))
    return sentences


def kept(output: str, spans: Sequence[Span]) -> list[bool]:
    """For each span, whether the output holds it verbatim (two equal spans: twice)."""
    seen: Counter[str] = Counter()
    found = []
    for span in spans:
        seen[span.text] += 1
        found.append(output.count(span.text) >= seen[span.text])
    return found


def invented_digit_runs(source: str, output: str) -> int:
    """Digit runs (maximal sequences of 0-9) in the output beyond the source's, counted with
    their repeats: a number the translation made up or changed. 5.99 is two runs, 5 and 99."""
    have = Counter(_DIGITS.findall(source))
    wrote = Counter(_DIGITS.findall(output))
    return sum((wrote - have).values())
