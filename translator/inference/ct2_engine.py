"""CTranslate2 as the engine (engine.py's `Engine`; `--engine ctranslate2 --model DIR`): a
directory written by `translator export`, decoded through the same text path as our own
model (text.py); only the search differs. This module also owns the
layout of that directory (the files `translator export` writes and this engine reads).

Differences from our decoder, and what is done about them: CTranslate2 takes one
`max_decoding_length` per call where we limit each sentence (a × source tokens + b), so a
batch asks for its longest limit and each output is cut to its own (exact for greedy);
its `min_decoding_length` is set to 0, as we allow an empty output; <pad>, <s> and <unk>
are never written, as in ours; its length penalty divides by L^α where ours is GNMT's
((5+L)/6)^α, so beam search may choose differently on some sentences (docs/deploy.md
states how often). Batches are submitted asynchronously so that `workers` translators of
`threads` threads each run in parallel. `expected` (the logits at each place of a given
output) and `complete` (a search from a target prefix) are what terms.py's term placement
asks of it, as of ours.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from translator.config import DecodeConfig, from_dict
from translator.data import known_words
from translator.data.tokenizer import EOS, UNK, load_tokenizer
from translator.errors import UserError
from translator.inference import precision
from translator.inference.engine import About, Found, SearchBatch, Sources, output_limits
from translator.runtime import worker_count

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


class CTranslate2Engine:
    """A directory `translator export` wrote, as the engine."""

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
        self.about = about or About("ctranslate2", "as exported")
        self.workers = workers  # translators decoding batches in parallel
        self.known_words: frozenset[str] | None = None  # known_words.py: none where not exported
        self.ctranslate2 = require_ctranslate2()
        self.src_pieces = [src_tok.id_to_piece(i) for i in range(src_tok.get_piece_size())]

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
        """Load an exported directory. `decode_cfg`: the settings to use (default: the ones
        exported with the model), its `precision` the compute type; `threads` per worker
        (0: CTranslate2's default); `reason`: why this engine (for `about`)."""
        ctranslate2 = require_ctranslate2()
        model_dir = Path(model_dir)
        if not (model_dir / METADATA).is_file():
            raise UserError(f"{model_dir} is not a directory written by `translator export`")
        meta = json.loads((model_dir / METADATA).read_text(encoding="utf-8"))
        decode_cfg = decode_cfg or from_dict({"decode": meta["decode"]}).decode
        supported = set(ctranslate2.get_supported_compute_types(device))
        chosen, why = precision.resolve_ct2(decode_cfg.precision, device, supported)
        if workers == 0:  # one translator of one thread per core (decode.workers 0)
            workers, threads = worker_count(0) if device == "cpu" else 1, threads or 1
        engine = ctranslate2.Translator(
            str(model_dir),
            device=device,
            compute_type=precision.COMPUTE_TYPES[chosen],
            inter_threads=workers,
            intra_threads=threads,
        )
        src_tok = load_tokenizer(model_dir / SOURCE_SPM)
        tgt_tok = load_tokenizer(model_dir / TARGET_SPM)
        about = About("ctranslate2", chosen, model_dir, reason, why)
        found = cls(
            engine, src_tok, tgt_tok, meta["max_positions"], meta.get("src_prefix", ""),
            about, workers,
        )  # fmt: skip
        words = model_dir / SOURCE_WORDS
        if words.is_file():
            found.known_words = known_words.known(words.read_text(encoding="ascii").split("\n"))
        return found

    def batch_size(self, decode_cfg: DecodeConfig) -> int:
        """decode.batch_size, and with several translators at most SHARED_BATCH: batches
        small enough that each translator has some (measured:
        docs/performance.md#decoding-engine-and-precision)."""
        size = decode_cfg.batch_size
        return min(size, SHARED_BATCH) if self.workers > 1 else size

    def search(
        self, sources: Sources, batches: Sequence[SearchBatch], decode_cfg: DecodeConfig
    ) -> Found:
        """Every batch submitted at once, so that the workers share them; each output cut
        to its own limit."""
        limits = output_limits([len(s) for s in sources], decode_cfg, self.max_positions).tolist()
        if decode_cfg.sample:
            self.ctranslate2.set_random_seed(decode_cfg.seed)
        pending = [
            self._submit(sources, batch.rows, batch.never, limits, decode_cfg) for batch in batches
        ]
        keep = max(decode_cfg.nbest, 1)
        outputs: Found = [[] for _ in sources]
        for batch, results in zip(batches, pending, strict=True):
            for i, result in zip(batch.rows, results, strict=True):
                outputs[i] = [
                    ([self.tgt_tok.piece_to_id(p) for p in pieces[: limits[i]]], score)
                    for pieces, score in _hypotheses(result)[:keep]
                ]
        return outputs

    def complete(
        self,
        sources: Sequence[np.ndarray],
        rows: Sequence[int],
        prefixes: Sequence[list[int]],
        never: list[int],
        limits: list[int],
        decode_cfg: DecodeConfig,
    ) -> Found:
        """The hypotheses of the source of each of `rows` that start with its prefix
        (target ids), each cut to its limit, or to its prefix where that is longer; in
        batches submitted at once, as `search` submits them."""

        def submit(part: list[int], at: list[int]):
            return self._submit(sources, part, never, limits, decode_cfg, [prefixes[k] for k in at])

        keep = max(decode_cfg.nbest, 1)
        found: Found = [[] for _ in rows]
        for part, results in self._chunked(sources, rows, self.batch_size(decode_cfg), submit):
            for k, result in zip(part, results, strict=True):
                most = max(limits[rows[k]], len(prefixes[k]))
                found[k] = [
                    ([self.tgt_tok.piece_to_id(p) for p in pieces][:most], score)
                    for pieces, score in _hypotheses(result)[:keep]
                ]
        return found

    def expected(
        self, sources: Sequence[np.ndarray], rows: Sequence[int], outputs, tokens
    ) -> list[list[float]]:
        """How much more the model expects `tokens[k]` than what output `k` wrote, at each
        of its places: log P(token) − log P(written) before its first id, …, before its
        EOS (len + 1 values), from the vocabulary's logits of each step with the output as
        the target prefix."""
        piece = self.tgt_tok.id_to_piece

        def submit(part: list[int], at: list[int]):
            longest = min(max(len(outputs[k]) for k in at) + 1, self.max_positions - 1)
            return self.engine.translate_batch(
                [[self.src_pieces[t] for t in sources[i][:-1]] for i in part],
                target_prefix=[[piece(t) for t in outputs[k]] for k in at],
                beam_size=1,
                max_decoding_length=longest,
                min_decoding_length=0,
                return_logits_vocab=True,
                asynchronous=True,
            )

        found: list[list[float]] = [[] for _ in rows]
        for part, results in self._chunked(sources, rows, SHARED_BATCH, submit):
            for k, result in zip(part, results, strict=True):
                ids = outputs[k]
                steps = result.result().logits[0][: len(ids) + 1]
                logits = np.stack([self._on_cpu(step) for step in steps])
                written = logits[np.arange(len(steps)), [*ids, EOS][: len(steps)]]
                found[k] = (logits[:, tokens[k]] - written).tolist()  # the normaliser cancels
        return found

    def _chunked(self, sources, rows: Sequence[int], size: int, submit):
        """`rows` (indices of `sources`) sorted by length, in batches of `size` that
        `submit(rows, positions)` starts at once; each batch's positions in `rows` and its
        results."""
        order = sorted(range(len(rows)), key=lambda k: len(sources[rows[k]]))
        parts = [order[at : at + size] for at in range(0, len(order), size)]
        pending = [submit([rows[k] for k in part], part) for part in parts]
        return zip(parts, pending, strict=True)

    def _on_cpu(self, view) -> np.ndarray:
        """A StorageView of logits as a float32 array on the CPU, whatever its device and
        type."""
        view = view.to(self.ctranslate2.DataType.float32)
        return np.asarray(view.to_device(self.ctranslate2.Device.cpu))

    def _submit(
        self,
        sources: Sequence[np.ndarray],
        rows: Sequence[int],
        never: list[int],
        limits: list[int],
        decode_cfg: DecodeConfig,
        prefixes: Sequence[list[int]] | None = None,
    ):
        """Start the search of the sources of `rows` (their own EOS left to
        `add_source_eos`), suppressing `never` (<unk>: disable_unk); with `prefixes`
        (target ids, one for each of `rows`), each translation starts with its prefix."""
        piece = self.tgt_tok.id_to_piece
        tokens = [[self.src_pieces[t] for t in sources[i][:-1]] for i in rows]
        # all `beam` hypotheses asked for, `nbest` kept: with fewer, CTranslate2 stops as
        # soon as its top beam ends, before later hypotheses that may score better
        wanted = bool(decode_cfg.nbest)
        beam = decode_cfg.beam
        options = {"beam_size": beam, "num_hypotheses": beam if wanted else 1}
        if decode_cfg.sample:  # CTranslate2 samples through its greedy search: beam 1
            options = {
                "beam_size": 1,
                "num_hypotheses": max(decode_cfg.nbest, 1),
                "sampling_topk": decode_cfg.topk if decode_cfg.temperature else 1,
                "sampling_topp": decode_cfg.topp,
                "sampling_temperature": decode_cfg.temperature or 1.0,
            }
        longest = max(limits[i] + (len(p) if prefixes else 0) for i, p in
                      zip(rows, prefixes or [[]] * len(rows), strict=True))  # fmt: skip
        longest = min(longest, self.max_positions - 1)  # BOS takes one of the positions
        if prefixes is not None:
            options["target_prefix"] = [[piece(t) for t in p] for p in prefixes]
        return self.engine.translate_batch(
            tokens,
            **options,
            length_penalty=decode_cfg.length_penalty,
            max_decoding_length=longest,
            min_decoding_length=0,
            no_repeat_ngram_size=decode_cfg.no_repeat_ngram,
            return_scores=bool(decode_cfg.nbest or decode_cfg.sample),
            disable_unk=True,
            suppress_sequences=[[piece(i)] for i in never if i != UNK],
            asynchronous=True,
        )


def _hypotheses(result) -> list[tuple[list[str], float]]:
    """The hypotheses of one asynchronous result, best first, with their scores (NaN where
    none were asked for). CTranslate2 reports what stops it (e.g. a CUDA library it was
    built for is missing) as a RuntimeError: one line."""
    try:
        found = result.result()
    except RuntimeError as exc:
        raise UserError(f"CTranslate2 could not translate: {exc}") from None
    scores = found.scores or [float("nan")] * len(found.hypotheses)
    return list(zip(found.hypotheses, scores, strict=True))
