"""`translator eval`: a model scored on a test set (sacrebleu BLEU and chrF), as users type
it (--robustness), and with a glossary (--glossary)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from translator import config as config_module
from translator.cli.common import (
    DEFAULT_CONFIG,
    BeamOpt,
    CheckpointOpt,
    ConfigOpt,
    DeviceOpt,
    EngineOpt,
    ModelDirOpt,
    PenaltyOpt,
    PrecisionOpt,
    SetOpt,
    app,
    default_checkpoint,
    run_options,
    setup_process,
    user_errors,
)
from translator.errors import UserError


@app.command("eval")
@user_errors
def evaluate(
    config_file: ConfigOpt = DEFAULT_CONFIG,
    src: Annotated[Path | None, typer.Option("--src", help="English file to translate.")] = None,
    ref: Annotated[
        list[Path] | None,
        typer.Option("--ref", help="Chinese reference file, line-aligned with --src (repeatable)."),
    ] = None,
    split: Annotated[
        str, typer.Option("--split", help="Prepared split to score without --src: test or valid.")
    ] = "test",
    hyp: Annotated[
        Path | None,
        typer.Option("--hyp", help="Score this hypothesis file against --ref (no model needed)."),
    ] = None,
    checkpoint: CheckpointOpt = None,
    beam: BeamOpt = None,
    length_penalty: PenaltyOpt = None,
    device: DeviceOpt = None,
    engine: EngineOpt = None,
    model: ModelDirOpt = None,
    precision: PrecisionOpt = None,
    robust: Annotated[
        bool,
        typer.Option(
            "--robustness",
            help="Score the split lowercased, UPPERCASED, Title Cased and without final "
            "punctuation, and the entity suite (spans kept verbatim, digits invented).",
        ),
    ] = False,
    entities: Annotated[
        int, typer.Option("--entities", help="Entity-suite sentences with --robustness.")
    ] = 500,
    as_json: Annotated[
        bool, typer.Option("--json", help="With --robustness: print the result as JSON.")
    ] = False,
    glossary: Annotated[
        Path | None,
        typer.Option(
            "--glossary",
            help="Translate with this glossary (decode.glossary) and report term use and "
            "BLEU with it and without it.",
        ),
    ] = None,
    set_: SetOpt = None,
):
    """Score the model with sacrebleu BLEU (tokenize=zh) and chrF on the test split: each
    English sentence translated once, scored against all its translations. --robustness:
    the same split as users also type it, and spans that must pass through verbatim."""
    from translator.evaluation.evaluator import evaluate_files, evaluate_robustness
    from translator.evaluation.scoring import score_files

    if hyp is not None:
        if src is not None or not ref or robust:
            raise UserError("--hyp takes one or more --ref files and no --src or --robustness")
        print_scores(score_files(hyp, ref), f"hypotheses from {hyp}")
        return
    config = config_module.load(
        config_file,
        set_ or [],
        run_options(device, beam, length_penalty, engine, model, glossary, precision),
    )
    if (src is None) != (not ref):
        raise UserError("--src and --ref go together")
    if split not in ("test", "valid"):
        raise UserError(f"--split must be test or valid, got {split!r}")
    if robust and src is not None:
        raise UserError("--robustness scores a prepared split (--split), not --src")
    if as_json and not robust:
        raise UserError("--json goes with --robustness")
    if entities < 1:
        raise UserError(f"--entities must be at least 1, got {entities}")
    setup_process()
    if robust:
        print_robustness(
            *evaluate_robustness(config, default_checkpoint(config, checkpoint), split, entities),
            as_json,
        )
        return
    result = evaluate_files(config, default_checkpoint(config, checkpoint), src, ref or [], split)
    print_scores(result.scores, f"hypotheses in {result.hypotheses}")
    if result.terms is not None:
        from translator.evaluation.terminology import table

        for line in table(result.terms):
            typer.echo(line)
        typer.echo(f"written to {result.hypotheses.with_suffix('.terms.json')}")


def print_robustness(result, path: Path, as_json: bool) -> None:
    """The robustness table (or its JSON) and where the whole result was written."""
    from translator.evaluation.robustness import table

    if as_json:
        typer.echo(json.dumps(result.to_dict(), ensure_ascii=False))
        return
    for line in table(result):
        typer.echo(line)
    typer.echo(f"{result.sentences:,} test sentences in each variant; written to {path}")


def print_scores(s, origin: str) -> None:
    """The lines eval prints: BLEU, chrF (with signatures), first-reference-only scores
    when there are several, and what was scored."""
    typer.echo(f"BLEU = {s.bleu:.2f}  {s.bleu_signature}")
    typer.echo(f"chrF = {s.chrf:.2f}  {s.chrf_signature}")
    if s.references > s.sentences:
        typer.echo(
            f"first reference only: BLEU = {s.bleu_1ref:.2f}, chrF = {s.chrf_1ref:.2f}  "
            f"{s.bleu_1ref_signature}"
        )
    typer.echo(f"{s.sentences:,} sentences, {s.references:,} references; {origin}")
