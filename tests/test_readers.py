import json

import pytest
from common import read_pairs

from translator.corpus.formats.readers import ReadStats, detect_format
from translator.errors import UserError


def read_all(path, fmt="auto"):
    stats = ReadStats()
    frames = list(read_pairs(path, fmt, stats))
    pairs = [tuple(row) for frame in frames for row in frame[["en", "zh"]].itertuples(index=False)]
    return pairs, stats


def test_tatoeba_export(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text('1\tHe said "hi".\t2\t他说“嗨”。\n3\tRun!\t4\t快跑！\n', encoding="utf-8")
    assert detect_format(path) == "tatoeba"
    pairs, stats = read_all(path)
    assert pairs == [('He said "hi".', "他说“嗨”。"), ("Run!", "快跑！")]
    assert (stats.rows, stats.malformed) == (2, 0)


@pytest.mark.parametrize("attribution", ["\tCC-BY 2.0 (France) Attribution: tatoeba.org", ""])
def test_anki_file_with_or_without_attribution(tmp_path, attribution):
    path = tmp_path / "cmn.txt"
    path.write_text(f"Hi.\t嗨。{attribution}\nWait!\t等等！{attribution}\n", encoding="utf-8")
    assert detect_format(path) == "anki"
    pairs, stats = read_all(path)
    assert pairs == [("Hi.", "嗨。"), ("Wait!", "等等！")]
    assert stats.malformed == 0


def test_json_lines(tmp_path):
    path = tmp_path / "pairs.jsonl"
    rows = [
        {"english": "Hi.", "chinese": "嗨。"},
        {"english": "Stop!", "chinese": "住手！", "x": 1},
    ]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows) + "\n")
    assert detect_format(path) == "jsonl"
    pairs, stats = read_all(path)
    assert pairs == [("Hi.", "嗨。"), ("Stop!", "住手！")]
    assert (stats.rows, stats.malformed) == (2, 0)


def test_bom_and_windows_line_endings(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_bytes("\ufeff1\tHi.\t2\t嗨。\r\n3\tRun.\t4\t跑。\r\n".encode())
    pairs, _ = read_all(path)
    assert pairs == [("Hi.", "嗨。"), ("Run.", "跑。")]
    jsonl = tmp_path / "pairs.jsonl"
    jsonl.write_bytes('\ufeff{"english": "Hi.", "chinese": "嗨。"}\r\n'.encode())
    assert read_all(jsonl)[0] == [("Hi.", "嗨。")]


def test_malformed_table_rows_are_skipped_and_reported_with_line_numbers(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_bytes(
        "1\tGood.\t2\t好。\n"  # line 1
        "3\ttoo few\n"  # line 2
        "\n"  # line 3: blank, ignored
        "4\ttoo\t5\tmany\tcolumns\n".encode()  # line 4
        + b"6\tbad \xff byte\t7\t\xe5\n"  # line 5
        + "8\tFine.\t9\t很好。\n".encode()  # line 6
    )
    pairs, stats = read_all(path, "tatoeba")
    assert pairs == [("Good.", "好。"), ("Fine.", "很好。")]
    assert stats.rows == 5 and stats.malformed == 3
    where = {(m.line, m.reason.split(" ")[0]) for m in stats.examples}
    assert where == {(2, "expected"), (4, "expected"), (5, "undecodable")}
    assert all(m.path == str(path) for m in stats.examples)
    assert "found 2" in str(stats.examples[0]) and str(stats.examples[0]).startswith(f"{path}:2:")


def test_malformed_json_lines_are_skipped_and_reported(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_bytes(
        b'{"english": "Hi.", "chinese": "\xe5\x97\xa8\xe3\x80\x82"}\n'
        b"{not json}\n"
        b'{"english": "No Chinese."}\n'
        b'["a", "b"]\n'
        b'{"english": "Bad \xff", "chinese": "x"}\n'
    )
    pairs, stats = read_all(path)
    assert pairs == [("Hi.", "嗨。")]
    assert [(m.line, m.reason.split(" ")[0]) for m in stats.examples] == [
        (2, "bad"),
        (3, "missing"),
        (4, "not"),
        (5, "undecodable"),
    ]


def test_undetectable_format_is_a_user_error(tmp_path):
    path = tmp_path / "odd.txt"
    path.write_text("just one column\n")
    with pytest.raises(UserError, match="--format"):
        detect_format(path)


def test_missing_file_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="not found"):
        read_all(tmp_path / "nope.tsv")
