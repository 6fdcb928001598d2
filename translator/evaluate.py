"""Scoring with sacrebleu: BLEU with the Chinese tokenizer (tokenize="zh") and chrF."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from sacrebleu.metrics import BLEU, CHRF

from translator.config import Config
from translator.data.prepare import read_lines, split_file
from translator.errors import UserError
from translator.inference import Translator, pick_device


@dataclass
class Scores:
    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str
    sentences: int

    def to_dict(self) -> dict:
        return asdict(self)


def score(hypotheses: Sequence[str], references: Sequence[str]) -> Scores:
    if len(hypotheses) != len(references):
        raise UserError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    if not references:
        raise UserError("nothing to score: no reference sentences")
    bleu_metric, chrf_metric = BLEU(tokenize="zh"), CHRF()
    hyps, refs = list(hypotheses), [list(references)]
    return Scores(
        bleu=bleu_metric.corpus_score(hyps, refs).score,
        chrf=chrf_metric.corpus_score(hyps, refs).score,
        bleu_signature=str(bleu_metric.get_signature()),
        chrf_signature=str(chrf_metric.get_signature()),
        sentences=len(hyps),
    )


@dataclass
class EvalResult:
    scores: Scores
    hypotheses: Path


def evaluate_files(
    config: Config, checkpoint: Path, src: Path | None, ref: Path | None, device: str
) -> EvalResult:
    """Translate `src` (default: the prepared test split) with `checkpoint`, score against
    `ref`, and write the hypotheses and scores beside the checkpoint."""
    if src is None or ref is None:
        src = split_file(config.data.dir, "test", "en")
        ref = split_file(config.data.dir, "test", "zh")
        if not src.is_file():
            raise UserError(
                f"no test split at {src}: run `translator prepare` first, or pass --src and --ref"
            )
    sources, references = read_lines(src), read_lines(ref)
    if len(sources) != len(references):
        raise UserError(f"{src} has {len(sources)} lines but {ref} has {len(references)}")
    translator, _ = Translator.from_checkpoint(checkpoint, pick_device(device), config.decode)
    hypotheses = translator.translate(sources)
    scores = score(hypotheses, references)
    search = "" if config.decode.beam == 1 else f".beam{config.decode.beam}"
    hyp_path = checkpoint.with_name(f"{checkpoint.stem}.{src.name}{search}.hyp")
    hyp_path.write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")
    hyp_path.with_suffix(".scores.json").write_text(json.dumps(scores.to_dict(), indent=2) + "\n")
    return EvalResult(scores, hyp_path)
