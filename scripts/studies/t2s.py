"""Traditional → simplified converters compared on the Chinese lines of a corpus: which lines
each one changes, and whether each change is right.

    python scripts/studies/t2s.py                      # the shared Tatoeba file
    python scripts/studies/t2s.py pairs.tsv --show 20  # another corpus; list 20 lines each

Candidates: zhconv `zh-hans` and `zh-cn`, OpenCC `t2s` (if the `opencc` package is
installed: pip install opencc) and ours (translator.data.normalization.to_simplified).
Every character a candidate changes is judged by the table below, built by reading every
change on the shared Tatoeba file: right (a traditional or variant character converted),
wrong (text that was already simplified damaged, or punctuation changed), or usage (a
simplified character replaced by the mainland-preferred word, 藉由 → 借由: not a script
conversion; left as written by ours). A change not in the table is judged by a rule:
punctuation → wrong, a character with a traditional → simplified mapping of its own →
right, anything else → unjudged (add it to the table). A line is wrong if any change in
it is, "missed" if another candidate changed it rightly and this one did not.

Then the same converters on traditional text: the lines no candidate changes (simplified)
are turned into traditional script by zhconv `zh-hant` and by OpenCC `s2t` (characters only:
zh-hant would also turn “” into 「」), and each candidate converts them back; the table
counts the lines not restored exactly. (Each round trip may favour the library that made
the traditional text.)
"""

from __future__ import annotations

import argparse
import importlib.util
from collections import Counter
from pathlib import Path

import zhconv
from zhconv.zhconv import getdict

from translator.corpus.formats.read_stats import ReadStats
from translator.data.normalization import normalize_en, to_simplified

# scripts/common.py, the helpers every script shares, loaded by its path: Python puts the
# study's own folder first on the module path, not scripts/ (docs/architecture.md#the-scripts)
_spec = importlib.util.spec_from_file_location("common", Path(__file__).parents[1] / "common.py")
common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(common)

JUDGED = {
    "么幺": (
        "wrong",
        "么 is already simplified (of 麼); zhconv's entries 么喝, 么正, 么女 rewrite it",
    ),
    "姊姐": ("wrong", "regional vocabulary (zh-cn): 姊 is a simplified character"),
    "哩喱": ("wrong", "regional vocabulary (zh-cn): 咖哩 → 咖喱"),
    "份分": ("wrong", "regional vocabulary (zh-cn): 部份 → 部分"),
    "著着": ("usage", "穿著 → 穿着: 著 is a simplified character; the mainland writes 着 here"),
    "藉借": ("usage", "藉由 → 借由: 藉 is a simplified character; the mainland writes 借 here"),
}
SINGLE = {k for k, v in getdict("zh-hans").items() if len(k) == 1 and k != v}


def candidates() -> dict:
    found = {
        "zhconv zh-hans": lambda s: zhconv.convert(s, "zh-hans"),
        "zhconv zh-cn": lambda s: zhconv.convert(s, "zh-cn"),
    }
    try:
        import opencc

        found["OpenCC t2s"] = opencc.OpenCC("t2s").convert
    except ImportError:
        print("OpenCC not installed (pip install opencc): left out\n")
    found["ours"] = to_simplified
    return found


def judge(old: str, new: str) -> tuple[str, str]:
    """The verdict on one line's change."""
    if len(old) != len(new):
        return "wrong", f"the length changed ({old} → {new}): vocabulary, not script"
    verdicts = []
    for a, b in zip(old, new, strict=True):
        if a == b:
            continue
        if a + b in JUDGED:
            verdicts.append(JUDGED[a + b])
        elif not a.isalpha():
            verdicts.append(("wrong", f"punctuation changed ({a} → {b})"))
        elif a in SINGLE:
            verdicts.append(("right", f"{a} → {b}"))
        else:
            verdicts.append(("unjudged", f"{a} → {b}"))
    for kind in ("wrong", "unjudged", "usage", "right"):
        reasons = [why for verdict, why in verdicts if verdict == kind]
        if reasons:
            return kind, "; ".join(dict.fromkeys(reasons))
    raise AssertionError("no change")


def characters_only(old: str, new: str) -> str:
    """`new` with `old`'s punctuation, where the two are of equal length."""
    if len(old) != len(new):
        return new
    return "".join(b if a.isalpha() else a for a, b in zip(old, new, strict=True))


def round_trip(simplified: list[str], converters: dict) -> None:
    to_traditional = {"zhconv zh-hant": lambda s: zhconv.convert(s, "zh-hant")}
    if "OpenCC t2s" in converters:
        import opencc

        to_traditional["OpenCC s2t"] = opencc.OpenCC("s2t").convert
    print(f"\n{len(simplified):,} simplified lines made traditional, then converted back:\n")
    print("| converter | " + " | ".join(f"not restored, from {n}" for n in to_traditional) + " |")
    print("| --- |" + " --- |" * len(to_traditional))
    made = {
        name: [characters_only(s, make(s)) for s in simplified]
        for name, make in to_traditional.items()
    }
    for name, convert in converters.items():
        failures = [
            sum(convert(t) != s for s, t in zip(simplified, lines, strict=True))
            for lines in made.values()
        ]
        print(f"| {name} | " + " | ".join(f"{n:,}" for n in failures) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", nargs="?", type=Path, default=common.TATOEBA)
    parser.add_argument("--format", default="auto")
    parser.add_argument("--show", type=int, default=0, help="list this many changed lines each")
    args = parser.parse_args()
    stats = ReadStats()
    zh = sorted(
        {
            normalize_en(s)
            for frame in common.read_pairs(args.corpus, args.format, stats)
            for s in frame["zh"]
        }
    )
    print(f"{args.corpus}: {len(zh):,} distinct Chinese lines\n")
    converters = candidates()
    outputs = {name: {s: convert(s) for s in zh} for name, convert in converters.items()}
    verdicts = {
        name: {s: judge(s, out[s]) for s in zh if out[s] != s} for name, out in outputs.items()
    }
    rightly = {s for v in verdicts.values() for s, (kind, _) in v.items() if kind == "right"}
    print("| converter | lines changed | right | wrong | usage | unjudged | missed |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, judged in verdicts.items():
        kinds = Counter(kind for kind, _ in judged.values())
        missed = len(rightly - {s for s, (k, _) in judged.items() if k == "right"})
        print(
            f"| {name} | {len(judged)} | {kinds['right']} | {kinds['wrong']} | "
            f"{kinds['usage']} | {kinds['unjudged']} | {missed} |"
        )
    simplified = [s for s in zh if all(out[s] == s for out in outputs.values())]
    round_trip(simplified, converters)
    for name, judged in verdicts.items():
        if args.show:
            print(f"\n{name}:")
            for line, (kind, why) in list(judged.items())[: args.show]:
                print(f"  {kind:8s} {line} → {outputs[name][line]}   ({why})")


if __name__ == "__main__":
    main()
