"""One typed config: data, model, train and decode sections, loaded from TOML.

Unknown keys and wrongly typed values are errors that name the key. Relative paths
are relative to the directory the command is run from.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

from translator.config_checks import validate
from translator.corpora import rebase_entry
from translator.errors import UserError

DEFAULT_CONFIG = Path("configs/tiny.toml")


@dataclass
class DataConfig:
    inputs: list = field(default_factory=list)  # corpora read by `prepare` (corpora.py)
    exclude: list[str] = field(default_factory=list)  # drop pairs with a sentence of these files
    format: str = "auto"  # auto | tatoeba | anki | jsonl | tmx (single files; pairs are text)
    dir: str = "data/prepared/default"  # where splits, tokenizers and stats.json go
    max_chars: int = 200  # drop a pair if either side is longer (characters)
    min_length_ratio: float = 0.5  # English characters per Chinese character, lower bound
    max_length_ratio: float = 9.0  # ... and upper bound
    valid_size: int = 500  # pairs (whole groups of linked pairs, so approximately)
    test_size: int = 1000
    seed: int = 1
    src_vocab_size: int = 8000  # raised, with a warning, if the corpus has more characters
    tgt_vocab_size: int = 8000
    byte_fallback: bool = True  # rare Chinese characters as UTF-8 bytes instead of <unk>
    tokenizer_sentences: int = 1_000_000  # SentencePiece trains on a random sample this large
    tokenizers_from: str = ""  # a checkpoint or run dir: encode with its tokenizers, train none
    workers: int = 0  # processes for prepare (and threads for encoding); 0: every core
    subword_sampling: int = 0  # BPE-dropout: this many sampled encodings of train, 1 an epoch
    subword_alpha: float = 0.1  # BPE-dropout: the chance that each merge is skipped
    subword_sides: str = "both"  # both | src | tgt: which sides of train are sampled


@dataclass
class ModelConfig:
    encoder_layers: int = 3
    decoder_layers: int = 3
    d_model: int = 256
    heads: int = 4
    ff_dim: int = 1024
    dropout: float = 0.1
    max_positions: int = 256  # longest token sequence the model accepts, either side
    norm: str = "pre"  # pre | post (layer norm before or after each residual block)
    tie_embeddings: bool = True  # decoder input embedding shared with the output projection


@dataclass
class TrainConfig:
    run_dir: str = "runs/default"
    max_epochs: int = 50
    max_minutes: float = 0.0  # 0: no time budget
    max_updates: int = 0  # stop after this many optimiser updates in all (0: no limit)
    max_tokens: int = 4096  # padded target-or-source tokens per batch
    lr: float = 1e-3  # peak learning rate, reached at the end of warm-up
    warmup_steps: int = 1000
    weight_decay: float = 0.01
    label_smoothing: float = 0.1
    clip_norm: float = 1.0
    schedule: str = "plateau"  # after warm-up: plateau (ReduceLROnPlateau) | inverse_sqrt
    plateau_metric: str = "loss"  # what the plateau rule follows: validation loss | bleu
    plateau_factor: float = 0.5  # the rate is multiplied by this ...
    plateau_patience: int = 2  # ... after this many epochs without a better plateau_metric
    min_lr: float = 1e-5  # ... down to this floor
    ema: float = 0.0  # decay of an exponential moving average of the weights (0: off)
    rdrop: float = 0.0  # R-Drop: weight of the KL between two dropout draws (0: off; 2x compute)
    patience: int = 8  # early stopping: epochs without a better validation BLEU
    bleu_samples: int = 500  # validation sentences translated for BLEU each epoch
    log_every: int = 50  # steps between progress-bar updates (and NaN checks)
    seed: int = 1
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    keep_last: int = 0  # keep weights of the last N epochs, for `translator average`
    compile: bool = False  # torch.compile for training (slower on our CPU: docs/performance.md)
    update_freq: int = 1  # batches per optimiser update (gradient accumulation)
    save_every: int = 500  # updates between checkpoints within an epoch (0: epoch ends only)
    tensorboard: bool = False  # scalars for TensorBoard in run_dir/tensorboard (an extra)
    init_from: str = ""  # a checkpoint or run dir: start from its weights (fine-tuning)


@dataclass
class DecodeConfig:
    batch_size: int = 256  # sentences per decoding batch (256 was fastest on CPU, greedy and beam)
    beam: int = 1  # 1: greedy search; more: beam search with this many beams
    length_penalty: float = 0.6  # GNMT alpha for beam search: score = log P / ((5+len)/6)^alpha
    max_len_a: float = 1.5  # output limit: a * source tokens + b
    max_len_b: int = 10
    engine: str = "torch"  # torch (our model) or ctranslate2 (a `translator export` directory)
    model_dir: str = ""  # the exported directory the ctranslate2 engine reads
    threads: int = 0  # ctranslate2: threads per worker (0: its default)
    workers: int = 1  # ctranslate2: translators decoding batches in parallel
    onednn: bool = True  # torch on x86 CPUs: linear layers through oneDNN (AVX-512), not MKL
    split: bool = True  # translate: each line split into sentences, translated, joined back
    nbest: int = 0  # 1 or more: that many hypotheses a line with scores, as JSON lines
    no_repeat_ngram: int = 0  # never write an n-gram of this many tokens twice (0: off)
    sample: bool = False  # draw each token at random instead of searching
    topk: int = 0  # sampling: from the k most probable tokens only (0: all)
    topp: float = 1.0  # sampling: from the fewest tokens holding this much probability
    temperature: float = 1.0  # sampling: logits divided by this (0: greedy)
    seed: int = 0  # sampling: the same seed, input and batch size give the same output


@dataclass
class ServeConfig:
    host: str = "127.0.0.1"  # 0.0.0.0 to be reachable from other machines
    port: int = 8000
    batching: bool = True  # decode requests that arrive together as one batch
    batch_wait_ms: float = 5.0  # how long the first request of a batch waits for others
    max_sentences: int = 64  # per request
    max_chars: int = 1000  # per sentence
    max_beam: int = 8
    max_queue: int = 512  # sentences waiting to be decoded; beyond: 503 with Retry-After
    max_body_kb: int = 1024  # a larger request body is refused (413) before it is read
    read_timeout_s: float = 10.0  # a request body must arrive within this (else 408)
    request_timeout_s: float = 60.0  # no answer within this: 503
    api_keys: list[str] = field(default_factory=list)  # with any (or TRANSLATOR_API_KEYS): 401
    cors_origins: list[str] = field(default_factory=list)  # origins browsers may call from


@dataclass
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)
    serve: ServeConfig = field(default_factory=ServeConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


CHOICES = {
    "data.format": ("auto", "tatoeba", "anki", "jsonl", "tmx"),
    "data.subword_sides": ("both", "src", "tgt"),
    "train.schedule": ("plateau", "inverse_sqrt"),
    "train.plateau_metric": ("loss", "bleu"),
    "model.norm": ("pre", "post"),
    "decode.engine": ("torch", "ctranslate2"),
}


def _coerce(key: str, value: Any, kind: Any) -> Any:
    """Check one value against its field type; ints are accepted where floats are expected."""
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind is list:
        if isinstance(value, list):
            return value
        raise UserError(f"config key '{key}' must be a list, got {value!r}")
    if kind == list[str]:
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return value
        raise UserError(f"config key '{key}' must be a list of strings, got {value!r}")
    if isinstance(value, bool) != (kind is bool) or not isinstance(value, kind):
        raise UserError(f"config key '{key}' must be {kind.__name__}, got {value!r}")
    if key in CHOICES and value not in CHOICES[key]:
        raise UserError(
            f"config key '{key}' must be one of {', '.join(CHOICES[key])}, got {value!r}"
        )
    return value


def _section(name: str, cls: type, values: dict[str, Any]) -> Any:
    hints = get_type_hints(cls)
    kwargs = {}
    for key, value in values.items():
        if key not in hints:
            raise UserError(
                f"unknown config key '{name}.{key}' (known: {', '.join(sorted(hints))})"
            )
        kwargs[key] = _coerce(f"{name}.{key}", value, hints[key])
    return cls(**kwargs)


def from_dict(raw: dict[str, Any]) -> Config:
    sections = get_type_hints(Config)
    for name in raw:
        if name not in sections:
            raise UserError(f"unknown config section '{name}' (known: {', '.join(sections)})")
    built = {}
    for name, cls in sections.items():
        values = raw.get(name, {})
        if not isinstance(values, dict):
            raise UserError(f"config section '{name}' must be a table")
        built[name] = _section(name, cls, values)
    config = Config(**built)
    validate(config)
    return config


def parse_override(text: str) -> tuple[str, Any]:
    """`section.key=value`, the value read as TOML (so 0.1, true, "x" and [..] work)."""
    key, sep, value = text.partition("=")
    if not sep or "." not in key:
        raise UserError(f"--set expects section.key=value, got {text!r}")
    try:
        parsed = tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        parsed = value  # a bare word: take it as a string
    return key.strip(), parsed


PATH_KEYS = (
    ("data", "dir"),
    ("data", "tokenizers_from"),
    ("train", "run_dir"),
    ("train", "init_from"),
    ("decode", "model_dir"),
)


def find_config(path: Path) -> tuple[Path, Path | None]:
    """The config file to read, and the directory its relative paths are relative to when
    that is not the current one: the default config (configs/tiny.toml) is also looked
    for in the parent directories, as git looks for .git, so `translator` works from any
    directory inside the project."""
    if path.is_file():
        return path, None
    if path == DEFAULT_CONFIG:
        for parent in Path.cwd().resolve().parents:
            if (parent / path).is_file():
                return parent / path, parent
        raise UserError(
            f"no --config given, and {path} is not in {Path.cwd().resolve()} or any parent "
            "directory: pass --config FILE"
        )
    raise UserError(f"config file not found: {path}")


def rebase_paths(raw: dict[str, Any], base: Path) -> None:
    """Make the relative paths in a config read from `base`'s project absolute."""
    data = raw.get("data", {})
    if isinstance(data.get("inputs"), list):
        data["inputs"] = [rebase_entry(entry, base) for entry in data["inputs"]]
    if isinstance(data.get("exclude"), list):
        data["exclude"] = [rebase_entry(entry, base) for entry in data["exclude"]]
    for section, key in PATH_KEYS:
        value = raw.get(section, {}).get(key)
        if isinstance(value, str) and value:
            raw[section][key] = str(base / value)


def load(
    path: str | Path | None = None,
    overrides: Sequence[str] = (),
    values: dict[str, Any] | None = None,
) -> Config:
    """The config in `path`, with `--set key=value` texts (`overrides`, read as TOML) and
    then typed values from command-line flags (`values`, e.g. {"decode.beam": 5}; None
    means the flag was not given) folded in, then checked once: the one way any option
    reaches the code."""
    path, base = find_config(Path(path) if path is not None else DEFAULT_CONFIG)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not valid TOML: {exc}") from None
    if base is not None:
        rebase_paths(raw, base)
    pairs = [parse_override(text) for text in overrides]
    pairs += [(key, value) for key, value in (values or {}).items() if value is not None]
    for key, value in pairs:
        section, _, name = key.partition(".")
        raw.setdefault(section, {})[name] = value
    try:
        return from_dict(raw)
    except UserError as exc:
        raise UserError(f"{path}: {exc}") from None
