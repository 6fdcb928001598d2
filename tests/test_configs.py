"""Every config shipped in configs/ loads, and its model can be built and run; every rule
of the config is one line that names its key."""

import re
import shlex
from pathlib import Path

import pytest
import torch

from translator.config import REMOVED, DecodeConfig, from_dict, load
from translator.data.batching import padding_mask
from translator.errors import UserError
from translator.model.transformer import Transformer
from translator.training.resume import LAYERS, deeper_layers, model_differences

CONFIGS = sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.toml"))


def test_the_documented_configs_are_shipped():
    assert {p.name for p in CONFIGS} >= {"tiny.toml", "tatoeba-cpu.toml", "tatoeba-gpu.toml"}


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_config_loads_and_builds_a_working_model(path):
    config = load(path)
    assert config.data.inputs, "a shipped config names its corpus"
    model = Transformer(config.model, config.data.src_vocab_size, config.data.tgt_vocab_size)
    src = torch.randint(4, 50, (2, 7))
    tgt = torch.randint(4, 50, (2, 5))
    logits = model(src, tgt, padding_mask(src))
    assert logits.shape == (2, 5, config.data.tgt_vocab_size)


SPLIT_KEYS = (  # the data settings that decide which pairs are held out
    "inputs exclude format max_chars min_length_ratio max_length_ratio valid_size test_size seed"
)


def test_the_tatoeba_configs_hold_out_the_same_test_split():
    """Their figures are compared with each other in docs/quality.md: every data setting
    that decides which pairs are held out must agree."""
    names = {"tatoeba-cpu.toml", "tatoeba-cpu-60.toml", "tatoeba-gpu.toml", "student-cpu.toml"}
    tatoeba = [load(p).data for p in CONFIGS if p.name in names]
    assert len(tatoeba) == len(names)
    for key in SPLIT_KEYS.split():
        assert len({repr(getattr(d, key)) for d in tatoeba}) == 1, key


def test_the_student_config_shrinks_the_teacher_config():
    """configs/student-cpu.toml starts from tatoeba-cpu-60.toml's run, its model the moving
    average, with train.init_layers spread: its model must be the teacher's but for fewer
    layers, and its vocabularies the teacher's; distill's teacher is that run too."""
    by_name = {p.name: load(p) for p in CONFIGS}
    student, teacher = by_name["student-cpu.toml"], by_name["tatoeba-cpu-60.toml"]
    assert student.train.init_layers == "spread" and teacher.train.final == "ema"
    assert Path(student.train.init_from) == Path(teacher.train.run_dir)
    assert Path(teacher.distill.teacher) == Path(teacher.train.run_dir)
    assert model_differences(teacher, student, keys=LAYERS) == []
    assert deeper_layers(teacher, student) == []
    for side in ("src_vocab_size", "tgt_vocab_size"):
        assert getattr(student.data, side) == getattr(teacher.data, side), side


