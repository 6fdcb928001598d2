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
from translator.data import names
from translator.data.tokenizer import UNK, load_tokenizer
from translator.errors import UserError
from translator.inference import precision
from translator.inference.search import NEVER_OUTPUT, length_penalty
from translator.inference.text import Batch, TextTranslator, missing_terms
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
        self.workers = 1  # translators decoding batches in parallel

    def batch_size(self) -> int:
        """decode.batch_size, and with several translators at most SHARED_BATCH: batches
        small enough that each translator has some (measured:
        docs/performance.md#decoding-engine-and-precision)."""
        size = self.decode_cfg.batch_size
        return min(size, SHARED_BATCH) if self.workers > 1 else size

    @classmethod
    def from_dir(
        cls,
        model_dir: str | Path,
        decode_cfg: DecodeConfig | None = None,
        device: str = "cpu",
        threads: int = 0,
        workers: int = 1,
    ) -> CTranslate2Translator:
        """Load an exported directory. `decode_cfg`: the settings to use (default: the ones
        exported with the model), its `precision` the compute type; `threads` per worker
        (0: CTranslate2's default)."""
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
        prefix = meta.get("src_prefix", "")
        translator = cls(engine, src_tok, tgt_tok, decode_cfg, meta["max_positions"], prefix)
        translator.precision, translator.precision_reason = chosen, why
        translator.workers = workers
        words = model_dir / SOURCE_WORDS
        if words.is_file():
            translator.known_words = names.known(words.read_text(encoding="ascii").split("\n"))
        return translator

    def hypotheses(
        self,
        sources: Sequence[np.ndarray],
        guarded: Sequence[bool] | None = None,
        terms: Sequence[Sequence[list[int]]] | None = None,
    ) -> list[list[tuple[list[int], float]]]:
        limits = self.limits([len(s) for s in sources]).tolist()
        batches = self.batches(sources, guarded, terms)
        if self.decode_cfg.sample:
            self.ctranslate2.set_random_seed(self.decode_cfg.seed)
        pending = [self._submit(batch, sources, limits) for batch in batches]
        outputs: list[list[tuple[list[int], float]]] = [[] for _ in sources]
        for batch, results in zip(batches, pending, strict=True):
            keep = None if batch.constrained else max(self.decode_cfg.nbest, 1)
            for i, result in zip(batch.rows, results, strict=True):
                outputs[i] = [
                    ([self.tgt_tok.piece_to_id(p) for p in pieces[: limits[i]]], score)
                    for pieces, score in _hypotheses(result)[:keep]
                ]
        for batch in batches:
            if batch.constrained:
                TermInsertion(self, batch, sources, limits, terms).run(outputs)
        return outputs

    def _submit(
        self,
        batch: Batch,
        sources: Sequence[np.ndarray],
        limits: list[int],
        prefixes: Sequence[list[int]] | None = None,
        rows: Sequence[int] | None = None,
    ):
        """Start one batch (the source's own EOS left to `add_source_eos`); a guarded one
        also suppresses the digit pieces. A constrained one keeps every hypothesis of a
        beam of at least decode.glossary_beam, with scores; with `prefixes` (target ids,
        one for each of `rows`), each translation starts with its prefix (TermInsertion)."""
        decode_cfg, rows = self.decode_cfg, batch.rows if rows is None else rows
        suppressed = self.suppressed
        if batch.guarded:
            suppressed = suppressed + [[self.tgt_tok.id_to_piece(i)] for i in self.digit_pieces]
        tokens = [[self.src_pieces[t] for t in sources[i][:-1]] for i in rows]
        beam = (
            max(decode_cfg.beam, decode_cfg.glossary_beam) if batch.constrained else decode_cfg.beam
        )
        # all `beam` hypotheses asked for, `nbest` kept: with fewer, CTranslate2 stops as
        # soon as its top beam ends, before later hypotheses that may score better
        wanted = bool(decode_cfg.nbest or batch.constrained) and prefixes is None
        options = {"beam_size": beam, "num_hypotheses": beam if wanted else 1}
        if decode_cfg.sample:  # CTranslate2 samples through its greedy search: beam 1
            options = {
                "beam_size": 1,
                "num_hypotheses": max(decode_cfg.nbest, 1) if prefixes is None else 1,
                "sampling_topk": decode_cfg.topk if decode_cfg.temperature else 1,
                "sampling_topp": decode_cfg.topp,
                "sampling_temperature": decode_cfg.temperature or 1.0,
            }
        longest = max(limits[i] + (len(p) if prefixes else 0) for i, p in
                      zip(rows, prefixes or [[]] * len(rows), strict=True))  # fmt: skip
        longest = min(longest, self.max_positions - 1)  # BOS takes one of the positions
        if prefixes is not None:
            options["target_prefix"] = [[self.tgt_tok.id_to_piece(t) for t in p] for p in prefixes]
        return self.engine.translate_batch(
            tokens,
            **options,
            length_penalty=decode_cfg.length_penalty,
            max_decoding_length=longest,
            min_decoding_length=0,
            no_repeat_ngram_size=decode_cfg.no_repeat_ngram,
            return_scores=bool(decode_cfg.nbest or decode_cfg.sample or batch.constrained),
            disable_unk=True,
            suppress_sequences=suppressed,
            asynchronous=True,
        )

    def log_probability(
        self, sources: Sequence[np.ndarray], rows: Sequence[int], outputs: Sequence[list[int]]
    ) -> list[float]:
        """The model's log-probability of each output (ids, then EOS) for the source of its
        row, as CTranslate2 scores it."""
        tokens = [[self.src_pieces[t] for t in sources[i][:-1]] for i in rows]
        target = [[self.tgt_tok.id_to_piece(t) for t in ids] for ids in outputs]
        return [sum(r.log_probs) for r in self.engine.score_batch(tokens, target)]

    constrained_search = "term insertion (CTranslate2 target prefixes: TermInsertion)"


