"""`translator translate` without sentences: stdin streamed, a prompt on a terminal."""

import os
import pty
import subprocess
import sys
import threading

import pytest
from conftest import tiny_config, to_toml

from translator.errors import UserError
from translator.inference.stream import arriving_batches, decoded_lines, prompt_loop

SENTENCES = ["i have a cat .", "where is the big station ?", "", "he goes with her ."]


def test_batches_follow_arrival_and_keep_order():
    gate = threading.Event()

    def slow():
        yield "a"
        assert gate.wait(10)  # the second line comes only after the first batch was taken
        yield from ["b", "c", "d"]

    batches = arriving_batches(slow(), limit=2)
    assert next(batches) == ["a"]
    gate.set()
    rest = list(batches)
    assert sum(rest, []) == ["b", "c", "d"] and all(len(b) <= 2 for b in rest)
    assert list(arriving_batches(iter([]), 4)) == []


def test_stdin_lines_are_decoded_like_files():
    import io

    data = b"\xef\xbb\xbfone\r\ntwo\n\nthree"
    assert list(decoded_lines(io.BytesIO(data))) == ["one", "two", "", "three"]
    with pytest.raises(UserError, match="stdin: line 2 is not valid UTF-8"):
        list(decoded_lines(io.BytesIO(b"fine\n\xff\n")))


def test_prompt_loop_answers_each_line_until_end_of_input():
    asked, said = iter(["hello .", "bye ."]), []

    def ask(prompt):
        said.append(prompt)
        try:
            return next(asked)
        except StopIteration:
            raise EOFError from None

    prompt_loop(lambda lines: [line.upper() for line in lines], ask, lambda *a: said.append(a))
    assert said[1:] == ["en> ", ("HELLO .",), "en> ", ("BYE .",), "en> ", ()]


@pytest.fixture
def cli_config(trained, tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(to_toml(tiny_config(trained.parents[2]).to_dict()))
    return path


def expected(trained):
    from translator import Translator

    return Translator.from_checkpoint(trained, "cpu").translate(SENTENCES)


def test_piped_stdin_is_translated_before_it_ends(trained, cli_config):
    """The first line's translation is read while stdin is still open; the rest follow."""
    process = subprocess.Popen(
        [sys.executable, "-m", "translator", "translate", "-c", str(cli_config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        process.stdin.write(SENTENCES[0] + "\n")
        process.stdin.flush()
        got: list[str] = []  # read in a thread, so that a decoder that waits for the
        reader = threading.Thread(target=lambda: got.append(process.stdout.readline()))
        reader.start()  # end of stdin fails this test instead of hanging it
        reader.join(60)
        assert got, "no translation while stdin was open"
        first = got[0]
        process.stdin.write("".join(s + "\n" for s in SENTENCES[1:]))
        process.stdin.close()
        rest = process.stdout.read().splitlines()
        assert process.wait(timeout=60) == 0, process.stderr.read()
    finally:
        process.kill()
    assert [first.rstrip("\n"), *rest] == expected(trained)


def test_a_terminal_gets_a_prompt_and_ctrl_d_quits(trained, cli_config):
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "translator", "translate", "-c", str(cli_config)],
        stdin=terminal,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        os.write(controller, (SENTENCES[0] + "\n").encode())
        os.write(controller, b"\x04")  # Ctrl-D at the start of a line: end of input
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
        os.close(controller)
        os.close(terminal)
    assert process.returncode == 0, err
    assert "Ctrl-D to quit" in out and "en> " in out
    assert expected(trained)[0] in out
