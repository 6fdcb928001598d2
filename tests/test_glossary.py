"""A user's glossary (data/glossary.py): the files DeepL and Google take, each matching rule,
and every bad file as one error naming the file and the line."""

from __future__ import annotations

import pytest

from translator.data import spans
from translator.data.glossary import Glossary, key, singulars, term_ids
from translator.errors import UserError

ENTRIES = {
    "GPU": "显卡",
    "credit card": "信用卡",
    "card": "卡",
    "battery": "电池",
    "box": "盒子",
    "Node.js": "Node.js",
    "C++": "C++",
    "example": "例子",
    "Acme Cloud": "顶点云",
    "e-mail": "电子邮件",
}


def found(glossary: Glossary, text: str) -> list[tuple[str, str]]:
    return [(text[m.start : m.end], m.chinese) for m in glossary.find(text, spans.ranges(text))]


@pytest.fixture(scope="module")
def glossary() -> Glossary:
    return Glossary.of(ENTRIES)


def test_whole_words_only_in_any_case(glossary):
    assert found(glossary, "My GPU, your gpu and their Gpu.") == [
        ("GPU", "显卡"),
        ("gpu", "显卡"),
        ("Gpu", "显卡"),
    ]
    assert found(glossary, "A cardboard boxer in the cardbox.") == []  # no word is an entry
    assert found(glossary, "a card-holder") == [("card", "卡")]  # a hyphen ends a word


def test_the_longest_entry_first_and_regular_plurals(glossary):
    assert found(glossary, "Pay by credit card, not by card.") == [
        ("credit card", "信用卡"),
        ("card", "卡"),
    ]
    assert found(glossary, "Two credit cards, three cards, batteries and boxes.") == [
        ("credit cards", "信用卡"),
        ("cards", "卡"),
        ("batteries", "电池"),
        ("boxes", "盒子"),
    ]
    assert found(glossary, "Acme  Cloud and ACME CLOUD") == [
        ("Acme  Cloud", "顶点云"),
        ("ACME CLOUD", "顶点云"),
    ]
    assert singulars("glasses") == ["glass", "glasse"] and singulars("class") == []


def test_entries_with_marks_and_inside_protected_spans(glossary):
    assert found(glossary, "I write Node.js and C++ by e-mail.") == [
        ("Node.js", "Node.js"),
        ("C++", "C++"),
        ("e-mail", "电子邮件"),
    ]
    text = "See https://example.com/card for an example."
    assert found(glossary, text) == [("example", "例子")]  # the URL is left alone
    assert key("  Credit   CARD ") == ("credit card", 2) and key("Node.js") == ("node.js", 3)


def test_a_name_that_keeps_its_english_is_an_identity(glossary):
    names = Glossary.of({"Python": "Python", "GPU": "显卡"})
    text = "I use python on a GPU."
    assert [m.identity(text) for m in names.find(text)] == [True, False]


