"""CTranslate2 as the engine (`--engine ctranslate2 --model DIR`): a directory written by
`translator export` decoded through the same normalisation, batching and output path as
our own model (`TextTranslator`); only the search differs. This module also owns the
layout of that directory (the files `translator export` writes and this engine reads).

Differences from our decoder, and what is done about them: CTranslate2 takes one
`max_decoding_length` per call where we limit each sentence (a × source tokens + b), so a
batch asks for its longest limit and each output is cut to its own (exact for greedy);
its `min_decoding_length` is set to 0, as we allow an empty output; <pad>, <s> and <unk>
are never written, as in ours; its length penalty divides by L^α where ours is GNMT's
((5+L)/6)^α, so beam search may choose differently on some sentences (docs/deploy.md
states how often). Batches are submitted asynchronously so that `workers` translators of
`threads` threads each run in parallel.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from translator.config import DecodeConfig, from_dict
from translator.data.tokenizer import UNK, load_tokenizer
from translator.errors import UserError
from translator.inference.search import NEVER_OUTPUT
from translator.inference.text import Batch, TextTranslator

# an exported directory: CTranslate2's model files, then ours
METADATA = "translator.json"  # decoding defaults, max_positions, the model section
SOURCE_SPM, TARGET_SPM = "source.spm.model", "target.spm.model"


def require_ctranslate2() -> Any:
    try:
        import ctranslate2
    except ImportError:
        raise UserError(
            'CTranslate2 is not installed: pip install "translator[ctranslate2]"'
        ) from None
    return ctranslate2


class CTranslate2Translator(TextTranslator):
    def __init__(
        self,
        engine,
        src_tok,
        tgt_tok,
        decode_cfg: DecodeConfig,
        max_positions: int,
        src_prefix: str = "",
    ):
        super().__init__(src_tok, tgt_tok, decode_cfg, max_positions, src_prefix)
        self.engine = engine
        self.ctranslate2 = require_ctranslate2()
        self.src_pieces = [src_tok.id_to_piece(i) for i in range(src_tok.get_piece_size())]
        # what our decoder never writes, as CTranslate2 suppresses it (<unk>: disable_unk)
        self.suppressed = [[tgt_tok.id_to_piece(i)] for i in NEVER_OUTPUT if i != UNK]

    @classmethod
    def from_dir(
        cls,
        model_dir: str | Path,
        decode_cfg: DecodeConfig | None = None,
        device: str = "cpu",
        threads: int = 0,
        workers: int = 1,
        compute_type: str = "default",
    ) -> CTranslate2Translator:
        """Load an exported directory. `decode_cfg`: the settings to use (default: the ones
        exported with the model); `threads` per worker (0: CTranslate2's default)."""
        ctranslate2 = require_ctranslate2()
        model_dir = Path(model_dir)
        if not (model_dir / METADATA).is_file():
            raise UserError(f"{model_dir} is not a directory written by `translator export`")
        meta = json.loads((model_dir / METADATA).read_text(encoding="utf-8"))
        engine = ctranslate2.Translator(
            str(model_dir),
            device=device,
            compute_type=compute_type,
            inter_threads=workers,
            intra_threads=threads,
        )
        src_tok = load_tokenizer(model_dir / SOURCE_SPM)
        tgt_tok = load_tokenizer(model_dir / TARGET_SPM)
        decode_cfg = decode_cfg or from_dict({"decode": meta["decode"]}).decode
        prefix = meta.get("src_prefix", "")
        return cls(engine, src_tok, tgt_tok, decode_cfg, meta["max_positions"], prefix)

    def hypotheses(
        self, sources: Sequence[np.ndarray], guarded: Sequence[bool] | None = None
    ) -> list[list[tuple[list[int], float]]]:
        limits = self.limits([len(s) for s in sources]).tolist()
        batches = self.batches(sources, guarded)
        if self.decode_cfg.sample:
            self.ctranslate2.set_random_seed(self.decode_cfg.seed)
        pending = [self._submit(batch, sources, limits) for batch in batches]
        outputs: list[list[tuple[list[int], float]]] = [[] for _ in sources]
        for (rows, _), results in zip(batches, pending, strict=True):
            for i, result in zip(rows, results, strict=True):
                outputs[i] = [
                    ([self.tgt_tok.piece_to_id(p) for p in pieces[: limits[i]]], score)
                    for pieces, score in _hypotheses(result)[: max(self.decode_cfg.nbest, 1)]
                ]
        return outputs

    def _submit(self, batch: Batch, sources: Sequence[np.ndarray], limits: list[int]):
        """Start one batch (the source's own EOS left to `add_source_eos`); a guarded one
        also suppresses the digit pieces."""
        decode_cfg, rows = self.decode_cfg, batch.rows
        suppressed = self.suppressed
        if batch.guarded:
            suppressed = suppressed + [[self.tgt_tok.id_to_piece(i)] for i in self.digit_pieces]
        tokens = [[self.src_pieces[t] for t in sources[i][:-1]] for i in rows]
        # all `beam` hypotheses asked for, `nbest` kept: with fewer, CTranslate2 stops as
        # soon as its top beam ends, before later hypotheses that may score better
        options = {
            "beam_size": decode_cfg.beam,
            "num_hypotheses": decode_cfg.beam if decode_cfg.nbest else 1,
        }
        if decode_cfg.sample:  # CTranslate2 samples through its greedy search: beam 1
            options = {
                "beam_size": 1,
                "num_hypotheses": max(decode_cfg.nbest, 1),
                "sampling_topk": decode_cfg.topk if decode_cfg.temperature else 1,
                "sampling_topp": decode_cfg.topp,
                "sampling_temperature": decode_cfg.temperature or 1.0,
            }
        return self.engine.translate_batch(
            tokens,
            **options,
            length_penalty=decode_cfg.length_penalty,
            max_decoding_length=max(limits[i] for i in rows),
            min_decoding_length=0,
            no_repeat_ngram_size=decode_cfg.no_repeat_ngram,
            return_scores=bool(decode_cfg.nbest or decode_cfg.sample),
            disable_unk=True,
            suppress_sequences=suppressed,
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
