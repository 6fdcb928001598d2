"""The CLI as a user runs it: separate processes, exit codes, what lands on stdout/stderr."""

import json
import shutil
from pathlib import Path

import pytest
import torch
from conftest import assert_one_line_error, run_cli

CONFIG = """
[data]
inputs = ["corpus.tsv"]
dir = "prepared"
valid_size = 20
test_size = 20
src_vocab_size = 60
tgt_vocab_size = 320

[model]
encoder_layers = 1
decoder_layers = 1
d_model = 32
heads = 2
ff_dim = 64

[train]
run_dir = "run"
max_epochs = 2
max_tokens = 512
bleu_samples = 20
precision = "fp32"  # the same arithmetic on every CPU; bf16 has its own tests (test_step.py)

[decode]
precision = "fp32"  # likewise (test_precision.py)
"""


@pytest.fixture
def project(tmp_path, corpus):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "tiny.toml").write_text(CONFIG)
    return tmp_path


def test_prepare_train_translate_eval(project):
    # the default config: configs/tiny.toml; a new interpreter, as `python -m translator`
    prepared = run_cli("prepare", cwd=project, fresh=True)
    assert prepared.returncode == 0, prepared.stderr
    assert "300 rows" in prepared.stdout and "train 260 | valid 20 | test 20" in prepared.stdout

    trained = run_cli("train", cwd=project)
    assert trained.returncode == 0, trained.stderr
    assert "stopped after epoch 2" in trained.stdout
    assert "epoch 2: train loss" in trained.stderr
    assert (project / "run/checkpoints/best.pt").is_file()
    assert len((project / "run/metrics.tsv").read_text().splitlines()) == 3

    one = run_cli("translate", "Tom can see the cat.", cwd=project)
    assert one.returncode == 0, one.stderr
    assert len(one.stdout.splitlines()) == 1

    several = run_cli(
        "translate",
        "I can see the dog.",
        "-",
        cwd=project,
        stdin="We will buy the car.\n\nShe should draw the flower.\n",
    )
    assert several.returncode == 0, several.stderr
    lines = several.stdout.split("\n")[:-1]
    assert len(lines) == 4 and lines[2] == ""  # blank in, blank out, order kept

    (project / "in.txt").write_text("Mary will find the book.\nThey can buy the apple.\n")
    to_file = run_cli("translate", "--input", "in.txt", "--output", "out.txt", cwd=project)
    assert to_file.returncode == 0 and to_file.stdout == ""
    assert len((project / "out.txt").read_text().splitlines()) == 2

    scored = run_cli("eval", cwd=project)
    assert scored.returncode == 0, scored.stderr
    assert "BLEU = " in scored.stdout and "tok:zh" in scored.stdout and "chrF = " in scored.stdout
    hyps = project / "run/checkpoints/best.test.en.hyp"
    assert len(hyps.read_text().splitlines()) == 20
    assert json.loads(hyps.with_suffix(".scores.json").read_text())["sentences"] == 20

    beam = run_cli("eval", "--beam", "3", "--length-penalty", "1.0", cwd=project)
    assert beam.returncode == 0, beam.stderr
    assert (project / "run/checkpoints/best.test.en.beam3.hyp").is_file()
    beam_one = run_cli("translate", "--beam", "1", "Tom can see the cat.", cwd=project)
    assert beam_one.stdout == one.stdout

    (project / "ref.zh").write_text("我会找到书。\n他们能买苹果。\n")
    own = run_cli("eval", "--src", "in.txt", "--ref", "ref.zh", cwd=project)
    assert own.returncode == 0, own.stderr
    assert "2 sentences" in own.stdout

    again = run_cli("train", cwd=project)
    assert_one_line_error(again, "--resume", "--overwrite")
    resumed = run_cli("train", "--resume", "--set", "train.max_epochs=3", cwd=project)
    assert resumed.returncode == 0, resumed.stderr
    assert "stopped after epoch 3" in resumed.stdout


