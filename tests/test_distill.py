"""translator distill: a teacher's translations of train as a prepared directory, held out by
construction, filtered and counted, resumable after a kill with the same files."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import (
    assert_one_line_error,
    generated_pairs,
    run_cli,
    run_script,
    tiny_config,
    write_tatoeba,
)

from translator.config import DataConfig, from_dict
from translator.corpus.preparer import prepare
from translator.data.dataset import load_training_data, train_corpora
from translator.data.ids import up_to_date
from translator.data.layout import read_split, split_file
from translator.distill import distiller
from translator.distill.distiller import Distilled, distill
from translator.distill.filters import filter_outputs
from translator.distill.selection import not_shorter
from translator.errors import UserError
from translator.inference.hypothesis import Hypothesis
from translator.model.checkpoint import load as load_checkpoint


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A teacher that has learnt the generated corpus (d_model 64, 15 epochs, about a
    second): its best.pt, beside corpus.tsv and prepared/ as `tiny_config` lays out."""
    from translator.training.trainer import train

    tmp = tmp_path_factory.mktemp("teacher")
    write_tatoeba(tmp / "corpus.tsv", generated_pairs(300))
    config = tiny_config(
        tmp,
        model={"d_model": 64, "ff_dim": 128},
        train={"max_epochs": 15, "lr": 3e-3, "warmup_steps": 20},
    )
    prepare(config.data)
    train(config, progress=False)
    return tmp / "run/checkpoints/best.pt"


def teacher_config(trained: Path, **data) -> object:
    """The config the fixture's teacher trained with (its data), decoding with beam 2 (the
    teacher's, distill.beam, too)."""
    config = from_dict(load_checkpoint(trained)["config"])
    decode = dataclasses.replace(config.decode, beam=2, split=False, batch_size=16)
    data_cfg = dataclasses.replace(config.data, **data)
    teaching = dataclasses.replace(config.distill, beam=2)
    return dataclasses.replace(config, decode=decode, data=data_cfg, distill=teaching)


def distilled(config, teacher: Path, out: Path, resume: bool = False, **settings) -> Distilled:
    """`distill` with distill.teacher, distill.out and `settings` in the config, checked as
    the loader checks a config."""
    more = {"teacher": str(teacher), "out": str(out), **settings}
    config = dataclasses.replace(config, distill=dataclasses.replace(config.distill, **more))
    return distill(from_dict(config.to_dict()), resume=resume, progress=False)


