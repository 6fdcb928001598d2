"""One typed config: data, model, train, decode and serve sections, loaded from TOML.

Each section is a dataclass whose fields are its keys (type, default and meaning side by
side) and whose `check()` holds the rules a type cannot express. The loader (`load`,
`from_dict`) names an unknown key, checks every value against its type, and checks the
whole config once. Relative paths are relative to the directory the command is run from.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple, get_args, get_origin, get_type_hints

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

from translator.errors import UserError
from translator.inputs import Corpus, parse_corpora, rebase_entry

DEFAULT_CONFIG = Path("configs/tiny.toml")

InputFormat = Literal["auto", "tatoeba", "anki", "jsonl", "tmx"]  # corpus/formats/readers.py


@dataclass
class DataConfig:
    inputs: list[Corpus] = field(default_factory=list)  # corpora `prepare` reads (inputs.py)
    exclude: list[str] = field(default_factory=list)  # drop pairs with a sentence of these files
    format: InputFormat = "auto"  # of single files (a pair of files is plain text)
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
    subword_sides: Literal["both", "src", "tgt"] = "both"  # which sides of train are sampled
    placeholders: bool = False  # protected spans (URLs, numbers, codes…) as ⦅n⦆ (data/spans.py)
    synthetic_placeholders: float = 0.1  # with placeholders: share of train pairs given ⦅n⦆
    src_prefix: str = ""  # a piece put before every source as its id (OPUS-MT's >>cmn_Hans<<)

    def __setattr__(self, name: str, value: Any) -> None:
        """`inputs` entries are parsed when set (TOML, --set, code): the package reads Corpus."""
        super().__setattr__(name, parse_corpora(value) if name == "inputs" else value)

    def check(self) -> None:
        _positive("data", self, "src_vocab_size tgt_vocab_size tokenizer_sentences")
        _keys(
            "data",
            workers=(self.workers >= 0, "must be >= 0 (0: every core)"),
            subword_sampling=(self.subword_sampling >= 0, "must be >= 0 (0: off)"),
            subword_alpha=(0 < self.subword_alpha < 1, "must be in (0, 1), e.g. 0.1"),
            synthetic_placeholders=(
                0 <= self.synthetic_placeholders <= 1,
                "must be in [0, 1], e.g. 0.1",
            ),
        )


@dataclass
class ModelConfig:
    encoder_layers: int = 3
    decoder_layers: int = 3
    d_model: int = 256
    heads: int = 4
    ff_dim: int = 1024
    dropout: float = 0.1
    # on the attention weights alone; -1: model.dropout (0 lets a GPU take its fast kernels)
    attention_dropout: float = -1.0
    max_positions: int = 256  # longest token sequence the model accepts, either side
    norm: Literal["pre", "post"] = "pre"  # layer norm before or after each residual block
    tie_embeddings: bool = True  # decoder input embedding shared with the output projection
    activation: Literal["relu", "gelu", "swish"] = "relu"  # of the feed-forward sublayers
    output_bias: bool = False  # a bias on the output projection (OPUS-MT models have one)
    # the decoder starts from a zero embedding, not <s>'s (Marian's; ct2's converter assumes it)
    zero_start: bool = False

    def check(self) -> None:
        _positive("model", self, "d_model heads ff_dim max_positions")
        _require(
            self.d_model % self.heads == 0,
            f"model.d_model ({self.d_model}) must be divisible by model.heads ({self.heads})",
        )
        _require(0 <= self.dropout < 1, "config key 'model.dropout' must be in [0, 1)")
        _require(
            self.attention_dropout == -1 or 0 <= self.attention_dropout < 1,
            "config key 'model.attention_dropout' must be in [0, 1), or -1 for model.dropout",
        )

    @property
    def attention_p(self) -> float:
        """The dropout probability on attention weights."""
        return self.dropout if self.attention_dropout == -1 else self.attention_dropout


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
    # after warm-up: ReduceLROnPlateau (training/schedule.py)
    plateau_metric: Literal["loss", "bleu"] = "loss"  # what the plateau rule follows (valid)
    plateau_factor: float = 0.5  # the rate is multiplied by this ...
    plateau_patience: int = 2  # ... after this many epochs without a better plateau_metric
    min_lr: float = 1e-5  # ... down to this floor
    ema: float = 0.0  # decay of an exponential moving average of the weights (0: off)
    patience: int = 8  # early stopping: epochs without a better validation BLEU
    bleu_samples: int = 500  # validation sentences translated for BLEU each epoch
    log_every: int = 50  # steps between progress-bar updates (and NaN checks)
    seed: int = 1
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    keep_last: int = 0  # keep weights of the last N epochs, for `translator average`
    # the run's model: best | ema (needs train.ema) | averageN (last N epochs' mean, keep_last>=N)
    final: str = "best"
    # bf16 autocast or fp32; auto: bf16 on CUDA and CPUs with bf16 matrix instructions
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    compile: bool = False  # torch.compile of forward, loss and backward (fullgraph)
    # on CUDA (one process): each batch shape's step recorded as a CUDA graph and replayed
    cuda_graphs: bool = False
    # static shapes: lengths rounded up to this, rows filled; 1: off; 0: 2 in bf16 on CPU, else 1
    pad_to_multiple: int = 0
    update_freq: int = 1  # batches per optimiser update (gradient accumulation)
    save_every: int = 500  # updates between checkpoints within an epoch (0: epoch ends only)
    tensorboard: bool = False  # scalars for TensorBoard in run_dir/tensorboard (an extra)
    init_from: str = ""  # a checkpoint or run dir: start from its weights (fine-tuning)
    # same: init_from's layers as they are; spread: fewer layers, evenly spaced, ends kept
    init_layers: Literal["same", "spread"] = "same"

    def check(self) -> None:
        _positive("train", self, "max_tokens lr update_freq log_every")
        _keys(
            "train",
            pad_to_multiple=(self.pad_to_multiple >= 0, "must be >= 0 (0: automatic, 1: off)"),
            save_every=(self.save_every >= 0, "must be >= 0 (0: at epoch ends only)"),
            label_smoothing=(0 <= self.label_smoothing < 1, "must be in [0, 1)"),
            ema=(0 <= self.ema < 1, "must be in [0, 1) (0: off), e.g. 0.999"),
        )
        _require(
            self.final in ("best", "ema") or self.final_epochs > 0,
            f"config key 'train.final' must be best, ema or averageN (e.g. average5), "
            f"got {self.final!r}",
        )
        _require(
            self.final != "ema" or self.ema > 0,
            "train.final = 'ema' needs the moving average: set train.ema (e.g. 0.999)",
        )
        _require(
            self.keep_last >= self.final_epochs,
            f"train.final = '{self.final}' averages the last {self.final_epochs} epochs: set "
            f"train.keep_last >= {self.final_epochs}",
        )

    @property
    def final_epochs(self) -> int:
        """N of train.final averageN (0 for best and ema)."""
        match = re.fullmatch(r"average([1-9][0-9]*)", self.final)
        return int(match.group(1)) if match else 0


SAMPLING_KEEPS_NO_TERMS = (
    "decode.glossary needs a search that keeps its terms: sampling (decode.sample, --sample) "
    "draws each token; translate with the glossary without --sample"
)


def option(default: Any, help: str, flag: str | None = "") -> Any:
    """A key declared once: its default and its flag's help (cli/common.py makes the flags;
    `flag`: its names, "" for --the-key, None for none)."""
    return field(default=default, metadata={"help": help, "flag": flag})


def help_of(key: str) -> str:
    """The help a [decode] key is declared with (also serve's description of it)."""
    return next(f.metadata["help"] for f in dataclasses.fields(DecodeConfig) if f.name == key)


@dataclass
class EngineOptions:
    """What is fixed when an engine opens (inference/factory.py)."""

    engine: str = option(
        "auto",
        "auto: the engine that takes the checkpoint (an export of it beside it, else ours); "
        "or one by name (inference/registry.py: ours is torch).",
    )
    model_dir: str = option(
        "", "The directory an engine that reads its own decodes (an export).", "--model"
    )
    precision: Literal["auto", "fp32", "bf16", "int8"] = option(
        "auto", "Weights in auto (each engine's fastest here), fp32, bf16 or int8."
    )
    threads: int = option(0, "Threads per worker, for an engine with workers (0: its default).")
    workers: int = option(
        0, "Workers decoding batches in parallel, for an engine with them (0: one a core)."
    )
    onednn: bool = option(True, "Ours on x86 CPUs: linear layers through oneDNN, not MKL.")


@dataclass
class SearchOptions:
    """What a search takes (inference/search.py and each engine's search)."""

    beam: int = option(1, "Beam size; 1 is greedy search.")
    batch_size: int = option(256, "Sentences a decoding batch.")
    search: str = option(
        "", "A search by name (registry.py); default: greedy, beam or sample as --beam and "
        "--sample say."
    )  # fmt: skip
    length_penalty: float = option(0.6, "GNMT length penalty alpha: log P / ((5+len)/6)^alpha.")
    max_len_a: float = option(1.5, "Output limit: a × source tokens + b (a).")
    max_len_b: int = option(10, "Output limit: a × source tokens + b (b).")
    nbest: int = option(0, "Write the N best translations with scores, a JSON object a line.")
    no_repeat_ngram: int = option(0, "Never write an n-gram of this many tokens twice (0: off).")
    sample: bool = option(False, "Draw each token at random instead of searching.", "--sample")
    topk: int = option(0, "Sampling: from the k most probable tokens only (0: all).")
    topp: float = option(1.0, "Sampling: from the fewest tokens holding this probability.")
    temperature: float = option(1.0, "Sampling: logits divided by this (0: greedy).")
    seed: int = option(0, "Sampling's seed: the same seed, input and batch size, the same output.")


@dataclass
class TextOptions:
    """What the text path does around a search (inference/text.py, terms.py)."""

    split: bool = option(True, "Split each line into sentences and join their translations.")
    recase: bool = option(
        True, "Put a sentence in ALL CAPS, Title Case or lower case in ordinary case."
    )
    final_mark: bool = option(True, "Translate a sentence ending without . ? ! as if it had one.")
    digit_guard: bool = option(True, "A source without digits (placeholders aside) gets none back.")
    span_guard: bool = option(True, "A span whose placeholder the output lacks goes at its end.")
    keep_names: bool = option(
        True, "A capitalised word the model never saw passes through verbatim."
    )
    glossary: str = option(
        "", "TSV or CSV of English terms and the Chinese each must be translated as."
    )


@dataclass
class DecodeConfig(TextOptions, SearchOptions, EngineOptions):
    """[decode]: each key declared once, in the part its lifetime puts it in (engine, search,
    text); the flags, the Python API's arguments and serve's defaults are read from them."""

    def check(self) -> None:
        """Also run on the Python API's per-call settings (inference/text.py)."""
        _positive("decode", self, "batch_size beam")
        _keys(
            "decode",
            workers=(self.workers >= 0, "must be >= 0 (0: one translator per core)"),
            threads=(self.threads >= 0, "must be >= 0 (0: the engine's default)"),
        )
        _keys(
            "decode",
            self,
            length_penalty=(self.length_penalty >= 0, "must be >= 0"),
            nbest=(self.nbest >= 0, "must be >= 0 (0: one translation a line, as text)"),
            no_repeat_ngram=(self.no_repeat_ngram >= 0, "must be >= 0 (0: off)"),
            topk=(self.topk >= 0, "must be >= 0 (0: all tokens)"),
            topp=(0 < self.topp <= 1, "must be in (0, 1]"),
            temperature=(self.temperature >= 0, "must be >= 0 (0: greedy)"),
        )
        wrong = nbest_within_beam(self.nbest, self.beam, "decode.beam")
        _require(
            self.sample or wrong is None,
            f"decode.nbest ({self.nbest}) {wrong} (or sample with decode.sample)",
        )
        _require(not (self.sample and self.glossary), SAMPLING_KEEPS_NO_TERMS)


@dataclass
class ServeConfig:
    host: str = "127.0.0.1"  # 0.0.0.0 to be reachable from other machines
    port: int = 8000
    batching: bool = True  # decode requests that arrive together as one batch
    batch_wait_ms: float = 5.0  # how long the first request of a batch waits for others
    warm_up: bool = True  # decode a few batches at start-up, before /ready says 200
    max_sentences: int = 256  # a request's sentences after splitting (its texts too)
    max_chars: int = 1000  # a text's (a document's sentences are cut to it)
    max_document_chars: int = 100_000  # a document's text (POST /document, the page's file)
    max_document_kb: int = 10_240  # an uploaded file (/document, /lt/translate_file, the page)
    max_beam: int = 8
    max_glossary_entries: int = 1000  # entries of a request's own glossary
    max_glossary_kb: int = 64  # ... and their size, English and Chinese, in UTF-8
    max_term_chars: int = 100  # ... and each term's, English or Chinese
    max_queue: int = 512  # sentences waiting to be decoded; beyond: 503 with Retry-After
    max_body_kb: int = 1024  # a larger request body is refused (413) before it is read
    read_timeout_s: float = 10.0  # a request body must arrive within this (else 408)
    request_timeout_s: float = 60.0  # no answer within this: 503
    busy_s: float = 30.0  # a batch or a request's wait for its next batch longer: /ready 503
    header_timeout_s: float = 5.0  # a request's headers within this (also: idle keep-alive)
    max_connections: int = 4096  # open at once; more wait in the listen queue
    rate_limit: float = 0.0  # POST requests a second per API key (or address); beyond: 429
    rate_burst: int = 10  # requests a client may send at once before serve.rate_limit applies
    refusal_delay_s: float = 1.0  # a 503 or 429 is answered after this (at most its wait)
    # with any (here, TRANSLATOR_API_KEYS or api_key_file): 401 without one; never saved
    api_keys: list[str] = field(default_factory=list)
    api_key_file: str = ""  # a file of keys, one a line (# comments); read by `serve`
    cors_origins: list[str] = field(default_factory=list)  # origins browsers may call from

    def check(self) -> None:
        _positive(
            "serve",
            self,
            "max_sentences max_chars max_document_chars max_document_kb max_beam "
            "max_glossary_entries "
            "max_glossary_kb max_term_chars max_queue max_body_kb read_timeout_s "
            "request_timeout_s busy_s header_timeout_s max_connections",
        )
        _require(0 <= self.port <= 65535, "config key 'serve.port' must be from 0 to 65535")
        _require(self.batch_wait_ms >= 0, "config key 'serve.batch_wait_ms' must be >= 0")
        _require(self.rate_limit >= 0, "config key 'serve.rate_limit' must be >= 0 (0: no limit)")
        _require(self.rate_burst >= 1, "config key 'serve.rate_burst' must be >= 1")
        _require(self.refusal_delay_s >= 0, "config key 'serve.refusal_delay_s' must be >= 0")


@dataclass
class DistillConfig:
    teacher: str = option(
        "", "The teacher: a checkpoint or run directory (its model, train.final), or the "
        "directory an engine that reads its own decodes (--engine ctranslate2: an export)."
    )  # fmt: skip
    out: str = option(
        "", "The prepared directory to write (train a student with data.dir = it).", "--out -o"
    )
    beam: int = option(5, "The teacher's beam (decode.beam is the student's).")
    nbest: int = option(
        1, "N > 1: of the teacher's N best, the first at least as long as the human "
        "translation (distill/selection.py); N at most the beam."
    )  # fmt: skip
    keep_original: float = option(
        0.0, "Mix the human pairs back in, each seen this often an epoch (0: not at all)."
    )
    shard_size: int = option(
        100_000, "Train lines a shard, each written when done: what a kill loses."
    )

    def check(self) -> None:
        _positive("distill", self, "beam nbest shard_size")
        _keys("distill", self, keep_original=(self.keep_original >= 0, "must be >= 0 (0: off)"))
        wrong = nbest_within_beam(self.nbest, self.beam, "distill.beam")
        _require(wrong is None, f"distill.nbest ({self.nbest}) {wrong}")


@dataclass
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)
    serve: ServeConfig = field(default_factory=ServeConfig)
    distill: DistillConfig = field(default_factory=DistillConfig)

    def check(self) -> None:
        """Each section's rules."""
        for section in (self.data, self.model, self.train, self.decode, self.serve, self.distill):
            section.check()

    def to_dict(self) -> dict[str, Any]:
        """As TOML would give it, less its secrets (what config.json and checkpoints record)."""
        raw = dataclasses.asdict(self)
        raw["data"]["inputs"] = [corpus.entry() for corpus in self.data.inputs]
        without_secrets(raw)
        return raw


