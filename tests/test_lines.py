"""The one reader for sentence files: one sentence per input line, whatever the line ends."""

import pytest

from translator.data.lines import read_lines, split_lines
from translator.errors import UserError


@pytest.mark.parametrize(
    ("data", "lines"),
    [
        (b"a\nb", ["a", "b"]),  # no final newline: the last line is kept
        (b"a\nb\n", ["a", "b"]),  # a final newline does not add an empty line
        (b"a\r\nb\r\n", ["a", "b"]),  # Windows
        (b"a\r\nb\nc", ["a", "b", "c"]),  # mixed
        (b"\xef\xbb\xbfa\nb\n", ["a", "b"]),  # a byte-order mark at the start
        (b"a\n\nb\n\n", ["a", "", "b", ""]),  # blank lines are sentences too
        (b"\n", [""]),
        (b"", []),
        ("a\x0bb\x1cc\u2028d\x85e\n".encode(), ["a\x0bb\x1cc\u2028d\x85e"]),  # not line ends
        (b"a\rb\n", ["a\rb"]),  # a lone carriage return is inside the line
    ],
)
def test_one_line_per_input_line(data, lines):
    assert split_lines(data, "test") == lines


def test_invalid_utf8_names_the_line(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"fine\nbad \xff here\n")
    with pytest.raises(UserError, match=r"in.txt: line 2 is not valid UTF-8"):
        read_lines(path)


def test_missing_file(tmp_path):
    with pytest.raises(UserError, match="file not found"):
        read_lines(tmp_path / "nope.txt")
