"""scripts/leakage.py finds references of held-out splits among the training targets, and
its lookup baseline copies them: it must see a planted leak, and none in a real split."""

import subprocess
import sys
from pathlib import Path

from conftest import tiny_config, write_tatoeba
from test_split import tempting_pairs

from translator.corpus.preparer import prepare
from translator.data.layout import split_file
from translator.data.lines import write_lines

LEAKAGE = Path(__file__).resolve().parents[1] / "scripts" / "leakage.py"


def run(*dirs: Path) -> str:
    result = subprocess.run(
        [sys.executable, str(LEAKAGE), *map(str, dirs)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_a_planted_leak_is_found_and_copied(tmp_path):
    splits = {
        "train": [("I know Tom is worried.", "我知道汤姆很担心。"), ("It rains.", "下雨了。")],
        "valid": [("It is raining.", "下雨了。")],
        "test": [("I know that Tom is worried.", "我知道汤姆很担心。"), ("Hi.", "嗨。")],
    }
    for name, pairs in splits.items():
        for side, lang in enumerate(("en", "zh")):
            write_lines(split_file(tmp_path, name, lang), [p[side] for p in pairs])
    out = run(tmp_path)
    assert (
        "valid: 1 references of 1 English sentences; references found verbatim among "
        "training targets: 1 (100.0%)" in out
    )
    assert (
        "test: 2 references of 2 English sentences; references found verbatim among "
        "training targets: 1 (50.0%)" in out
    )
    assert "100.0 on the 1 leaked" in out  # the lookup copies the leaked reference


def test_a_prepared_split_has_nothing_to_find(tmp_path):
    write_tatoeba(tmp_path / "corpus.tsv", tempting_pairs(150))
    config = tiny_config(tmp_path, data={"valid_size": 60, "test_size": 80}).data
    config.max_length_ratio = 20.0
    prepare(config)
    out = run(Path(config.dir))
    assert out.count("training targets: 0 (0.0%); English found in train: 0 exactly, 0 ") == 2


def test_a_directory_without_a_split_is_one_error_line(tmp_path):
    result = subprocess.run(
        [sys.executable, str(LEAKAGE), str(tmp_path)], capture_output=True, text=True
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: {tmp_path} holds no prepared split (train.en); "
        "run `translator prepare` for it first"
    ]