# Every rule of the config broken once, with the line the user reads (each was recorded
# from the checks as they stood before the rules moved beside their keys: word for word)
RULES = [
    (
        {"model": {"d_model": 250, "heads": 4}},
        "model.d_model (250) must be divisible by model.heads (4)",
    ),
    ({"model": {"d_model": 0}}, "config key 'model.d_model' must be positive, got 0"),
    ({"model": {"heads": -1}}, "config key 'model.heads' must be positive, got -1"),
    ({"model": {"ff_dim": 0}}, "config key 'model.ff_dim' must be positive, got 0"),
    ({"model": {"max_positions": 0}}, "config key 'model.max_positions' must be positive, got 0"),
    ({"train": {"max_tokens": 0}}, "config key 'train.max_tokens' must be positive, got 0"),
    ({"train": {"lr": 0.0}}, "config key 'train.lr' must be positive, got 0.0"),
    ({"decode": {"batch_size": 0}}, "config key 'decode.batch_size' must be positive, got 0"),
    ({"decode": {"beam": 0}}, "config key 'decode.beam' must be positive, got 0"),
    (
        {"decode": {"workers": -1}},
        "config key 'decode.workers' must be >= 0 (0: one translator per core)",
    ),
    ({"serve": {"max_sentences": 0}}, "config key 'serve.max_sentences' must be positive, got 0"),
    ({"serve": {"max_chars": 0}}, "config key 'serve.max_chars' must be positive, got 0"),
    (
        {"serve": {"max_document_chars": 0}},
        "config key 'serve.max_document_chars' must be positive, got 0",
    ),
    ({"serve": {"max_beam": 0}}, "config key 'serve.max_beam' must be positive, got 0"),
    ({"serve": {"max_queue": 0}}, "config key 'serve.max_queue' must be positive, got 0"),
    ({"serve": {"max_body_kb": 0}}, "config key 'serve.max_body_kb' must be positive, got 0"),
    (
        {"serve": {"read_timeout_s": 0.0}},
        "config key 'serve.read_timeout_s' must be positive, got 0.0",
    ),
    (
        {"serve": {"request_timeout_s": -1.0}},
        "config key 'serve.request_timeout_s' must be positive, got -1.0",
    ),
    ({"data": {"src_vocab_size": 0}}, "config key 'data.src_vocab_size' must be positive, got 0"),
    ({"data": {"tgt_vocab_size": 0}}, "config key 'data.tgt_vocab_size' must be positive, got 0"),
    (
        {"data": {"tokenizer_sentences": 0}},
        "config key 'data.tokenizer_sentences' must be positive, got 0",
    ),
    ({"train": {"update_freq": 0}}, "config key 'train.update_freq' must be positive, got 0"),
    ({"train": {"log_every": 0}}, "config key 'train.log_every' must be positive, got 0"),
    (
        {"train": {"save_every": -1}},
        "config key 'train.save_every' must be >= 0 (0: at epoch ends only)",
    ),
    ({"data": {"workers": -1}}, "config key 'data.workers' must be >= 0 (0: every core)"),
    ({"serve": {"port": 70000}}, "config key 'serve.port' must be from 0 to 65535"),
    ({"serve": {"batch_wait_ms": -1.0}}, "config key 'serve.batch_wait_ms' must be >= 0"),
    (
        {"decode": {"threads": -1}},
        "config key 'decode.threads' must be >= 0 (0: the engine's default)",
    ),
    (
        {"decode": {"length_penalty": -1.0}},
        "config key 'decode.length_penalty' must be >= 0, got -1.0",
    ),
    (
        {"decode": {"nbest": -1}},
        "config key 'decode.nbest' must be >= 0 (0: one translation a line, as text), got -1",
    ),
    (
        {"decode": {"no_repeat_ngram": -1}},
        "config key 'decode.no_repeat_ngram' must be >= 0 (0: off), got -1",
    ),
    ({"decode": {"topk": -1}}, "config key 'decode.topk' must be >= 0 (0: all tokens), got -1"),
    ({"decode": {"topp": 0.0}}, "config key 'decode.topp' must be in (0, 1], got 0.0"),
    (
        {"decode": {"temperature": -1.0}},
        "config key 'decode.temperature' must be >= 0 (0: greedy), got -1.0",
    ),
    (
        {"decode": {"nbest": 3, "beam": 2}},
        (
            "decode.nbest (3) must be at most decode.beam (2): the search keeps only that "
            "many hypotheses (or sample with decode.sample)"
        ),
    ),
    ({"model": {"dropout": 1.0}}, "config key 'model.dropout' must be in [0, 1)"),
    (
        {"model": {"attention_dropout": 1.0}},
        "config key 'model.attention_dropout' must be in [0, 1), or -1 for model.dropout",
    ),
    (
        {"train": {"pad_to_multiple": -1}},
        "config key 'train.pad_to_multiple' must be >= 0 (0: automatic, 1: off)",
    ),
    (
        {"train": {"precision": "fp16"}},
        "config key 'train.precision' must be one of auto, fp32, bf16, got 'fp16'",
    ),
    ({"train": {"label_smoothing": 1.0}}, "config key 'train.label_smoothing' must be in [0, 1)"),
    ({"train": {"ema": 1.0}}, "config key 'train.ema' must be in [0, 1) (0: off), e.g. 0.999"),
    (
        {"data": {"subword_sampling": -1}},
        "config key 'data.subword_sampling' must be >= 0 (0: off)",
    ),
    (
        {"data": {"subword_alpha": 0.0}},
        "config key 'data.subword_alpha' must be in (0, 1), e.g. 0.1",
    ),
    (
        {"data": {"format": "csv"}},
        "config key 'data.format' must be one of auto, tatoeba, anki, jsonl, tmx, got 'csv'",
    ),
    ({"data": {"format": 5}}, "config key 'data.format' must be str, got 5"),
    (
        {"data": {"subword_sides": "left"}},
        "config key 'data.subword_sides' must be one of both, src, tgt, got 'left'",
    ),
    (
        {"train": {"plateau_metric": "chrf"}},
        "config key 'train.plateau_metric' must be one of loss, bleu, got 'chrf'",
    ),
    (
        {"model": {"norm": "sandwich"}},
        "config key 'model.norm' must be one of pre, post, got 'sandwich'",
    ),
    ({"train": {"lr": "fast"}}, "config key 'train.lr' must be float, got 'fast'"),
    (
        {"train": {"nope": 1}},
        (
            "unknown config key 'train.nope' (known: bleu_samples, clip_norm, compile, "
            "cuda_graphs, device, ema, final, init_from, init_layers, keep_last, label_smoothing, "
            "log_every, lr, "
            "max_epochs, max_minutes, max_tokens, max_updates, min_lr, pad_to_multiple, "
            "patience, plateau_factor, plateau_metric, plateau_patience, precision, "
            "run_dir, save_every, seed, tensorboard, update_freq, warmup_steps, weight_decay)"
        ),
    ),
    (
        {"nope": {}},
        "unknown config section 'nope' (known: data, model, train, decode, serve, distill)",
    ),
    (
        {"distill": {"nbest": 5, "beam": 4}},
        "distill.nbest (5) must be at most distill.beam (4): the search keeps only that many "
        "hypotheses",
    ),
    ({"distill": {"shard_size": 0}}, "config key 'distill.shard_size' must be positive, got 0"),
    (
        {"distill": {"keep_original": -1}},
        "config key 'distill.keep_original' must be >= 0 (0: off), got -1.0",
    ),
    (
        {"data": {"inputs": [{"path": "a", "weight": 0}]}},
        "config key 'data.inputs[0].weight' must be a number above 0, got 0",
    ),
]