# Keys never written to disk: Config.to_dict leaves them empty (also in old checkpoints).
SECRETS = (("serve", "api_keys"),)


def without_secrets(raw: dict[str, Any]) -> list[str]:
    """Empty `raw`'s SECRETS in place; the names of those that held a value."""
    dropped = []
    for section, key in SECRETS:
        values = raw.get(section)
        if isinstance(values, dict) and values.get(key):
            values[key] = []
            dropped.append(f"{section}.{key}")
    return dropped


def _positive(section: str, values: object, keys: str) -> None:
    for key in keys.split():
        value = getattr(values, key)
        _require(value > 0, f"config key '{section}.{key}' must be positive, got {value}")


def _keys(section: str, got: object = None, /, **rules: tuple[bool, str]) -> None:
    """Rules of single keys, in order: the first broken as "config key 'section.key' rule"
    (and ", got value", read from `got`, when given)."""
    for key, (ok, rule) in rules.items():
        value = "" if got is None else f", got {getattr(got, key)}"
        _require(ok, f"config key '{section}.{key}' {rule}{value}")


def nbest_within_beam(nbest: int, beam: int, beam_name: str = "the beam") -> str | None:
    """The n-best rule (config, distill, serve's requests): None, or what is wrong with nbest."""
    if nbest <= beam:
        return None
    return f"must be at most {beam_name} ({beam}): the search keeps only that many hypotheses"