def test_the_tour_scores_exports_and_translates_one_model(project):
    """train, eval, export RUN, translate: the run's model (train.final) throughout, named
    by each command, without --checkpoint."""
    pytest.importorskip("ctranslate2")
    final = 'max_epochs = 3\nkeep_last = 2\nfinal = "average2"'
    (project / "configs" / "tiny.toml").write_text(CONFIG.replace("max_epochs = 2", final))
    assert run_cli("prepare", cwd=project).returncode == 0
    trained = run_cli("train", cwd=project)
    model = "run/checkpoints/average2.pt"
    assert f"the run's model: {model} (train.final = average2)" in trained.stdout
    scored = run_cli("eval", cwd=project)
    assert f"model: {model} (train.final = average2)" in scored.stderr
    assert (project / "run/checkpoints/average2.test.en.hyp").is_file()
    exported = run_cli("export", "run", cwd=project)
    assert exported.returncode == 0 and f"from {model}" in exported.stdout
    translated = run_cli("translate", "Tom can see the cat.", cwd=project)
    assert f"model: {model} (train.final = average2)" in translated.stderr
    assert "engine: ctranslate2" in translated.stderr and "average2.ct2" in translated.stderr
    named = run_cli("translate", "--checkpoint", "run", "Tom can see the cat.", cwd=project)
    assert named.stdout == translated.stdout and f"model: {model} (train.final" in named.stderr
    picked = run_cli("eval", "--checkpoint", "run/checkpoints/best.pt", cwd=project)
    assert "model: run/checkpoints/best.pt (a checkpoint named)" in picked.stderr


def test_malformed_rows_reported_with_line_numbers(project):
    with (project / "corpus.tsv").open("a") as f:
        f.write("1\tbroken row\n")
    result = run_cli("prepare", cwd=project)
    assert result.returncode == 0, result.stderr
    assert "1 malformed" in result.stdout
    assert "skipped corpus.tsv:301: expected 4 columns, found 2" in result.stderr


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["prepare", "--input", "missing.tsv"], ["input file not found: missing.tsv"]),
        (["prepare", "--input", "empty.tsv"], ["input file is empty"]),
        (["prepare", "--input", "useless.tsv"], ["no usable pair"]),
        (["prepare", "-c", "nope.toml"], ["config file not found: nope.toml"]),
        (["prepare", "-c", "bad.toml"], ["unknown config key 'model.layers'"]),
        (["prepare", "--set", "train.lr=fast"], ["'train.lr' must be float"]),
        (["train", "--set", "train.ema=2"], ["'train.ema' must be in [0, 1)"]),
        (["train"], ["no prepared data", "translator prepare"]),
        (["translate", "Hello."], ["no checkpoint at run/checkpoints/best.pt"]),
        (["translate"], ["no checkpoint at run/checkpoints/best.pt"]),
        (["translate", "--beam", "0", "Hi."], ["'decode.beam' must be positive"]),
        (["eval"], ["no test split"]),
        (["average", "run", "--last", "3"], ["has 0 epoch snapshots, 3 are needed"]),
        (["train", "--set", "train.final=last"], ["'train.final' must be best, ema or averageN"]),
        (["train", "--set", "train.final=average5"], ["set train.keep_last >= 5"]),
        (["train", "--set", "train.final=ema"], ["needs the moving average: set train.ema"]),
    ],
)
def test_user_errors_are_one_line_and_exit_2(project, args, fragments):
    (project / "empty.tsv").write_text("")
    (project / "useless.tsv").write_text("1\t\t2\t空。\n")
    (project / "bad.toml").write_text("[model]\nlayers = 3\n")
    assert_one_line_error(run_cli(*args, cwd=project), *fragments)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_asking_for_cuda_without_it_is_a_user_error(project):
    assert_one_line_error(
        run_cli("train", "--device", "cuda", cwd=project), "CUDA is not available"
    )


