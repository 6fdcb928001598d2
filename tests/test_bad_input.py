"""Bad input, everywhere: `prepare` keeps the good rows around every kind of malformed row
and counts each kind in stats.json; a file with no usable row is one error line."""

import gzip
import json

import pytest
from conftest import assert_one_line_error, generated_pairs, run_cli, tatoeba_rows, tiny_config

from translator.corpus.preparer import prepare

GOOD = generated_pairs(240)


def corpus_with(tmp_path, bad: bytes, header: bytes = b"") -> dict:
    """The good pairs, half before and half after `bad`; returns prepare's stats."""
    first, last = tatoeba_rows(GOOD[:120]), tatoeba_rows(GOOD[120:], 120)
    path = tmp_path / "corpus.tsv"
    path.write_bytes(header + first.encode() + bad + last.encode())
    return prepare(tiny_config(tmp_path).data).stats


@pytest.mark.parametrize(
    ("bad", "kind", "count"),
    [
        (b"1\ttoo few\n2\n", "wrong column count", 2),
        (b"1\ta\t2\tb\tc\n", "wrong column count", 1),
        ("1\tNUL\x00here.\t2\t有\x00。\n".encode(), "control characters", 1),
        ("1\tBell\x07.\t2\t铃。\n3\tEsc.\t4\t逃\x1b。\n".encode(), "control characters", 2),
        (b"1\tbad \xff\xfe bytes\t2\t\xe5\xa5\n", "undecodable", 1),
        (b"x1\tNot an id.\t2\t\xe4\xb8\x8d\xe3\x80\x82\n", "id not a number", 1),
    ],
)
def test_malformed_rows_are_skipped_counted_and_the_rest_survive(tmp_path, bad, kind, count):
    stats = corpus_with(tmp_path, bad)
    assert stats["malformed_by_kind"] == {kind: count}
    assert stats["malformed"] == count
    assert stats["pairs"] == len(GOOD)  # every good row around it survived


def test_empty_and_whitespace_only_fields_are_counted_as_empty(tmp_path):
    stats = corpus_with(tmp_path, "1\t\t2\t空。\n3\t   \t4\t好。\n5\tHi.\t6\t\u3000 \n".encode())
    assert stats["empty"] == 3 and stats["malformed"] == 0 and stats["pairs"] == len(GOOD)


def test_a_one_megabyte_line_is_filtered_as_too_long(tmp_path):
    stats = corpus_with(tmp_path, ("1\t" + "a" * 1_000_000 + "\t2\t长。\n").encode())
    assert stats["too_long"] == 1 and stats["pairs"] == len(GOOD)


def test_mixed_line_endings_and_a_byte_order_mark_mid_file(tmp_path):
    bad = "1\tWindows line.\t2\t视窗行。\r\n\ufeff3\tConcatenated.\t4\t拼接的。\n".encode()
    stats = corpus_with(tmp_path, bad, header="\ufeff".encode())
    assert stats["malformed"] == 0 and stats["pairs"] == len(GOOD) + 2


def test_a_header_row_is_skipped_and_counted(tmp_path):
    stats = corpus_with(tmp_path, b"", header=b"en_id\ten\tzh_id\tzh\n")
    assert stats["headers"] == 1 and stats["malformed"] == 0 and stats["pairs"] == len(GOOD)


def test_an_anki_header_row_is_skipped(tmp_path):
    path = tmp_path / "corpus.tsv"
    rows = "".join(f"{en}\t{zh}\tCC-BY\n" for en, zh in GOOD)
    path.write_text("English\tChinese\tAttribution\n" + rows, encoding="utf-8")
    stats = prepare(tiny_config(tmp_path).data).stats
    assert stats["inputs"][0]["format"] == "anki"
    assert stats["headers"] == 1 and stats["pairs"] == len(GOOD)


def test_json_lines_with_missing_keys_and_wrong_types(tmp_path):
    good = [json.dumps({"english": en, "chinese": zh}, ensure_ascii=False) for en, zh in GOOD]
    bad = [
        '{"english": "No Chinese."}',
        '{"english": 3, "chinese": "三。"}',
        '{"english": "Hi.", "chinese": null}',
        '["Hi.", "嗨。"]',
        "{not json",
        '{"english": "Nul\\u0000.", "chinese": "空。"}',
    ]
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(good[:100] + bad + good[100:]) + "\n", encoding="utf-8")
    stats = prepare(tiny_config(tmp_path, data={"inputs": [str(path)]}).data).stats
    assert stats["malformed_by_kind"] == {
        "missing or non-string 'chinese'": 2,
        "missing or non-string 'english'": 1,
        "not a JSON object": 1,
        "bad JSON": 1,
        "control characters": 1,
    }
    assert stats["pairs"] == len(GOOD)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "tiny.toml").write_text(
        '[data]\ndir = "prepared"\nvalid_size = 5\ntest_size = 5\n'
        "src_vocab_size = 60\ntgt_vocab_size = 320\n"
    )
    return tmp_path


@pytest.mark.parametrize(
    ("content", "fragments"),
    [
        (b"", ["input file is empty"]),
        (b"\n\n  \n", ["input file is empty"]),
        (bytes(range(256)) * 64, ["is not a UTF-8 text file"]),
        (
            gzip.compress(b"1\tHi.\t2\t\xe5\x97\xa8\n" * 50, mtime=0)[:-12],
            ["bad.tsv: the gzip data is truncated", "nothing was prepared"],
        ),
        ("1\tHi.\t2\t嗨。\n".encode("utf-16"), ["UTF-16 text: save it as UTF-8"]),
        (b"1\t\t2\t\xe7\xa9\xba\n3\tonly three\t4\n", ["no usable pair"]),
    ],
)
def test_a_file_with_no_usable_row_is_one_error_line(project, content, fragments):
    (project / "bad.tsv").write_bytes(content)
    result = run_cli("prepare", "--input", "bad.tsv", "--format", "tatoeba", cwd=project)
    assert_one_line_error(result, *fragments)
