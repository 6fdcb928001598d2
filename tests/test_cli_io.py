"""Sentences in and out through the CLI: every input line gives an output line, whatever
the line ends; eval scores each English sentence once against all its references."""

import pytest
from conftest import generated_pairs, run_cli, write_tatoeba
from test_cli import CONFIG


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A tiny model trained on a corpus where 60 English sentences have two translations."""
    tmp = tmp_path_factory.mktemp("cli_io")
    pairs = generated_pairs(300)
    pairs += [(en, zh.replace("。", "吧。")) for en, zh in pairs[:60]]
    write_tatoeba(tmp / "corpus.tsv", pairs)
    (tmp / "configs").mkdir()
    (tmp / "configs" / "tiny.toml").write_text(CONFIG)
    for command in ("prepare", "train"):
        result = run_cli(command, cwd=tmp)
        assert result.returncode == 0, result.stderr
    return tmp


def test_eval_scores_each_sentence_once_against_all_its_translations(project):
    result = run_cli("eval", cwd=project)
    assert result.returncode == 0, result.stderr
    summary = result.stdout.splitlines()[-1]
    sentences, references = (int(summary.split()[i].replace(",", "")) for i in (0, 2))
    assert references > sentences  # some test sentences have two translations
    assert "nrefs:var" in result.stdout and "first reference only: BLEU = " in result.stdout
    hyps = (project / "run/checkpoints/best.test.en.hyp").read_text().splitlines()
    assert len(hyps) == sentences
    valid = run_cli("eval", "--split", "valid", cwd=project)
    assert valid.returncode == 0, valid.stderr


def test_eval_takes_several_reference_files(project):
    (project / "src.en").write_text("Tom can see the cat.\nWe will buy the car.")  # no newline
    (project / "refA.zh").write_text("汤姆能看见猫。\n我们会买车。\n")
    (project / "refB.zh").write_bytes("汤姆看得见猫。\r\n我们要买车。".encode())
    result = run_cli("eval", "--src", "src.en", "--ref", "refA.zh", "--ref", "refB.zh", cwd=project)
    assert result.returncode == 0, result.stderr
    assert "nrefs:2" in result.stdout
    assert "2 sentences, 4 references" in result.stdout


@pytest.mark.parametrize(("ending", "last"), [("\n", "\n"), ("\r\n", "\r\n"), ("\n", "")])
def test_translate_gives_a_line_for_every_input_line(project, ending, last):
    lines = ["Tom can see the cat.", "", "We will buy the car."]
    (project / "in.txt").write_bytes(("\ufeff" + ending.join(lines) + last).encode())
    to_file = run_cli("translate", "--input", "in.txt", "--output", "out.txt", cwd=project)
    assert to_file.returncode == 0, to_file.stderr
    out = (project / "out.txt").read_text(encoding="utf-8").split("\n")
    assert len(out) == 4 and out[1] == "" and out[3] == ""  # blank for blank, newline-ended
    piped = run_cli("translate", "-", cwd=project, stdin=ending.join(lines) + last)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.split("\n") == out


def test_translate_odd_input_without_crashing(project):
    odd = [
        "",
        "   \t ",
        "I love you 😀🎉",
        "你好，世界。",
        "Привет, как дела?",
        "¿Dónde está la estación?",
        " ".join(["Tom will buy the book and the car."] * 60),  # longer than 256 tokens
        "Tom can see the cat.",
    ]
    for split in ("--split", "--no-split"):
        result = run_cli("translate", split, *odd, cwd=project)
        assert result.returncode == 0, result.stderr
        out = result.stdout.split("\n")[:-1]
        assert len(out) == len(odd)
        assert out[0] == "" and out[1] == ""  # blank in, blank out
        # the long line is 60 sentences; translated whole, it is cut into pieces
        cut = "1 line longer than the model's 256 tokens: cut at clause boundaries"
        assert (cut in result.stderr) == (split == "--no-split"), result.stderr
    assert "Traceback" not in result.stderr
    assert " ⁇ " not in result.stdout and "\ufffd" not in result.stdout


def test_prepare_another_corpus_never_overwrites_the_configured_data(project):
    before = (project / "prepared" / "train.en").read_bytes()
    write_tatoeba(project / "other.tsv", generated_pairs(200, seed=5))
    result = run_cli("prepare", "--input", "other.tsv", cwd=project)
    assert result.returncode == 0, result.stderr
    assert (project / "data/prepared/other/stats.json").is_file()
    assert (project / "prepared" / "train.en").read_bytes() == before
    assert "--set data.dir='data/prepared/other'" in result.stdout
