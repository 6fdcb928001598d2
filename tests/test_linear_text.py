"""What the server's text path runs on a user's text takes time linear in its length: no
pattern backtracks within one match attempt (regexploit), and no attempt scans the rest
of the text again at every start (the e-mail pattern did: "a+" * 50,000 took a minute),
nor is every match checked against every other (spans, names, glossary terms). Each
growth test times a function at n and 8n characters: linear gives ~8x, quadratic ~64x."""

import gc
import importlib
import re
import time
import warnings
from collections import Counter
from types import SimpleNamespace

import pytest

from translator.data import known_words, spans
from translator.data.glossary import Glossary
from translator.inference.terms import TermPolicy

TEXT_PATH = [
    "translator.data.spans",
    "translator.data.normalization",
    "translator.data.glossary",
    "translator.data.known_words",
    "translator.inference.casing",
    "translator.inference.sentences",
    "translator.inference.text",
    "translator.inference.terms",
    "translator.inference.engine",
]
LINEAR_BOUND = 24  # growth from n to 8n characters: linear ~8, quadratic ~64


def text_path_patterns() -> dict[str, re.Pattern]:
    """Every compiled pattern of the text path's modules, and each kind of protected span."""
    found = {}
    for name in TEXT_PATH:
        for attr, value in vars(importlib.import_module(name)).items():
            if isinstance(value, re.Pattern):
                found[f"{name}.{attr}"] = value
    found |= {f"spans: {kind}": re.compile(p) for kind, p in spans._PATTERNS.items()}
    return found


def growth(function, unit: str, n: int, tail: str = "") -> float:
    """CPU time of `function` on `unit` repeated to 8n characters (then `tail`) over its
    time at n characters, each the least of 3 runs (the collector off: it runs more often
    as objects pile up, which is not the function's own growth)."""

    def least(size: int) -> float:
        text = (unit * (size // len(unit) + 1))[:size] + tail
        times = []
        for _ in range(3):
            start = time.process_time()
            function(text)
            times.append(time.process_time() - start)
        return min(times)

    gc.collect()
    gc.disable()
    try:
        return least(8 * n) / max(least(n), 1e-6)
    finally:
        gc.enable()


def test_every_pattern_of_the_text_path_passes_regexploit():
    with warnings.catch_warnings():  # regexploit reads patterns with sre_parse (deprecated)
        warnings.simplefilter("ignore", DeprecationWarning)
        sre = pytest.importorskip("regexploit.ast.sre")
        redos = pytest.importorskip("regexploit.redos")
    patterns = text_path_patterns()
    assert len(patterns) >= 25  # they were collected, not missed
    for name, pattern in patterns.items():
        parsed = sre.SreOpParser().parse_sre(pattern.pattern, pattern.flags)
        found = [r for r in redos.find(parsed) if r.starriness > 2]  # regexploit's own cut
        assert not found, f"{name}: {found[0].example()}"


def test_spans_are_those_of_the_one_alternation_of_their_patterns():
    """The linear search finds what re.compile of all kinds as one alternation finds,
    where an address follows a match that ends inside its run too."""
    alternation = re.compile("|".join(f"(?P<{k}>{p})" for k, p in spans._PATTERNS.items()))
    texts = [
        "x.y@z.com", "+a@b.cn", "++a@b.cn", "-x@y.com", "a+b@c.com", "a-@b.com", "a.@b.c-",
        "@abc.def@x.com", "1,000.5+a@b.com", "a@b.com-x.y+z@q.org", "+www.x@b.cn",
        "www.x@b.cn/path", "...@b.com", "❶a@b.com", "😀a@b.com", "A380+x@y.zz", "a@b.c@d.e",
        "⦅1⦆+a@b.com", "GitHub.x@y.com and @ab", "https://x.com/a+b@c.d f@g.h", "a@b", "1@2.3",
        "Write to first.last@example.co.uk or @support, not www.example.com/x@y.",
    ]  # fmt: skip
    for text in texts:
        expected = [m.span() for m in alternation.finditer(text)]
        assert spans.ranges(text) == expected, text
        assert (spans._SPAN.search(text) is None) == (not expected)


@pytest.mark.parametrize(("unit", "tail"), [("a+", ""), ("1.", "@"), ("-a", "@b.com")])
def test_a_run_of_words_and_marks_is_searched_for_an_address_once(unit, tail):
    """`\\b[\\w.+-]+@` started at every word of "a+a+…" and scanned to the run's end."""
    assert growth(spans.find, unit, 5_000, tail) < LINEAR_BOUND
    assert growth(spans.mask, unit, 5_000, tail) < LINEAR_BOUND


def test_names_among_many_spans_are_found_in_linear_time():
    words = known_words.known([f"word{i}" for i in range(known_words.FEWEST_WORDS)])

    def names(text):
        return known_words.unknown(text, words, spans.ranges(text))

    assert growth(names, "Xq 1234 ", 4_000) < LINEAR_BOUND


def test_glossary_terms_among_many_spans_are_found_in_linear_time():
    glossary = Glossary.of({"card": "卡"})
    assert growth(lambda t: glossary.find(t, spans.ranges(t)), "card 1234 ", 4_000) < LINEAR_BOUND


def test_terms_are_sorted_into_carried_and_kept_in_linear_time():
    """Names (carried as placeholders) and a term the model knows (kept) in one sentence."""
    policy = TermPolicy.__new__(TermPolicy)
    words = known_words.known(["card"] + [f"word{i}" for i in range(known_words.FEWEST_WORDS)])
    policy.engine, policy.counts, policy.placeholders = (
        SimpleNamespace(known_words=words), Counter(), True,
    )  # fmt: skip
    decode = SimpleNamespace(keep_names=True, sample=False)
    glossary = Glossary.of({"card": "卡"})
    carried, kept = policy.find("Xq card Yq", glossary, decode)
    assert [m.chinese for m in carried] == ["Xq", "Yq"] and [m.chinese for m in kept] == ["卡"]
    assert growth(lambda t: policy.find(t, glossary, decode), "Xq card ", 4_000) < LINEAR_BOUND