def _require(ok: bool, message: str) -> None:
    """A rule of the config: one clear line if it is broken."""
    if not ok:
        raise UserError(message)


def _coerce(key: str, value: Any, kind: Any) -> Any:
    """Check one value against its field type (an int is a float; a Literal takes its values)."""
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind == list[Corpus]:  # each entry parsed by DataConfig
        if isinstance(value, list):
            return value
        raise UserError(f"config key '{key}' must be a list, got {value!r}")
    if kind == list[str]:
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return value
        raise UserError(f"config key '{key}' must be a list of strings, got {value!r}")
    choices = get_args(kind) if get_origin(kind) is Literal else ()
    if choices:
        kind = str
    if isinstance(value, bool) != (kind is bool) or not isinstance(value, kind):
        raise UserError(f"config key '{key}' must be {kind.__name__}, got {value!r}")
    if choices and value not in choices:
        raise UserError(f"config key '{key}' must be one of {', '.join(choices)}, got {value!r}")
    return value


class Removed(NamedTuple):
    """A key that was removed: the value whose behaviour stayed, and what to do instead."""

    kept: Any
    replacement: str


# Removed keys: a config file or --set naming one is told what replaced it; a recorded config
# (checkpoint, export, distill manifest) is read without it.
REMOVED = {
    "decode.glossary_mode": Removed(
        "search",
        "a term the translation misses is placed by the model, and names and terms the "
        "model never saw travel as placeholders (as with 'search'); delete the key",
    ),
    "decode.glossary_search": Removed(
        "missing",
        "only a translation that misses a term is changed (what 'missing' did); delete the key",
    ),
    "decode.glossary_beam": Removed(
        4,
        "a term the translation misses is placed by the model, and what follows it searched "
        "with decode.beam beams (docs/translating.md#glossaries); delete the key",
    ),
    "data.number_placeholders": Removed(
        False,
        "numbers as placeholders did not teach prices; data.placeholders protects the spans "
        "it finds (docs/studies.md#the-synthetic-share); delete the key",
    ),
    "train.schedule": Removed(
        "plateau",
        "warm-up then ReduceLROnPlateau (train.plateau_*) is the one schedule, inverse_sqrt "
        "lost (docs/studies.md#the-chosen-recipe-20-and-60-minutes); delete the key",
    ),
    "train.rdrop": Removed(
        0.0,
        "R-Drop lost in equal time; regularise with model.dropout "
        "(docs/studies.md#the-hour-capacity-r-drop-and-the-length-penalty); delete the key",
    ),
    "train.teacher": Removed(
        "",
        "word-level distillation gained nothing measurable; train on `translator distill`'s "
        "output (docs/studies.md#word-level-distillation-on-top); delete the key",
    ),
    "train.teacher_weight": Removed(
        0.5,
        "word-level distillation (train.teacher) was removed; train on `translator distill`'s "
        "output (docs/studies.md#word-level-distillation-on-top); delete the key",
    ),
    "distill.select": Removed(
        "length",
        "of the teacher's n best (distill.nbest), the first at least as long as the human "
        "translation is kept (what 'length' did); chrF selection did not help "
        "(docs/studies.md#how-the-student-was-chosen); delete the key (and --select)",
    ),
}


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
        hints, kwargs = get_type_hints(cls), {}
        for key, value in values.items():
            if f"{name}.{key}" in REMOVED:
                continue
            if key not in hints:
                known = ", ".join(sorted(hints))
                raise UserError(f"unknown config key '{name}.{key}' (known: {known})")
            kwargs[key] = _coerce(f"{name}.{key}", value, hints[key])
        built[name] = cls(**kwargs)
    config = Config(**built)
    config.check()
    return config