class TermInsertion:
    """The glossary on the CTranslate2 engine, which has no constrained search: of a
    constrained batch's hypotheses (a beam of at least decode.glossary_beam, all kept), the
    best that holds every term wins. Where none does, the best hypothesis takes its first
    missing term at each place in turn (a target prefix: its first tokens, then the
    term's), CTranslate2 finishes each, scores each whole (log P / GNMT's length penalty, as
    our search ranks), and the best that holds the most terms is the next to take one,
    until every term is in or no place adds one. A term is not put after a mark that ends a
    sentence (。？！), as the constrained search does not end one before its terms."""

    def __init__(self, engine, batch: Batch, sources, limits: list[int], terms):
        self.engine, self.batch, self.sources, self.limits = engine, batch, sources, limits
        self.terms = {i: terms[i] for i in batch.rows}
        self.chinese = {i: [engine.tgt_tok.decode(t) for t in terms[i]] for i in batch.rows}
        self.keep = max(engine.decode_cfg.nbest, 1)

    def missing(self, row: int, ids: list[int]) -> list[int]:
        """The indices of `row`'s terms that the output `ids` does not hold."""
        text = self.engine.detokenize(ids)
        chinese = self.chinese[row]
        return [chinese.index(term) for term in missing_terms(chinese, text)]

    def run(self, outputs: list[list[tuple[list[int], float]]]) -> None:
        """Each constrained row's hypotheses, in `outputs`, made to hold its terms."""
        todo = {}
        for i in self.batch.rows:
            found = sorted(outputs[i], key=lambda h: len(self.missing(i, h[0])))  # stable
            outputs[i] = found[: self.keep]
            if found and self.missing(i, found[0][0]):
                todo[i] = found[0][0]
        while todo:
            todo = self.insert(todo, outputs)

    def insert(self, bases: dict[int, list[int]], outputs) -> dict[int, list[int]]:
        """One round: each row's first missing term at every place of its base; returns
        the rows that still miss a term, with their new base."""
        rows, prefixes = [], []
        room = self.engine.max_positions - 1  # what a prefix and its ending may take
        ends = set(self.engine.sentence_ends)
        for i, base in bases.items():
            term = self.terms[i][self.missing(i, base)[0]]
            for place in range(min(len(base), room - len(term)) + 1):
                if place and base[place - 1] in ends:  # not after the sentence: "…。显卡"
                    continue
                rows.append(i)
                prefixes.append(base[:place] + term)
        if not rows:
            return {}
        results = self.engine._submit(self.batch, self.sources, self.limits, prefixes, rows)
        finished = []
        for i, prefix, result in zip(rows, prefixes, results, strict=True):
            pieces = _hypotheses(result)[0][0]
            ids = [self.engine.tgt_tok.piece_to_id(p) for p in pieces]
            finished.append(ids[: max(self.limits[i], len(prefix))])
        logp = self.engine.log_probability(self.sources, rows, finished)
        alpha = self.engine.decode_cfg.length_penalty
        by_row: dict[int, list[tuple[list[int], float]]] = {i: [] for i in bases}
        for i, ids, total in zip(rows, finished, logp, strict=True):
            by_row[i].append((ids, total / length_penalty(len(ids) + 1, alpha)))
        todo = {}
        for i, found in by_row.items():
            if not found:  # the term does not fit in the model's positions
                continue
            found.sort(key=lambda h: (len(self.missing(i, h[0])), -h[1]))
            outputs[i] = found[: self.keep]
            left = len(self.missing(i, found[0][0]))
            if left and left < len(self.missing(i, bases[i])):
                todo[i] = found[0][0]
        return todo


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