@pytest.mark.parametrize("raw, message", RULES, ids=lambda v: str(v)[:60])
def test_every_rule_names_its_key_in_one_line(raw, message):
    with pytest.raises(UserError) as caught:
        from_dict(raw)
    assert str(caught.value) == message


def test_the_heads_are_checked_before_they_divide():
    with pytest.raises(UserError, match="'model.heads' must be positive, got 0"):
        from_dict({"model": {"heads": 0}})


def test_the_python_api_settings_are_checked_as_the_config_is():
    DecodeConfig(beam=5, nbest=5).check()
    with pytest.raises(UserError, match="must be at most decode.beam"):
        DecodeConfig(beam=2, nbest=3).check()


def test_data_inputs_are_parsed_once_and_recorded_as_written(tmp_path):
    """Each entry a Corpus however the config was made (TOML, --set, code); to_dict writes
    them back as TOML entries, so config.json reads back to the same config."""
    from translator.config import DataConfig
    from translator.inputs import Corpus

    toml = tmp_path / "c.toml"
    toml.write_text(
        '[data]\ninputs = ["a.tsv", {path = "b.tsv", weight = 0.5}]\n', encoding="utf-8"
    )
    more = '{src = "c.en", tgt = "c.zh", train_only = true}'
    config = load(toml, [f'data.inputs=["a.tsv", {{path = "b.tsv", weight = 0.5}}, {more}]'])
    assert config.data.inputs == [
        Corpus(("a.tsv",)),
        Corpus(("b.tsv",), 0.5),
        Corpus(("c.en", "c.zh"), 1.0, train_only=True),
    ]
    recorded = config.to_dict()["data"]["inputs"]
    assert recorded == [
        "a.tsv",
        {"path": "b.tsv", "weight": 0.5},
        {"src": "c.en", "tgt": "c.zh", "weight": 1.0, "train_only": True},
    ]
    assert from_dict(config.to_dict()) == config
    assert DataConfig(inputs=["a.tsv"]).inputs == [Corpus(("a.tsv",))]


