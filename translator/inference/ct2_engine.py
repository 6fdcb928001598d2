"""CTranslate2 as the engine (engine.py's `Engine`; `--engine ctranslate2 --model DIR`): a
directory written by `translator export`, decoded through the same text path as our own
model (text.py); only the search differs. This module also owns the
layout of that directory (the files `translator export` writes and this engine reads).

Differences from our decoder: one `max_decoding_length` a call, so a batch asks for its
longest limit and each output is cut to its own (exact for greedy); a length penalty of L^α
where ours is GNMT's ((5+L)/6)^α, so beam search may differ (docs/deploy.md states how
often). Batches are submitted asynchronously so that `workers` translators run in parallel.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from translator.config import Config, DecodeConfig, from_dict
from translator.data import known_words
from translator.data.tokenizer import EOS, UNK, load_tokenizer
from translator.errors import UserError
from translator.inference.engine import About, Forced, Found, SearchBatch, Sources
from translator.model.checkpoint import digest
from translator.runtime import pick_device, worker_count

NAME = "ctranslate2"  # decode.engine's name for it (pyproject.toml's entry point)

# an exported directory: CTranslate2's model files, then ours
METADATA = "translator.json"  # decoding defaults, max_positions, the model section
SOURCE_SPM, TARGET_SPM = "source.spm.model", "target.spm.model"
SOURCE_WORDS = "source.words.txt"  # the English words the model was trained on, one a line
SHARED_BATCH = 32  # the most sentences a batch when several translators share the work


def require_ctranslate2() -> Any:
    try:
        import ctranslate2
    except ImportError:
        raise UserError(
            'CTranslate2 is not installed: pip install "translator[ctranslate2]"'
        ) from None
    return ctranslate2


def beside(checkpoint: Path) -> Path:
    """Where `translator export` writes by default, and where decode.engine auto looks: the
    checkpoint's name with `.ct2` (runs/x/checkpoints/average5.pt → …/average5.ct2)."""
    return checkpoint.with_suffix(".ct2")


def export_of(directory: Path, checkpoint: Path) -> bool:
    """`directory` holds an export of exactly this checkpoint (the SHA-256 it recorded):
    a checkpoint trained further or replaced since is not decoded by its old export."""
    meta_file = directory / METADATA
    if not (meta_file.is_file() and checkpoint.is_file()):
        return False
    recorded = json.loads(meta_file.read_text(encoding="utf-8")).get("checkpoint_sha256")
    return bool(recorded) and recorded == digest(checkpoint)


