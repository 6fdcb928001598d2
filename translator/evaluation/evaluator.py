"""`translator eval`: translate a test set with a model (either engine) and score it; the
hypotheses and the scores are written beside what was decoded. The test set is the
prepared split (each distinct English sentence once, against all its translations), or a
source file and references line-aligned with it (--src, --ref).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from translator.config import Config
from translator.data.layout import read_references, split_file
from translator.data.lines import write_lines
from translator.errors import UserError
from translator.evaluation.robustness import Robustness, robustness
from translator.evaluation.scoring import Scores, read_eval_set, score
from translator.evaluation.terminology import TermScores, term_scores
from translator.inference.text import Translator

log = logging.getLogger(__name__)


@dataclass
class EvalResult:
    scores: Scores
    hypotheses: Path
    terms: TermScores | None = None  # with decode.glossary: the glossary's figures


def evaluate_files(
    config: Config,
    checkpoint: Path,
    src: Path | None = None,
    refs: Sequence[Path] = (),
    split: str = "test",
) -> EvalResult:
    """Translate `src` (default: the prepared `split`) with `checkpoint`, score it against
    `refs`, write both beside it; with decode.glossary, also without it (terminology.py)."""
    if src is None:
        src = split_file(config.data.dir, split, "en")
        sources, references = split_references(config, split)
    else:
        sources, references = read_eval_set(src, refs)
    translator = opened(config, checkpoint)
    hypotheses = translator.translate(sources, split=False, nbest=0)
    scores = score(hypotheses, references)
    hyp_path = output_name(translator, f"{src.name}{search_name(config)}.hyp")
    write_lines(hyp_path, hypotheses)
    hyp_path.with_suffix(".scores.json").write_text(json.dumps(scores.to_dict(), indent=2) + "\n")
    if translator.glossary is None:
        return EvalResult(scores, hyp_path)
    plain = translator.with_decode(glossary="").translate(sources, split=False, nbest=0)
    terms = term_scores(translator.glossary, sources, references, plain, hypotheses)
    write_lines(hyp_path.with_suffix(".without-glossary.hyp"), plain)
    hyp_path.with_suffix(".terms.json").write_text(json.dumps(terms.to_dict(), indent=2) + "\n")
    return EvalResult(scores, hyp_path, terms)


def evaluate_robustness(
    config: Config, checkpoint: Path, split: str = "test", entity_sentences: int = 500
) -> tuple[Robustness, Path]:
    """`eval --robustness` on the prepared `split`, written as JSON beside the checkpoint."""
    sources, references = split_references(config, split)
    translator = opened(config, checkpoint)
    result = robustness(translator, sources, references, entity_sentences)
    path = output_name(translator, f"{split}{search_name(config)}.robustness.json")
    path.write_text(json.dumps(result.to_dict(), indent=2, ensure_ascii=False) + "\n")
    return result, path


def split_references(config: Config, split: str) -> tuple[list[str], list[list[str]]]:
    """The prepared `split`: each distinct English sentence once, with all its translations."""
    src = split_file(config.data.dir, split, "en")
    if not src.is_file():
        raise UserError(
            f"no {split} split at {src}: run `translator prepare` first, or pass --src and --ref"
        )
    sources, references = read_references(config.data.dir, split)
    if not sources:
        raise UserError(
            f"the {split} split in {config.data.dir} is empty (data.{split}_size = 0?): "
            "pass --src and --ref"
        )
    return sources, references


def search_name(config: Config) -> str:
    """How the outputs were searched, for their file names."""
    decode = config.decode
    beam = "" if decode.beam == 1 else f".beam{decode.beam}"
    digits = "" if decode.digit_guard else ".no-digit-guard"
    spans = "" if decode.span_guard else ".no-span-guard"
    glossary = f".glossary-{Path(decode.glossary).stem}" if decode.glossary else ""
    return beam + digits + spans + glossary


def opened(config: Config, checkpoint: Path) -> Translator:
    """The engine, its glossary loaded (a bad one stops here), and its line logged."""
    translator = Translator.open(config, checkpoint)
    translator.glossary  # noqa: B018 - loading it is the check
    log.info(translator.model_line)
    log.info(translator.engine_line)
    return translator


def output_name(translator: Translator, suffix: str) -> Path:
    """A file beside what was decoded from (the checkpoint, or the CTranslate2 directory)."""
    origin = translator.engine.about.origin
    return origin.with_name(f"{origin.stem}.{suffix}")