def test_distill_settings_come_from_the_config_and_set(tmp_path):
    toml = tmp_path / "c.toml"
    toml.write_text('[distill]\nteacher = "t.pt"\nnbest = 5\n', encoding="utf-8")
    config = load(toml, ["distill.out=made"])
    assert (config.distill.teacher, config.distill.out) == ("t.pt", "made")
    assert (config.distill.nbest, config.distill.beam) == (5, 5)


def test_configs_that_borrow_a_model_agree_with_it_on_placeholders():
    """A fine-tuning config or a student takes another config's tokenizers
    (data.tokenizers_from, train.init_from): those carry ⦅n⦆ exactly when that config has
    data.placeholders, and `train` refuses data prepared otherwise."""
    configs = {path: load(path) for path in CONFIGS}
    by_run = {Path(c.train.run_dir): c for c in configs.values()}
    borrowers = 0
    for path, config in configs.items():
        for borrowed in (config.data.tokenizers_from, config.train.init_from):
            if not borrowed:
                continue
            borrowed_run = [Path(borrowed), *Path(borrowed).parents]  # a run or a file in it
            owner = next((c for run, c in by_run.items() if run in borrowed_run), None)
            assert owner is not None, f"{path.name}: {borrowed} is no shipped config's run"
            assert config.data.placeholders == owner.data.placeholders, path.name
            borrowers += 1
    assert borrowers >= 3  # the two news fine-tunings and the student


def test_a_removed_key_is_one_line_naming_what_replaced_it(tmp_path):
    """A config file or --set that names a removed key is refused with the key and what
    took its place; a config an older version recorded (a checkpoint's) is read without
    it, and a distill manifest that recorded it at the value that stayed resumes."""
    from translator.distill.shards import as_today

    old = tmp_path / "old.toml"
    old.write_text('[decode]\nglossary_mode = "search"\n', encoding="utf-8")
    with pytest.raises(UserError, match=r"old.toml: config key 'decode.glossary_mode' was remo"):
        load(old)
    plain = tmp_path / "plain.toml"
    plain.write_text("[decode]\nbeam = 2\n", encoding="utf-8")
    with pytest.raises(UserError) as refused:
        load(plain, ["decode.glossary_search=all"])
    assert str(refused.value).startswith("config key 'decode.glossary_search' was removed: ")
    assert "only a translation that misses a term is changed" in str(refused.value)
    with pytest.raises(UserError, match="'decode.glossary_beam' was removed: .*decode.beam"):
        load(plain, ["decode.glossary_beam=4"])
    recorded = {
        "decode": {
            "beam": 3, "glossary_mode": "placeholders", "glossary_search": "all",
            "glossary_beam": 2,
        }
    }  # fmt: skip
    assert from_dict(recorded).decode.beam == 3
    manifest = {
        "decode": {
            "beam": 5,
            "glossary_mode": "search",
            "glossary_search": "all",
            "glossary_beam": 4,
        }
    }
    assert as_today(manifest)["decode"] == {"beam": 5, "glossary_search": "all"}