class CTranslate2Engine:
    """A directory `translator export` wrote, as the engine."""

    reads_dir = True  # decode.model_dir: the exported directory
    auto_rank = 10  # decode.engine auto: an export of the very checkpoint, beside it

    def __init__(
        self,
        engine,
        src_tok,
        tgt_tok,
        max_positions: int,
        src_prefix: str = "",
        about: About | None = None,
        workers: int = 1,
    ):
        self.engine = engine  # the ctranslate2.Translator
        self.src_tok, self.tgt_tok, self.src_prefix = src_tok, tgt_tok, src_prefix
        self.max_positions = max_positions
        self.about = about or About(NAME, "as exported")
        self.workers = workers  # translators decoding batches in parallel
        self.known_words: frozenset[str] | None = None  # known_words.py: none where not exported
        self.ctranslate2 = require_ctranslate2()
        self.src_pieces = [src_tok.id_to_piece(i) for i in range(src_tok.get_piece_size())]

    @classmethod
    def auto(cls, checkpoint: Path) -> tuple[str | None, str]:
        exported = beside(checkpoint)
        if not exported.is_dir():
            return None, "no export beside the checkpoint"
        if importlib.util.find_spec("ctranslate2") is None:
            return None, f"{exported} needs ctranslate2"
        if not export_of(exported, checkpoint):
            return None, f"{exported} is of another checkpoint"
        return str(exported), str(exported)

    @classmethod
    def open(
        cls, config: Config, checkpoint: Path, model_dir: str, reason: str
    ) -> CTranslate2Engine:
        decode, device = config.decode, pick_device(config.train.device).type
        return cls.from_dir(model_dir, decode, device, decode.threads, decode.workers, reason)

    @classmethod
    def from_dir(
        cls,
        model_dir: str | Path,
        decode_cfg: DecodeConfig | None = None,
        device: str = "cpu",
        threads: int = 0,
        workers: int = 1,
        reason: str = "",
    ) -> CTranslate2Engine:
        """Load an exported directory, decoding as `decode_cfg` (default: the exported one)
        says; `threads` per worker (0: CTranslate2's default); `reason`: why (for `about`)."""
        ctranslate2 = require_ctranslate2()
        model_dir = Path(model_dir)
        if not (model_dir / METADATA).is_file():
            raise UserError(f"{model_dir} is not a directory written by `translator export`")
        meta = json.loads((model_dir / METADATA).read_text(encoding="utf-8"))
        decode_cfg = decode_cfg or from_dict({"decode": meta["decode"]}).decode
        supported = set(ctranslate2.get_supported_compute_types(device))
        chosen, why = resolve_precision(decode_cfg.precision, device, supported)
        if workers == 0:  # one translator of one thread per core (decode.workers 0)
            workers, threads = worker_count(0) if device == "cpu" else 1, threads or 1
        engine = ctranslate2.Translator(
            str(model_dir),
            device=device,
            compute_type=COMPUTE_TYPES[chosen],
            inter_threads=workers,
            intra_threads=threads,
        )
        src_tok = load_tokenizer(model_dir / SOURCE_SPM)
        tgt_tok = load_tokenizer(model_dir / TARGET_SPM)
        source = Path(meta.get("checkpoint", ""))
        sha256 = meta.get("checkpoint_sha256", "")  # "" from an export older than it
        about = About(NAME, chosen, model_dir, reason, why, source, sha256, model_dir / "model.bin")
        found = cls(
            engine, src_tok, tgt_tok, meta["max_positions"], meta.get("src_prefix", ""),
            about, workers,
        )  # fmt: skip
        words = model_dir / SOURCE_WORDS
        if words.is_file():
            found.known_words = known_words.known(words.read_text(encoding="ascii").split("\n"))
        return found

    def batch_size(self, decode_cfg: DecodeConfig) -> int:
        """decode.batch_size, at most SHARED_BATCH with several translators, so that each has
        some (measured: docs/performance.md#decoding-engine-and-precision)."""
        size = decode_cfg.batch_size
        return min(size, SHARED_BATCH) if self.workers > 1 else size

    def search(
        self, sources: Sources, batches: Sequence[SearchBatch], decode_cfg: DecodeConfig
    ) -> Found:
        """Every batch submitted at once, so that the workers share them."""
        if decode_cfg.search:
            raise UserError(
                f"decode.search = {decode_cfg.search}: CTranslate2 searches with its own "
                "greedy search, beam search and sampling (decode.beam, decode.sample)"
            )
        if decode_cfg.sample:
            self.ctranslate2.set_random_seed(decode_cfg.seed)
        pending = [self._submit(sources, batch, decode_cfg) for batch in batches]
        keep = max(decode_cfg.nbest, 1)
        outputs: Found = [[] for _ in sources]
        for batch, results in zip(batches, pending, strict=True):
            for i, most, result in zip(batch.rows, batch.most(), results, strict=True):
                outputs[i] = [
                    ([self.tgt_tok.piece_to_id(p) for p in pieces][:most], score)
                    for pieces, score in _hypotheses(result)[:keep]
                ]
        return outputs

    def expected(self, sources: Sources, batches: Sequence[Forced]) -> list[list[float]]:
        """From the vocabulary's logits of each step with the output as the target prefix;
        the batches submitted at once."""
        piece = self.tgt_tok.id_to_piece

        def submit(batch: Forced):
            longest = min(max(len(ids) for ids in batch.outputs) + 1, self.max_positions - 1)
            return self.engine.translate_batch(
                [[self.src_pieces[t] for t in sources[i][:-1]] for i in batch.rows],
                target_prefix=[[piece(t) for t in ids] for ids in batch.outputs],
                beam_size=1,
                max_decoding_length=longest,
                min_decoding_length=0,
                return_logits_vocab=True,
                asynchronous=True,
            )

        f32, cpu = self.ctranslate2.DataType.float32, self.ctranslate2.Device.cpu
        found: list[list[float]] = []
        for batch, results in zip(batches, [submit(b) for b in batches], strict=True):
            for ids, token, result in zip(batch.outputs, batch.tokens, results, strict=True):
                steps = result.result().logits[0][: len(ids) + 1]
                logits = np.stack([np.asarray(step.to(f32).to_device(cpu)) for step in steps])
                written = logits[np.arange(len(steps)), [*ids, EOS][: len(steps)]]
                found.append((logits[:, token] - written).tolist())  # the normaliser cancels
        return found

    def _submit(self, sources: Sources, batch: SearchBatch, decode_cfg: DecodeConfig):
        """Start the search of the batch's sources (their EOS left to `add_source_eos`),
        suppressing `never` (<unk>: disable_unk), from its prefixes where it has them."""
        piece = self.tgt_tok.id_to_piece
        starts = batch.prefixes or [[]] * len(batch.rows)
        longest = max(limit + len(p) for limit, p in zip(batch.limits, starts, strict=True))
        options = _search_options(decode_cfg)
        if batch.prefixes is not None:
            options["target_prefix"] = [[piece(t) for t in p] for p in batch.prefixes]
        return self.engine.translate_batch(
            [[self.src_pieces[t] for t in sources[i][:-1]] for i in batch.rows],
            **options,
            length_penalty=decode_cfg.length_penalty,
            max_decoding_length=min(longest, self.max_positions - 1),  # BOS takes one
            min_decoding_length=0,  # as ours, an output may be empty
            no_repeat_ngram_size=decode_cfg.no_repeat_ngram,
            return_scores=bool(decode_cfg.nbest or decode_cfg.sample),
            disable_unk=True,
            suppress_sequences=[[piece(i)] for i in batch.never if i != UNK],
            asynchronous=True,
        )


