"""`translator eval`: translate a test set with a model (either engine) and score it; the
hypotheses and the scores are written beside what was decoded.

Without --src the test set is the prepared split, each distinct English sentence once
against all its translations (layout.read_references); with --src, a source file and
reference files line-aligned with it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from translator.config import Config
from translator.data.layout import read_references, split_file
from translator.data.lines import write_lines
from translator.errors import UserError
from translator.evaluation.scoring import Scores, read_eval_set, score
from translator.inference.engines import open_translator, output_origin


@dataclass
class EvalResult:
    scores: Scores
    hypotheses: Path


def evaluate_files(
    config: Config,
    checkpoint: Path,
    src: Path | None = None,
    refs: Sequence[Path] = (),
    split: str = "test",
) -> EvalResult:
    """Translate `src` with `checkpoint` and score it against `refs`; without `src`, the
    prepared `split` (each distinct English sentence once, against all its translations).
    Writes the hypotheses and scores beside the checkpoint."""
    if src is None:
        src = split_file(config.data.dir, split, "en")
        if not src.is_file():
            raise UserError(
                f"no {split} split at {src}: run `translator prepare` first, "
                "or pass --src and --ref"
            )
        sources, references = read_references(config.data.dir, split)
        if not sources:
            raise UserError(
                f"the {split} split in {config.data.dir} is empty (data.{split}_size = 0?): "
                "pass --src and --ref"
            )
    else:
        sources, references = read_eval_set(src, refs)
    hypotheses = open_translator(config, checkpoint).translate(sources, split=False, nbest=0)
    scores = score(hypotheses, references)
    search = "" if config.decode.beam == 1 else f".beam{config.decode.beam}"
    origin = output_origin(config, checkpoint)
    hyp_path = origin.with_name(f"{origin.stem}.{src.name}{search}.hyp")
    write_lines(hyp_path, hypotheses)
    hyp_path.with_suffix(".scores.json").write_text(json.dumps(scores.to_dict(), indent=2) + "\n")
    return EvalResult(scores, hyp_path)