# The keys the studies retired (docs/studies.md), each with a value it could have had and
# what its one line says to do instead.
RETIRED = [
    ("data", "number_placeholders", True, "true", "did not teach prices"),
    ("train", "schedule", "inverse_sqrt", '"inverse_sqrt"', "is the one schedule"),
    ("train", "rdrop", 5.0, "5.0", "R-Drop lost in equal time"),
    ("train", "teacher", "runs/t", '"runs/t"', "word-level distillation gained nothing"),
    ("train", "teacher_weight", 0.5, "0.5", "word-level distillation (train.teacher) was"),
    ("distill", "select", "chrf", '"chrf"', "chrF selection did not help"),
]


@pytest.mark.parametrize("section, key, value, toml, says", RETIRED, ids=[r[1] for r in RETIRED])
def test_a_key_the_studies_retired_is_one_line_naming_what_to_do(
    tmp_path, section, key, value, toml, says
):
    """In a config file or --set: refused with one line that names the key, what replaced
    it and the study (docs/studies.md) and says to delete it; in a config an older version
    recorded (a checkpoint's config), read without it."""
    name = f"{section}.{key}"
    old = tmp_path / "old.toml"
    old.write_text(f"[{section}]\n{key} = {toml}\n", encoding="utf-8")
    with pytest.raises(UserError) as in_file:
        load(old)
    line = str(in_file.value)
    assert line.startswith(f"{old}: config key '{name}' was removed: ") and "\n" not in line
    assert says in line and "docs/studies.md#" in line and "delete the key" in line
    plain = tmp_path / "plain.toml"
    plain.write_text("[train]\nlr = 1e-3\n", encoding="utf-8")
    with pytest.raises(UserError) as in_set:
        load(plain, [f"{name}={toml}"])
    assert str(in_set.value) == f"config key '{name}' was removed: {REMOVED[name].replacement}"
    recorded = from_dict({section: {key: value}})  # a checkpoint's config, say
    assert recorded == from_dict({}) and not hasattr(getattr(recorded, section), key)


def test_the_studies_anchors_the_removed_keys_name_exist():
    """Every anchor of the studies page that a removed key's line names is a heading there."""
    page = (CONFIGS[0].parents[1] / "docs/studies.md").read_text(encoding="utf-8")
    anchors = {
        re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        for heading in re.findall(r"^#+ (.+)$", page, re.M)
    }
    named = [
        anchor
        for removed in REMOVED.values()
        for anchor in re.findall(r"docs/studies\.md#([\w-]+)", removed.replacement)
    ]
    assert named and sorted(set(named) - anchors) == []


COMMENT_COMMAND = re.compile(r"^#\s+(translator|python) (.+?)(?:\s+#.*)?$", re.M)


def comment_commands() -> list[tuple[str, list[str]]]:
    """The commands the shipped configs' comments show: (config, argv after the program)."""
    found = []
    for path in sorted(Path("configs").glob("*.toml")):
        for program, rest in COMMENT_COMMAND.findall(path.read_text(encoding="utf-8")):
            found.append((path.name, [program, *shlex.split(rest)]))
    return found


@pytest.mark.parametrize(("config", "argv"), comment_commands(), ids=lambda v: str(v))
def test_every_config_comment_command_parses(config, argv):
    """Each `translator …` line names a command whose options exist (parsed as the CLI
    parses them, nothing run); each `python scripts/…` line names a script that exists;
    each -c/--config and --input/--out names a file the project has or the run makes."""
    import typer.main

    from translator.cli import app

    if argv[0] == "python":
        assert Path(argv[1]).is_file(), f"{config}: {argv[1]} does not exist"
        return
    group = typer.main.get_command(app)
    command = group.get_command(None, argv[1])
    assert command is not None, f"{config}: no command translator {argv[1]}"
    context = command.make_context(argv[1], argv[2:], resilient_parsing=False)
    given = context.params.get("config_file")
    assert given is None or Path(given).is_file(), f"{config}: no config {given}"


def test_the_comment_commands_are_found():
    named = {(config, argv[1]) for config, argv in comment_commands()}
    assert ("base.toml", "prepare") in named and ("student-cpu.toml", "distill") in named
