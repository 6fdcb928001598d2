"""scripts/make_corpus.py writes what it says it planted, in the Tatoeba layout, the same
bytes for the same seed: `prepare` must count exactly the malformed rows of each kind, the
duplicates and the traditional lines it planted."""

import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from conftest import generated_pairs, tiny_config, write_tatoeba

from translator.corpus.preparer import prepare

MAKE_CORPUS = Path(__file__).resolve().parents[1] / "scripts" / "make_corpus.py"
RATES = ["--traditional", "0.05", "--duplicates", "0.03", "--malformed", "0.02"]


def make(source: Path, out: Path, n: int, *options: str) -> dict[str, int]:
    result = subprocess.run(
        [sys.executable, str(MAKE_CORPUS), str(n), str(out), "--source", str(source), *options],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    planted = result.stdout.strip().split("planted: ")[1]
    return {
        name: int(count.replace(",", ""))
        for name, count in re.findall(r"([a-z ]+?) ([\d,]+)(?:, |$)", planted)
    }


def test_prepare_counts_what_was_planted(tmp_path):
    source = write_tatoeba(tmp_path / "source.tsv", generated_pairs(576))
    planted = make(source, tmp_path / "corpus.tsv", 3000, *RATES)
    kinds = ("wrong column count", "id not a number", "control characters", "undecodable")
    assert all(planted[kind] > 0 for kind in kinds), planted
    config = tiny_config(tmp_path).data
    prepare(config)
    stats = json.loads((Path(config.dir) / "stats.json").read_text())
    assert stats["rows_read"] == 3000
    assert stats["malformed_by_kind"] == {kind: planted[kind] for kind in kinds}
    assert stats["traditional_converted"] == planted["traditional"] > 0
    # 3,000 draws from 576² joined pairs also repeat by chance, about 14 times
    assert planted["duplicates"] <= stats["duplicates"] <= planted["duplicates"] + 40
    assert stats["filtered"] == 0


def test_the_same_seed_writes_the_same_bytes(tmp_path):
    source = write_tatoeba(tmp_path / "source.tsv", generated_pairs(100))
    runs = [(tmp_path / f"{name}.tsv", seed) for name, seed in (("a", 0), ("b", 0), ("c", 1))]
    for out, seed in runs:
        make(source, out, 500, "--seed", str(seed), *RATES)
    a, b, c = (out.read_bytes() for out, _ in runs)
    assert a == b != c
    assert len(a.splitlines()) == 500


def test_a_source_without_usable_pairs_is_one_error_line(tmp_path):
    for name, content in (("prose.md", "# Not a corpus\n"), ("bad.tsv", "x1\tHi.\t2\t嗨。\n")):
        (tmp_path / name).write_text(content, encoding="utf-8")
        result = subprocess.run(
            [
                sys.executable,
                str(MAKE_CORPUS),
                "5",
                str(tmp_path / "out.tsv"),
                "--source",
                str(tmp_path / name),
            ],
            capture_output=True,
            text=True,
        )
        assert result.returncode == 2
        assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("error: ")


def test_the_moses_layout_holds_the_same_pairs_and_prepare_counts_its_planted_rows(tmp_path):
    source = write_tatoeba(tmp_path / "source.tsv", generated_pairs(576))
    planted = make(source, tmp_path / "pair", 3000, *RATES, "--out-format", "moses")
    assert set(planted) == {"control characters", "undecodable", "traditional", "duplicates"}
    config = tiny_config(tmp_path).data
    en, zh = tmp_path / "pair.en", tmp_path / "pair.zh"
    moses = prepare(replace(config, inputs=[{"src": str(en), "tgt": str(zh)}])).stats
    assert moses["rows_read"] == 3000
    assert moses["malformed_by_kind"] == {
        kind: planted[kind] for kind in ("control characters", "undecodable")
    }
    assert moses["traditional_converted"] == planted["traditional"]
    tsv = tmp_path / "corpus.tsv"
    make(source, tsv, 3000, *RATES)
    rows = [line.split(b"\t") for line in tsv.read_bytes().splitlines()]
    same = [i for i, r in enumerate(rows) if len(r) == 4 and r[0].isdigit()]
    en_lines, zh_lines = en.read_bytes().splitlines(), zh.read_bytes().splitlines()
    assert all(en_lines[i] == rows[i][1] for i in same)  # the same draws, row for row
    assert sum(zh_lines[i] == rows[i][3] for i in same) >= len(same) - 100