def test_the_default_config_is_found_from_any_directory_inside_the_project(project):
    """As git finds .git: configs/tiny.toml in a parent directory is used, its relative
    paths taken from that project directory, not from where the command runs."""
    deep = project / "notes" / "drafts"
    deep.mkdir(parents=True)
    result = run_cli("prepare", cwd=deep)
    assert result.returncode == 0, result.stderr
    assert (project / "prepared/stats.json").is_file()
    assert not (deep / "prepared").exists()
    # a missing run is reported at the project's path
    assert_one_line_error(run_cli("translate", "Hello.", cwd=deep), str(project / "run"))


def test_without_a_config_anywhere_the_error_says_where_it_looked(tmp_path):
    if any((parent / "configs/tiny.toml").is_file() for parent in tmp_path.parents):
        pytest.skip("a configs/tiny.toml sits above the temporary directory")
    assert_one_line_error(
        run_cli("prepare", cwd=tmp_path), "configs/tiny.toml is not in", "pass --config FILE"
    )


def test_help_lists_the_commands_in_pipeline_order_and_names_the_extras():
    from typer.testing import CliRunner

    from translator.cli import app

    runner = CliRunner()
    wide = {"COLUMNS": "200", "NO_COLOR": "1"}
    listing = runner.invoke(app, ["--help"], env=wide).output
    commands = ["download", "prepare", "train", "average", "translate", "eval", "export"]
    commands += ["serve", "plot", "info", "attention"]
    rows = [
        line.split()[1] for line in listing.splitlines() if line.startswith("│ ") and "  " in line
    ]
    assert [row for row in rows if row in commands] == commands
    for command in commands:
        text = runner.invoke(app, [command, "--help"], env=wide).output
        assert 'pip install "translator"' not in text, command  # an [extra] eaten as markup
    assert (
        'pip install "translator[plot]"' in runner.invoke(app, ["plot", "--help"], env=wide).output
    )


SMALL = [  # the tiny sample is no corpus for Transformer-base: its sizes, not its paths
    *("--set", "data.valid_size=30", "--set", "data.test_size=30"),
    *("--set", "data.src_vocab_size=600", "--set", "data.tgt_vocab_size=850"),
]
TINY_MODEL = [
    *("--set", "model.encoder_layers=1", "--set", "model.decoder_layers=1"),
    *("--set", "model.d_model=32", "--set", "model.heads=2", "--set", "model.ff_dim=64"),
    *("--set", "train.max_updates=2", "--set", "train.device='cpu'"),
]


@pytest.mark.parametrize("own", [False, True], ids=["data.inputs", "--input and --out"])
def test_base_toml_comment_commands_run_as_written_on_the_sample(tmp_path, own):
    """configs/base.toml's comment: `prepare -c configs/base.toml` (its data.inputs), or a
    corpus of one's own with `--input my.tsv --out data/prepared/base`, then `train -c
    configs/base.toml` finds what prepare wrote, and `eval` scores the run's model."""
    root = Path(__file__).resolve().parents[1]
    (tmp_path / "configs").mkdir()
    (tmp_path / "data").mkdir()
    shutil.copy(root / "configs/base.toml", tmp_path / "configs/base.toml")
    corpus = tmp_path / ("my.tsv" if own else "data/corpus-5m.tsv")
    shutil.copy(root / "data/sample/en-zh.tsv", corpus)
    given = ["--input", "my.tsv", "--out", "data/prepared/base"] if own else []
    prepared = run_cli("prepare", "-c", "configs/base.toml", *given, *SMALL, cwd=tmp_path)
    assert prepared.returncode == 0, prepared.stderr
    trained = run_cli("train", "-c", "configs/base.toml", *SMALL, *TINY_MODEL, cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr
    assert "the run's model: runs/base/checkpoints/best.pt" in trained.stdout  # < 5 epochs
    scored = run_cli("eval", "-c", "configs/base.toml", *SMALL, *TINY_MODEL, cwd=tmp_path)
    assert scored.returncode == 0 and "BLEU = " in scored.stdout, scored.stderr