def test_the_files_deepl_and_google_take(tmp_path):
    tsv = tmp_path / "terms.tsv"
    tsv.write_bytes(
        "\ufeffenglish\tchinese\r\n# product names\r\nGPU\t显卡\r\n\r\n  # indented comment\r\n"
        "credit card\t 信用卡 \r\nGPU\t显卡\r\n".encode()
    )
    assert Glossary.load(tsv).entries == {"gpu": "显卡", "credit card": "信用卡"}
    csv = tmp_path / "terms.csv"
    csv.write_text('source,target\n"Acme, Inc.",顶点公司\nbattery,电池\n', encoding="utf-8")
    assert Glossary.load(csv).entries == {"acme, inc.": "顶点公司", "battery": "电池"}
    headless = tmp_path / "plain.csv"
    headless.write_text("en,zh-CN\nbox,盒子\n", encoding="utf-8")  # Google's header
    assert Glossary.load(headless).entries == {"box": "盒子"}
    assert not Glossary.load(tmp_path / "terms.tsv").find("no term here")


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"GPU\t\xe6\x98\xbe\xe5\x8d\xa1\ncard\n", "terms.tsv:2: no tab or comma"),
        (b"GPU\t\n", "terms.tsv:1: the Chinese side is empty"),
        (b"\t\xe5\x8d\xa1\n", "terms.tsv:1: the English side is empty"),
        (
            b"# x\nGPU\t\xe6\x98\xbe\xe5\x8d\xa1\ngpu\t\xe5\x8d\xa1\n",
            "terms.tsv:3: 'gpu' is given twice",
        ),
        (b"GPU\t\xe6\x98\xbe\xe5\x8d\xa1\n\xff\tx\n", "terms.tsv:2: not UTF-8 (byte 0xff)"),
        (b"GPU\ta\tb\n", "terms.tsv:1: 3 columns"),
    ],
)
def test_a_bad_file_is_one_error_naming_the_line(tmp_path, content, fragment):
    path = tmp_path / "terms.tsv"
    path.write_bytes(content)
    with pytest.raises(UserError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        Glossary.load(path)


def test_a_large_file_is_checked_in_chunks_and_still_names_the_line(tmp_path, monkeypatch):
    """The bulk path (whole chunks at once) and the line-by-line one agree, across chunk
    boundaries: a file of 30,000 entries read 64 KB at a time, with one repeated English
    far from the first."""
    from translator.data import glossary

    monkeypatch.setattr(glossary, "_CHUNK_BYTES", 64 << 10)
    lines = [f"term {i}\t术语{i}\n" for i in range(30_000)]
    path = tmp_path / "big.tsv"
    path.write_text("".join(lines), encoding="utf-8")
    big = Glossary.load(path)
    assert len(big) == 30_000 and big.entries["term 29999"] == "术语29999"
    assert big.longest == 2 and found(big, "Is term 123 here?") == [("term 123", "术语123")]
    lines[25_000] = "TERM 7\t别的\n"
    path.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(UserError, match="big.tsv:25001: 'TERM 7' is given twice"):
        Glossary.load(path)
    lines[25_000] = "TERM 7\t术语7\n"  # the same Chinese again: taken once (term 25000 gone)
    path.write_text("".join(lines), encoding="utf-8")
    assert len(Glossary.load(path)) == 29_999


def test_a_mapping_is_checked_as_a_file_is_and_laid_over_another():
    with pytest.raises(UserError, match="request: entry 'gpu': 'gpu' is given twice"):
        Glossary.of({"GPU": "显卡", "gpu": "图形卡"}, origin="request")
    with pytest.raises(UserError, match="entry 'GPU': the Chinese side is empty"):
        Glossary.of({"GPU": " "})
    with pytest.raises(UserError, match="every entry must map"):
        Glossary.of({"GPU": 3})  # type: ignore[dict-item]
    server = Glossary.of({"GPU": "显卡", "card": "卡"})
    merged = Glossary.of({"gpu": "图形处理器"}).over(server)
    assert merged.entries == {"gpu": "图形处理器", "card": "卡"}
    assert Glossary.open(None) is None and Glossary.open(server) is server


def test_a_term_is_written_as_mid_sentence(trained):
    """The target ids of a term carry no word-start mark (a translation writes the term
    after other characters), and decode back to the term."""
    from translator.inference.text import Translator

    tokenizer = Translator.from_checkpoint(trained, "cpu").tgt_tok
    for term in ("汤姆", "猫", "Python", "显卡"):
        ids = term_ids(tokenizer, term)
        assert ids and not tokenizer.id_to_piece(ids[0]).startswith("\u2581")
        assert tokenizer.decode(ids) == term


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"cat\n", "terms.tsv:1: no tab or comma"),
        (b"cat\t\xe7\x8b\x97\nCat\t\xe7\x8c\xab\n", "terms.tsv:2: 'Cat' is given twice"),
        (b"cat\t\xff\n", "terms.tsv:1: not UTF-8"),
    ],
)
def test_translate_stops_at_a_bad_glossary_before_translating(trained, tmp_path, content, fragment):
    from conftest import assert_one_line_error, run_cli, tiny_config, to_toml

    config_file = tmp_path / "tiny.toml"
    config_file.write_text(to_toml(tiny_config(trained.parents[2]).to_dict()))
    path = tmp_path / "terms.tsv"
    path.write_bytes(content)
    given = ["-c", str(config_file), "--checkpoint", str(trained), "--glossary", str(path)]
    result = run_cli("translate", *given, "Tom can see the cat.", cwd=tmp_path)
    assert_one_line_error(result, fragment)
    assert result.stdout == ""  # nothing translated
    for command in (["eval"], ["translate", "--input", str(config_file)]):
        assert_one_line_error(run_cli(*command, *given, cwd=tmp_path), fragment)


def test_translate_says_how_it_keeps_the_glossary(trained, tmp_path):
    from conftest import run_cli, tiny_config, to_toml

    config_file = tmp_path / "tiny.toml"
    config_file.write_text(to_toml(tiny_config(trained.parents[2]).to_dict()))
    path = tmp_path / "terms.csv"
    path.write_text("english,chinese\ncat,狗\n", encoding="utf-8")
    given = ["-c", str(config_file), "--checkpoint", str(trained), "--glossary", str(path)]
    result = run_cli("translate", *given, "Tom can see the cat.", "Hello.", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "狗" in result.stdout.splitlines()[0]
    assert "glossary: 1 entries from" in result.stderr and "term placement" in result.stderr
    assert "glossary: 1 term in the input, all of them written" in result.stderr


def test_a_term_for_which_the_model_has_its_own_word_is_written_once():
    """The pinned model (tests/data/outputs) writes 书 for "the book"; a glossary asking for
    书本 gets 书本 once, in the place of 书, and no 书 beside it (the constrained beam search
    this replaced wrote 汤姆书本 and 他们会书本 他们会画书。 for four of these five)."""
    from pathlib import Path

    from translator.inference.text import Translator

    model = Path(__file__).parent / "data" / "outputs" / "model.pt"
    translator = Translator.from_checkpoint(model, "cpu", engine="torch")
    sources = [
        "Tom will buy the book.", "She can see the book.", "I should find the book.",
        "They will draw the book.", "Mary can buy the book.",
    ]  # fmt: skip
    plain = translator.translate(sources)
    assert all("书" in line and "书本" not in line for line in plain)
    forced = translator.translate(sources, glossary=Glossary.of({"book": "书本"}))
    for before, after in zip(plain, forced, strict=True):
        assert after.count("书本") == 1 and "书" not in after.replace("书本", "")
        assert after.startswith(before[: before.index("书")] + "书本")  # where 书 was


def test_nbest_json_writes_a_score_that_was_not_computed_as_null():
    """A placed term's fallback (the term put in, the rest kept) has no score: --nbest's
    JSON says null there, never the NaN that JSON does not allow."""
    import json

    from translator.cli.translating import rendered
    from translator.inference.hypothesis import Hypothesis

    found = [
        [Hypothesis("我的显卡", float("nan"), (), (), ()), Hypothesis("显卡", -1.5, (), (), ())]
    ]
    line = json.loads(rendered(["My GPU"], found)[0])
    assert [h["score"] for h in line["hypotheses"]] == [None, -1.5]