def _search_options(decode_cfg: DecodeConfig) -> dict:
    """CTranslate2's options for the search decode_cfg asks for. All `beam` hypotheses are
    asked for where n-best is (`nbest` kept): with fewer, CTranslate2 stops as soon as its
    top beam ends, before later ones that may score better."""
    if decode_cfg.sample:
        return {
            "beam_size": 1,
            "num_hypotheses": max(decode_cfg.nbest, 1),
            "sampling_topk": decode_cfg.topk if decode_cfg.temperature else 1,
            "sampling_topp": decode_cfg.topp,
            "sampling_temperature": decode_cfg.temperature or 1.0,
        }
    beam = decode_cfg.beam
    return {"beam_size": beam, "num_hypotheses": beam if decode_cfg.nbest else 1}


# ---- the precision CTranslate2 computes in (decode.precision, as precision.py reads it) ----
# CTranslate2's names; "as exported": the export's own (`translator export --quantization`)
COMPUTE_TYPES = {"fp32": "float32", "bf16": "bfloat16", "int8": "int8", "as exported": "default"}


def resolve_precision(setting: str, device: str, supported: set[str]) -> tuple[str, str]:
    """The precision `setting` means for CTranslate2 on `device`, whose compute types are
    `supported`, and why: auto is int8 on a CPU (its fastest there, on every CPU measured),
    the export's own type elsewhere; a named one it lacks is a UserError."""
    if setting == "auto":
        if device == "cpu" and "int8" in supported:
            return "int8", "decode.precision auto: CTranslate2 on a CPU"
        return "as exported", f"decode.precision auto: CTranslate2 on {device}"
    if COMPUTE_TYPES[setting] not in supported:
        raise UserError(
            f"decode.precision = {setting}: CTranslate2 cannot compute in "
            f"{COMPUTE_TYPES[setting]} on this {device} (it can: {', '.join(sorted(supported))})"
        )
    return setting, f"decode.precision = {setting}"


def _hypotheses(result) -> list[tuple[list[str], float]]:
    """The hypotheses of one asynchronous result, best first, scored (NaN where not asked
    for); a RuntimeError that stops CTranslate2 (e.g. a missing CUDA library) one line."""
    try:
        found = result.result()
    except RuntimeError as exc:
        raise UserError(f"CTranslate2 could not translate: {exc}") from None
    scores = found.scores or [float("nan")] * len(found.hypotheses)
    return list(zip(found.hypotheses, scores, strict=True))