def files_of(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def test_distilled_directory_keeps_held_out_splits_and_train_english(trained, tmp_path):
    config = teacher_config(trained)
    data, out = Path(config.data.dir), tmp_path / "distilled"
    result = distilled(config, trained, out, shard_size=64)

    for name in ["valid.en", "valid.zh", "test.en", "test.zh", "spm.en.model", "spm.zh.model"]:
        assert (out / name).read_bytes() == (data / name).read_bytes(), name
    original_en = read_split(data, "train")[0]
    en, zh = read_split(out, "train")
    made = result.stats["distilled"]
    assert made["translated"] == len(original_en)
    assert made["kept"] + sum(made["dropped"].values()) == made["translated"]
    assert len(en) == made["kept"] > 0
    kept = iter(original_en)
    assert all(any(line == o for o in kept) for line in en)  # the same English, in order
    held_out = set(read_split(data, "valid")[0]) | set(read_split(data, "test")[0])
    assert not held_out & set(en)
    assert up_to_date(out)
    splits = result.stats["splits"]
    assert splits == {
        "train": len(en),
        "valid": len(read_split(data, "valid")[0]),
        "test": len(read_split(data, "test")[0]),
    }
    assert made["held_out_check"]["checked"] is True
    assert made["decode"]["beam"] == 2 and made["teacher"]["sha256"]


def test_data_prepared_with_a_models_tokenizers_distills(trained, tmp_path):
    """`prepare --tokenizers-from` writes the tokenizers' models without their .vocab
    listings: distill copies what there is."""
    import shutil

    data = tmp_path / "data"
    shutil.copytree(teacher_config(trained).data.dir, data)
    for lang in ("en", "zh"):
        (data / f"spm.{lang}.vocab").unlink()
    out = tmp_path / "distilled"
    distilled(teacher_config(trained, dir=str(data)), trained, out)
    assert (out / "spm.zh.model").read_bytes() == (data / "spm.zh.model").read_bytes()
    assert not (out / "spm.zh.vocab").exists() and up_to_date(out)


def test_the_teacher_writes_train_targets_as_it_translates(trained, tmp_path):
    from translator.inference.text import Translator

    config = teacher_config(trained)
    out = tmp_path / "distilled"
    distilled(config, trained, out, shard_size=1000)
    en, zh = read_split(out, "train")
    teacher = Translator.from_checkpoint(trained, "cpu", config.decode)
    assert zh[:40] == teacher.translate(en[:40])


class Killed(Exception):
    pass


def test_resume_after_a_kill_writes_the_same_files(trained, tmp_path, monkeypatch):
    config = teacher_config(trained)
    whole = tmp_path / "whole"
    first = distilled(config, trained, whole, shard_size=50)
    lines = first.stats["distilled"]["translated"]
    assert first.shards_translated == -(-lines // 50) == 6

    real = distiller.translate_shards
    calls = []

    def killed_in_the_third_shard(translate, *args, **kwargs):
        def dying(lines, human):
            calls.append(len(lines))
            if len(calls) == 3:
                raise Killed
            return translate(lines, human)

        return real(dying, *args, **kwargs)

    stopped = tmp_path / "stopped"
    monkeypatch.setattr(distiller, "translate_shards", killed_in_the_third_shard)
    with pytest.raises(Killed):
        distilled(config, trained, stopped, shard_size=50)
    monkeypatch.setattr(distiller, "translate_shards", real)
    work = stopped / ".distill"
    assert sorted(p.name for p in work.glob("shard-*")) == ["shard-000000.zh", "shard-000001.zh"]
    assert not (stopped / "stats.json").exists()
    (work / ".shard-000002.zh.x1.tmp").write_text("half a shard\n")  # killed mid-write

    with pytest.raises(UserError, match="--resume continues it"):
        distilled(config, trained, stopped, shard_size=50)
    resumed = distilled(config, trained, stopped, shard_size=50, resume=True)
    assert resumed.shards_translated == 4
    assert files_of(stopped) == files_of(whole)
    for k in range(6):
        name = f"shard-{k:06d}.zh"
        assert (work / name).read_bytes() == (whole / ".distill" / name).read_bytes()


def test_resume_refuses_other_settings(trained, tmp_path):
    config = teacher_config(trained)
    out = tmp_path / "distilled"
    distilled(config, trained, out, shard_size=100)
    with pytest.raises(UserError, match="shard_size differ"):
        distilled(config, trained, out, shard_size=50, resume=True)
    with pytest.raises(UserError, match="decode differ"):
        distilled(config, trained, out, shard_size=100, beam=3, resume=True)


def test_filters_drop_and_count_each_reason():
    data_cfg = DataConfig(max_chars=30, min_length_ratio=0.5, max_length_ratio=9.0)
    rows = [
        ("Tom is here.", "汤姆在这里。", None),
        ("Tom is here.", "", "empty"),
        ("I like it.", "我很喜欢我很喜欢我很喜欢", "loop"),
        ("Ha!", "哈哈！", None),  # a short repeat is not a loop
        ("It is a very long sentence indeed.", "这是一个很长的句子。", "too_long"),
        ("Yes.", "是的是的，我是说是这样的，对的。", "bad_length_ratio"),
        ("Go.", "這", None),  # traditional made simplified first; ratio 3
    ]
    en, zh, reasons = zip(*rows, strict=True)
    pairs, keep, counts = filter_outputs(pd.Series(en), pd.Series(zh), data_cfg)
    assert keep.tolist() == [r is None for r in reasons]
    assert counts == {"empty": 1, "loop": 1, "too_long": 1, "bad_length_ratio": 1}
    assert pairs["zh"].iloc[6] == "这"


def test_keep_original_mixes_the_human_pairs_back_in_with_their_weight(trained, tmp_path):
    config = teacher_config(trained)
    data, out = Path(config.data.dir), tmp_path / "distilled"
    result = distilled(config, trained, out, shard_size=100, keep_original=0.5)
    made = result.stats["distilled"]
    en, zh = read_split(out, "train")
    original = read_split(data, "train")
    assert made["original_pairs"] == len(original[0])
    assert (en[made["kept"] :], zh[made["kept"] :]) == original
    corpus, weights = train_corpora(config, out)
    assert weights == [1.0, 0.5]
    assert np.asarray(corpus).tolist() == [0] * made["kept"] + [1] * len(original[0])


def teacher_2best_with_human(trained: Path, tmp_path: Path, human_of) -> tuple:
    """A copy of the fixture's data whose train Chinese is `human_of(i, two_best, human)`
    for line i, and the teacher's 2-best of its English: (config, english, 2-best, human)."""
    import shutil

    from translator.inference.text import Translator

    data = tmp_path / "data"
    shutil.copytree(teacher_config(trained).data.dir, data)
    config = teacher_config(trained, dir=str(data), max_length_ratio=100.0, min_length_ratio=0.0)
    english, human = read_split(data, "train")
    teacher = Translator.from_checkpoint(trained, "cpu", config.decode)
    found = teacher.translate(english, nbest=2)
    human = [human_of(i, h, ref) for i, (h, ref) in enumerate(zip(found, human, strict=True))]
    split_file(data, "train", "zh").write_text("".join(f"{line}\n" for line in human))
    return config, english, found, human


def assert_train_is(out: Path, english: list[str], expected: list[str]) -> None:
    """OUT's train pairs are the English with the expected targets, the empty ones dropped."""
    en, zh = read_split(out, "train")
    assert list(zip(en, zh, strict=True)) == [
        (e, x) for e, x in zip(english, expected, strict=True) if x
    ]


def test_not_shorter_takes_the_teachers_best_as_long_as_the_human_translation():
    found = [
        Hypothesis("汤姆。", -0.1),
        Hypothesis("汤姆在 这里。", -0.5),
        Hypothesis("汤姆在这里吗？", -0.9),
    ]
    # 6 characters, the space not counted
    assert not_shorter(found, "他在这里。") == "汤姆在 这里。"
    assert not_shorter(found, "你好") == "汤姆。"  # the best is long enough
    assert not_shorter(found, "汤姆今天不在这里吗？") == "汤姆在这里吗？"  # none is: the longest
    tied = [Hypothesis("汤姆。", -0.1), Hypothesis("他好。", -0.2)]
    assert not_shorter(tied, "汤姆在这里。") == "汤姆。"  # the first of the longest
    assert not_shorter([], "汤姆在这里。") == ""


def test_nbest_gives_each_line_its_first_hypothesis_as_long_as_the_human(trained, tmp_path):
    """Human translations as long as the teacher's second best on odd lines, where that one
    is longer than its best: those lines must get the second best, the others the best.
    --resume checks nbest, and refuses a directory an earlier version distilled by chrF (its
    manifest names no select) while one distilled with select "length" resumes."""
    config, english, found, human = teacher_2best_with_human(
        trained, tmp_path, lambda i, h, ref: "人" * (len(h[1].text) if i % 2 and len(h) > 1 else 1)
    )
    out = tmp_path / "distilled"
    result = distilled(config, trained, out, nbest=2)
    made = result.stats["distilled"]
    assert (made["nbest"], made["select"]) == (2, "length")
    expected = [not_shorter(h, ref) for h, ref in zip(found, human, strict=True)]
    assert sum(x != h[0].text for x, h in zip(expected, found, strict=True)) > 0
    assert_train_is(out, english, expected)
    with pytest.raises(UserError, match="nbest, select differ"):
        distilled(config, trained, out, nbest=1, resume=True)
    manifest = out / ".distill/manifest.json"
    recorded = json.loads(manifest.read_text(encoding="utf-8"))
    assert recorded["select"] == "length"  # as an earlier version's --select length wrote it
    assert distilled(config, trained, out, nbest=2, resume=True).shards_translated == 0
    del recorded["select"]  # an earlier version's chrF selection
    manifest.write_text(json.dumps(recorded), encoding="utf-8")
    with pytest.raises(UserError, match="select differ"):
        distilled(config, trained, out, nbest=2, resume=True)
    with pytest.raises(UserError, match=r"distill.nbest \(3\) must be at most distill.beam"):
        distilled(config, trained, tmp_path / "x", nbest=3)


def test_a_student_trains_on_the_distilled_directory(trained, tmp_path):
    from translator.training.trainer import train

    out = tmp_path / "distilled"
    distilled(teacher_config(trained), trained, out)
    student = tiny_config(
        tmp_path,
        data={"dir": str(out)},
        model={"encoder_layers": 2, "decoder_layers": 1},
        train={"max_epochs": 1},
    )
    assert load_training_data(student).train_pairs == len(read_split(out, "train")[0])
    result = train(student, progress=False)
    assert result.state.step > 0 and (tmp_path / "run/checkpoints/best.pt").is_file()


def test_a_teacher_that_trained_on_held_out_sentences_is_refused(trained, tmp_path):
    config = teacher_config(trained)
    other_split = dataclasses.replace(config.data, dir=str(tmp_path / "seed2"), seed=2)
    prepare(other_split)  # the same corpus split another way: its test was the teacher's train
    with pytest.raises(UserError, match="the teacher trained on"):
        distilled(dataclasses.replace(config, data=other_split), trained, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_cli_distills_and_fails_in_one_line(trained, tmp_path):
    config = teacher_config(trained)
    (tmp_path / "teacher.toml").write_text(
        f'[data]\ndir = "{config.data.dir}"\n[train]\ndevice = "cpu"\n', encoding="utf-8"
    )
    args = ["distill", "-c", "teacher.toml", "--teacher", str(trained.parent.parent)]
    done = run_cli(*args, "--out", "made", "--beam", "1", "--shard-size", "100", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = len(read_split(config.data.dir, "train")[0])
    assert f"translated {lines} train sentences (3 shards" in done.stdout
    assert "sent/s" in done.stderr
    assert split_file(tmp_path / "made", "train", "zh").is_file()

    again = run_cli(*args, "--out", "made", cwd=tmp_path)
    assert_one_line_error(again, "made exists", "--resume")
    bad = run_cli(*args, "--out", "x", "--engine", "marian", cwd=tmp_path)
    assert_one_line_error(bad, "decode.engine = 'marian': there is no such engine (there are: auto")
    missing = run_cli(*args, "--out", "y", "--data", "nowhere", cwd=tmp_path)
    assert_one_line_error(missing, "no prepared data in nowhere")
    select = run_cli(*args, "--out", "z", "--nbest", "5", "--select", "chrf", cwd=tmp_path)
    assert_one_line_error(select, "config key 'distill.select' was removed", "chrF")


def test_ctranslate2_teacher(trained, tmp_path):
    pytest.importorskip("ctranslate2")
    from translator.deploy.export import export

    model_dir = tmp_path / "ct2"
    export(trained, model_dir)
    config = teacher_config(trained)
    exported = {"engine": "ctranslate2", "model_dir": str(model_dir)}  # as --engine ct2 sets it
    ct2 = dataclasses.replace(config, decode=dataclasses.replace(config.decode, **exported))
    torch_made = distilled(config, trained, tmp_path / "torch", beam=1)
    ct2_made = distilled(ct2, model_dir, tmp_path / "ct2-made", beam=1)
    assert ct2_made.stats["distilled"]["held_out_check"]["checked"] is True
    ours = read_split(tmp_path / "torch", "train")[1]
    theirs = read_split(tmp_path / "ct2-made", "train")[1]
    same = sum(a == b for a, b in zip(ours, theirs, strict=False))
    assert torch_made.stats["distilled"]["kept"] > 0 and same >= 0.9 * len(ours)


def script_on_tiny_teacher(trained: Path, tmp_path: Path, script: str, *args: str):
    """scripts/SCRIPT run from tmp_path with a config of the fixture teacher's data and
    model; its standard output, after checking that it succeeded."""

    config = teacher_config(trained)
    toml = tmp_path / "teacher.toml"
    toml.write_text(
        f'[data]\ndir = "{config.data.dir}"\n[model]\nd_model = 64\nff_dim = 128\n'
        f"encoder_layers = 1\ndecoder_layers = 1\nheads = 2\nmax_positions = 64\n"
        f'[train]\nmax_tokens = 512\nrun_dir = "{tmp_path / "run"}"\n',
        encoding="utf-8",
    )
    ran = run_script(script, "-c", str(toml), *map(str, args), cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr[-2000:]
    return ran.stdout


def test_distill_table_runs_on_the_tiny_teacher(trained, tmp_path):
    out = script_on_tiny_teacher(
        trained, tmp_path, "scripts/studies/distill.py", f"t={trained}", "--repeats", "1"
    )
    row = out.strip().splitlines()[-1].split(" | ")
    assert (
        row[0] == "| t" and float(row[3]) > 50 and row[7] != "nan"
    )  # BLEU beam 5 of a teacher that learnt
