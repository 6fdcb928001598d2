"""Shared fixtures: a generated English–Chinese corpus and small configs pointing at tmp dirs."""

from __future__ import annotations

import itertools
import json
import math
import os
import random
import subprocess
from pathlib import Path

import cli_process
import pytest

from translator.config import Config, from_dict

# Under pytest-xdist (make test runs one worker per core) each worker computes on its share
# of the cores: set before PyTorch is first imported, and inherited by the CLI processes a
# test starts, so that two workers on two cores do not run four compute threads.
if WORKERS := int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0")):
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // WORKERS)))

SUBJECTS = [
    ("I", "我"),
    ("You", "你"),
    ("He", "他"),
    ("She", "她"),
    ("We", "我们"),
    ("They", "他们"),
    ("Tom", "汤姆"),
    ("Mary", "玛丽"),
]
MODALS = [("can", "能"), ("will", "会"), ("should", "应该")]
VERBS = [("see", "看见"), ("buy", "买"), ("find", "找到"), ("draw", "画")]
OBJECTS = [
    ("the cat", "猫"),
    ("the dog", "狗"),
    ("the book", "书"),
    ("the car", "车"),
    ("the apple", "苹果"),
    ("the flower", "花"),
]


def generated_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """n distinct templated pairs, e.g. ("Tom will buy the book.", "汤姆会买书。")."""
    combos = list(itertools.product(SUBJECTS, MODALS, VERBS, OBJECTS))
    random.Random(seed).shuffle(combos)
    return [
        (f"{s[0]} {m[0]} {v[0]} {o[0]}.", f"{s[1]}{m[1]}{v[1]}{o[1]}。")
        for s, m, v, o in combos[:n]
    ]


def tatoeba_rows(pairs: list[tuple[str, str]], first: int = 0) -> str:
    """Rows in the Tatoeba export layout, numbered from `first`."""
    return "".join(f"{100 + i}\t{en}\t{900 + i}\t{zh}\n" for i, (en, zh) in enumerate(pairs, first))


def write_tatoeba(path: Path, pairs: list[tuple[str, str]]) -> Path:
    path.write_text(tatoeba_rows(pairs), encoding="utf-8")
    return path


def tiny_config(tmp: Path, **sections: dict) -> Config:
    """A config small enough to train in seconds, with every path under `tmp`."""
    raw = {
        "data": {
            "inputs": [str(tmp / "corpus.tsv")],
            "dir": str(tmp / "prepared"),
            "valid_size": 20,
            "test_size": 20,
            "src_vocab_size": 60,
            "tgt_vocab_size": 320,  # 256 of them bytes (byte fallback)
        },
        "model": {
            "encoder_layers": 1,
            "decoder_layers": 1,
            "d_model": 32,
            "heads": 2,
            "ff_dim": 64,
            "dropout": 0.0,
            "max_positions": 64,
        },
        "train": {
            "run_dir": str(tmp / "run"),
            "max_epochs": 2,
            "max_tokens": 512,
            "warmup_steps": 10,
            "bleu_samples": 20,
            "log_every": 5,
            "precision": "fp32",  # the same arithmetic on every CPU; bf16 has its own tests
        },
        # decoding too: engines compared token for token; test_precision has the others
        "decode": {"precision": "fp32"},
    }
    for name, values in sections.items():
        raw[name] = {**raw.get(name, {}), **values}
    return from_dict(raw)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return write_tatoeba(tmp_path / "corpus.tsv", generated_pairs(300))


@pytest.fixture
def config(tmp_path: Path, corpus: Path) -> Config:
    """The tiny config over `corpus`, prepared (a test file's own `config` takes precedence)."""
    from translator.corpus.preparer import prepare

    prepared = tiny_config(tmp_path)
    prepare(prepared.data)
    return prepared


def run_cli(
    *args: str,
    cwd: Path,
    stdin: str | None = None,
    env: dict | None = None,
    fresh: bool = False,
) -> subprocess.CompletedProcess:
    """Run `translator ...` as a user would, in a process of its own (`env`: variables to
    add), forked from one that has imported PyTorch already (tests/cli_process.py), or with
    `fresh` from a new interpreter."""
    return cli_process.run(list(args), cwd, stdin, os.environ | (env or {}), 300, fresh)


def run_script(
    name: str, *args: str, cwd: Path, env: dict | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    """`python scripts/NAME ARGS` in `cwd`, forked as `run_cli` forks (`env`: to add); a
    study is named by its path from the project, scripts/studies/NAME."""
    root = Path(__file__).resolve().parents[1]
    script = root / name if name.startswith("scripts/") else root / "scripts" / name
    return cli_process.run(list(args), cwd, None, os.environ | (env or {}), timeout, script=script)


def assert_one_line_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def to_toml(config: dict) -> str:
    """The config as TOML (tables of strings, numbers, booleans and lists of strings)."""
    lines = []
    for section, values in config.items():
        lines.append(f"[{section}]")
        for key, value in values.items():
            if isinstance(value, float) and not math.isfinite(value):
                continue
            lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="session")
def trained(tmp_path_factory) -> Path:
    """A tiny model trained for 4 epochs (pre-norm, tied embeddings): its best.pt. Its run
    directory's parent holds corpus.tsv, prepared/ and run/, as `tiny_config` lays out."""
    from translator.corpus.preparer import prepare
    from translator.training.trainer import train

    tmp = tmp_path_factory.mktemp("trained")
    write_tatoeba(tmp / "corpus.tsv", generated_pairs(300))
    config = tiny_config(tmp, train={"max_epochs": 4})
    prepare(config.data)
    train(config, progress=False)
    return tmp / "run/checkpoints/best.pt"


def ct2_translator(directory: Path, decode_cfg: Config | None = None, threads: int = 1):
    """A Translator over a directory `translator export` wrote, decoding with `decode_cfg`
    (a DecodeConfig; default: the settings exported with the model)."""
    from translator.inference.ct2_engine import METADATA, CTranslate2Engine
    from translator.inference.text import Translator

    if decode_cfg is None:
        meta = json.loads((Path(directory) / METADATA).read_text(encoding="utf-8"))
        decode_cfg = from_dict({"decode": meta["decode"]}).decode
    engine = CTranslate2Engine.from_dir(directory, decode_cfg, threads=threads)
    return Translator(engine, decode_cfg)
