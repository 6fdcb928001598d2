"""What a user sees, pinned: a tiny model trained with placeholders (tests/data/outputs/)
translated by both engines with every decoding option that stays, and through serve's
decoder and LibreTranslate's html format, must give what `expected.json` recorded, word for
word, with the same scores, the same spans named and the same counts.

The model and `expected.json` were written once by the commit named in the README there;
a refactor of the text path, the search or the engines that changes any output fails here.
A change meant to change outputs rewrites expected.json (`python tests/test_outputs.py`)
and says why in its commit.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent / "data" / "outputs"
LONG = ", ".join(["Tom will buy the car", "Mary can see the dog", "they should find the book"] * 4)
LINES = [
    "Tom will buy the book.",
    "I can see the cat. She should find the dog.",
    "TOM WILL BUY THE BOOK",
    "can you see the flower",
    "It costs 12.50 dollars.",
    "Visit https://example.com today.",
    "The code is KX-4821.",
    "Zorblax will buy the car.",
    "I have 3 apples.",
    "",
    "He can buy the GPU. We will draw the book for Python.",
    LONG + ".",
]
GLOSSARY = {"book": "书本", "GPU": "显卡", "Python": "Python", "the cat": "小猫"}
SETTINGS = {  # name: decoding changes (DecodeConfig keys), with the glossary or not
    "greedy": {},
    "beam5": {"beam": 5},
    "nbest3": {"beam": 5, "nbest": 3},
    "greedy_nbest": {"nbest": 1},
    "no_split": {"split": False},
    "no_split_beam": {"split": False, "beam": 4},
    "guards": {"digit_guard": True, "span_guard": True},
    "guards_beam": {"digit_guard": True, "span_guard": True, "beam": 3},
    "no_repeat": {"no_repeat_ngram": 2, "beam": 2},
    "plain_text": {"recase": False, "final_mark": False, "keep_names": False},
    "penalty": {"beam": 4, "length_penalty": 1.2, "nbest": 2},
    "limits": {"max_len_a": 0.5, "max_len_b": 2, "beam": 3, "nbest": 2},
    "small_batches": {"batch_size": 3, "beam": 2},
    "sample": {"sample": True, "seed": 3, "nbest": 2, "topk": 5},
    "sample_warm": {"sample": True, "seed": 5, "temperature": 0.7, "topp": 0.9},
    "sample_cold": {"sample": True, "temperature": 0.0},
    "glossary": {"glossary": True},
    "glossary_beam": {"glossary": True, "beam": 5},
    "glossary_nbest": {"glossary": True, "beam": 5, "nbest": 2},
    "glossary_guards": {"glossary": True, "digit_guard": True, "span_guard": True},
    "glossary_no_split": {"glossary": True, "split": False, "beam": 2},
}


def hypotheses(found) -> list:
    """n-best lists as JSON: each hypothesis's fields, its score to 5 decimals (None: NaN)."""
    return [
        [
            [h.text, None if math.isnan(h.score) else round(h.score, 5), *map(list, h[2:])]
            for h in line
        ]
        for line in found
    ]


def engine_outputs(translator, glossary_file: Path) -> dict:
    """Every setting's n-best lists for LINES, and the counts the engine kept."""
    results = {}
    for name, changes in SETTINGS.items():
        changes = dict(changes)
        glossary = str(glossary_file) if changes.pop("glossary", False) else ""
        wanted = changes.get("nbest", 0)
        engine = translator.with_decode(glossary=glossary, **changes | {"nbest": max(wanted, 1)})
        before = dict(engine.counts)
        found = engine.translate(LINES)
        counts = {k: v - before.get(k, 0) for k, v in engine.counts.items()}
        results[name] = {
            "found": hypotheses(found),
            "counts": {k: v for k, v in sorted(counts.items()) if v},
        }
        if not wanted:  # as text: what translate prints without --nbest
            plain = translator.with_decode(glossary=glossary, **changes)
            results[name]["text"] = plain.translate(LINES)
    return results


def serve_outputs(translator) -> dict:
    """serve's decoder (Settings as requests send them, a request's own glossary among
    them) and LibreTranslate's format=html, over the same lines."""
    from translator.deploy.decoder import LocalDecoder, Settings, best

    decoder = LocalDecoder(translator)
    requests = {
        "default": Settings(beam=1, split=True),
        "beam_nbest": Settings(beam=4, split=True, nbest=2),
        "glossary": Settings(beam=2, split=False, glossary=tuple(GLOSSARY.items())),
    }
    results = {}
    for name, settings in requests.items():
        found, tokens = decoder.decode(LINES, settings)
        results[name] = {"found": hypotheses(found), "tokens": tokens}

    async def translate(request):
        settings = Settings(beam=1, split=True, glossary=tuple(request.terms.items()))
        return [h.text for h in best(decoder.decode(request.texts, settings)[0])]

    from translator.deploy.libretranslate import translate_html

    pages = ["<p>Tom will buy <b>the book</b>.</p><p>Visit https://example.com today.</p>"]
    results["html"] = asyncio.run(translate_html(pages, translate))
    return results


def outputs(checkpoint: Path, work: Path) -> dict:
    """What both engines give for LINES: every setting, serve's answers (torch), and the
    ids `translator attention` reads for two sentences."""
    from translator.config import from_dict
    from translator.inference.text import Translator
    from translator.model.checkpoint import load

    glossary_file = work / "glossary.tsv"
    glossary_file.write_text("".join(f"{e}\t{c}\n" for e, c in GLOSSARY.items()), "utf-8")
    raw = load(checkpoint)["config"]
    raw["decode"] |= {"precision": "fp32", "engine": "torch", "workers": 1, "threads": 1}
    raw["train"]["device"] = "cpu"
    config = from_dict(raw)
    ours = Translator.open(config, checkpoint)
    results = {"torch": engine_outputs(ours, glossary_file), "serve": serve_outputs(ours)}
    results["attention"] = [
        [ids.tolist(), out] for ids, out in map(ours.decoded, ["Tom will buy the book.", LINES[10]])
    ]
    if "ctranslate2" in sys.modules or _has_ctranslate2():
        from translator.deploy.export import export

        exported = export(checkpoint, work / "ct2")
        config.decode.engine, config.decode.model_dir = "ctranslate2", str(exported)
        results["ctranslate2"] = engine_outputs(Translator.open(config, checkpoint), glossary_file)
    return results


def _has_ctranslate2() -> bool:
    import importlib.util

    return importlib.util.find_spec("ctranslate2") is not None


def test_every_output_is_the_one_recorded(tmp_path):
    """Both engines, every setting, serve: the outputs recorded in expected.json."""
    expected = json.loads((HERE / "expected.json").read_text(encoding="utf-8"))
    if not _has_ctranslate2():
        pytest.skip("ctranslate2 is not installed")
    found = json.loads(json.dumps(outputs(HERE / "model.pt", tmp_path), ensure_ascii=False))
    assert found.keys() == expected.keys()
    for part in expected:
        if isinstance(expected[part], dict):
            for name in expected[part]:
                assert found[part][name] == expected[part][name], (part, name)
        assert found[part] == expected[part], part


if __name__ == "__main__":  # rewrite expected.json from today's code
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        recorded = outputs(HERE / "model.pt", Path(tmp))
    text = json.dumps(recorded, ensure_ascii=False, indent=1)
    (HERE / "expected.json").write_text(text + "\n", encoding="utf-8")