def refuse_removed(raw: dict[str, Any], where: str = "") -> None:
    """One error line for a key of REMOVED that `raw` (a config as TOML gives it) names."""
    for key, removed in REMOVED.items():
        section, _, name = key.partition(".")
        if isinstance(raw.get(section), dict) and name in raw[section]:
            raise UserError(f"{where}config key '{key}' was removed: {removed.replacement}")


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


PATH_KEYS = {
    "data": ("dir", "tokenizers_from"),
    "train": ("run_dir", "init_from"),
    "decode": ("model_dir", "glossary"),
    "serve": ("api_key_file",),
    "distill": ("teacher", "out"),
}


def find_config(path: Path) -> tuple[Path, Path | None]:
    """The config file to read, and the directory its relative paths are relative to if not
    the current one: the default config is also looked for in the parents, as git does."""
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
    for key in ("inputs", "exclude"):
        if isinstance(data.get(key), list):
            data[key] = [rebase_entry(entry, base) for entry in data[key]]
    for section, keys in PATH_KEYS.items():
        for key in keys:
            value = raw.get(section, {}).get(key)
            if isinstance(value, str) and value:
                raw[section][key] = str(base / value)


def load(
    path: str | Path | None = None,
    overrides: Sequence[str] = (),
    values: dict[str, Any] | None = None,
    relative_to: Path | None = None,
) -> Config:
    """The config in `path`, with `--set` texts (`overrides`) and then flags' values (`values`,
    e.g. {"decode.beam": 5}; None: not given) folded in, checked once: the one way any option
    reaches the code. Relative paths are relative to `relative_to` if given (scripts/)."""
    path, base = find_config(Path(path) if path is not None else DEFAULT_CONFIG)
    base = relative_to or base
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not valid TOML: {exc}") from None
    if base is not None:
        rebase_paths(raw, base)
    refuse_removed(raw, f"{path}: ")
    pairs = [parse_override(text) for text in overrides]
    pairs += [(key, value) for key, value in (values or {}).items() if value is not None]
    given: dict[str, dict[str, Any]] = {}
    for key, value in pairs:
        section, _, name = key.partition(".")
        given.setdefault(section, {})[name] = value
    refuse_removed(given)  # named by --set or a flag, not by the file
    for section, values in given.items():
        raw.setdefault(section, {}).update(values)
    try:
        return from_dict(raw)
    except UserError as exc:
        raise UserError(f"{path}: {exc}") from None
