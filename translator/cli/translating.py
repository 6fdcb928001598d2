"""Using a model, as docs/translating.md describes it: `translator translate` (lines in,
translations out, from arguments, a file or stdin) and `translator eval` (a model scored on
a test set, as users type it, with a glossary)."""

from __future__ import annotations

import json
import math
import sys
from contextlib import nullcontext
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
    GlossaryOpt,
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


@app.command()
@user_errors
def translate(
    text: Annotated[
        list[str] | None, typer.Argument(help="Sentences to translate; '-' reads stdin.")
    ] = None,
    config_file: ConfigOpt = DEFAULT_CONFIG,
    input: Annotated[  # noqa: A002
        Path | None, typer.Option("--input", "-i", help="File with one sentence a line.")
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write translations here.")
    ] = None,
    checkpoint: CheckpointOpt = None,
    beam: BeamOpt = None,
    length_penalty: PenaltyOpt = None,
    device: DeviceOpt = None,
    engine: EngineOpt = None,
    model: ModelDirOpt = None,
    split: Annotated[
        bool | None,
        typer.Option(
            "--split/--no-split",
            help="Split each line into sentences and join their translations (default: on).",
        ),
    ] = None,
    nbest: Annotated[
        int | None,
        typer.Option(
            "--nbest", help="Write the N best translations with scores, a JSON object a line."
        ),
    ] = None,
    no_repeat_ngram: Annotated[
        int | None,
        typer.Option("--no-repeat-ngram", help="Never write an n-gram of this size twice."),
    ] = None,
    sample: Annotated[
        bool | None, typer.Option("--sample", help="Draw tokens at random instead of searching.")
    ] = None,
    topk: Annotated[int | None, typer.Option("--topk", help="Sample from the k best.")] = None,
    topp: Annotated[
        float | None, typer.Option("--topp", help="Sample from the top p of probability.")
    ] = None,
    temperature: Annotated[
        float | None, typer.Option("--temperature", help="Sampling temperature (0: greedy).")
    ] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Sampling's random seed.")] = None,
    glossary: GlossaryOpt = None,
    precision: PrecisionOpt = None,
    report_time: Annotated[
        bool,
        typer.Option(
            "--report-time", help="Say on stderr how long translating took, and lines a second."
        ),
    ] = False,
    set_: SetOpt = None,
):
    """Translate English into Chinese (greedy, beam search with --beam, or --sample), each
    line split into sentences; --glossary decides how its terms are translated. Without
    text: a prompt on a terminal, else stdin line by line as it arrives."""
    import time

    from translator.data.lines import read_lines, read_stdin_lines, write_lines
    from translator.inference.text import Translator

    streaming = (not text or text == ["-"]) and input is None
    sentences: list[str] = []
    for item in [] if streaming else text or []:
        sentences.extend(read_stdin_lines() if item == "-" else [item])
    if input is not None:
        sentences.extend(read_lines(input))
    decoding = {
        "decode.split": split,
        "decode.nbest": nbest,
        "decode.no_repeat_ngram": no_repeat_ngram,
        "decode.sample": sample,
        "decode.topk": topk,
        "decode.topp": topp,
        "decode.temperature": temperature,
        "decode.seed": seed,
    }
    values = run_options(device, beam, length_penalty, engine, model, glossary, precision)
    config = config_module.load(config_file, set_ or [], values | decoding)
    setup_process()
    translator = Translator.open(config, default_checkpoint(config, checkpoint))
    started = time.perf_counter()
    glossary = translator.glossary  # loaded before anything is translated
    typer.echo(translator.model_line, err=True)
    typer.echo(translator.engine_line, err=True)
    if glossary is not None:
        typer.echo(
            f"glossary: {len(translator.glossary):,} entries from {config.decode.glossary}; "
            f"terms are kept by {translator.terms.mechanism(translator.decode_cfg)}",
            err=True,
        )
    if streaming:
        translate_stdin(translator, output, interactive=not text and sys.stdin.isatty())
    else:
        results = rendered(sentences, translator.translate(sentences))
        if output is not None:
            write_lines(output, results)
        else:
            sys.stdout.write("".join(r + "\n" for r in results))
        if report_time:
            seconds = time.perf_counter() - started
            typer.echo(
                f"translated {len(sentences):,} lines in {seconds:.2f} s "
                f"({len(sentences) / max(seconds, 1e-9):,.1f} lines/s, the model loaded)",
                err=True,
            )
    report_spans(translator.spans_lost, translator.spans_appended)
    if translator.glossary is not None:
        report_terms(translator.counts["terms"], translator.counts["terms_missed"])
    if names := translator.counts["names_kept"]:
        typer.echo(
            f"note: {names} name{'s' if names > 1 else ''} the model never saw in training "
            "carried through as written (decode.keep_names)",
            err=True,
        )


def report_terms(terms: int, missed: int) -> None:
    """translate's summary of the glossary, on stderr: its terms in the input and how many
    of them the translations do not hold."""
    held = (
        "all of them written as the glossary has them"
        if not missed
        else (f"{missed:,} of them not written as the glossary has them; --nbest 1 names them")
    )
    typer.echo(
        f"glossary: {terms:,} term{'s' if terms != 1 else ''} in the input, {held}", err=True
    )


def report_spans(lost: int, appended: int) -> None:
    """translate's summary, on stderr: the protected spans its translations lost, and those
    decode.span_guard put at the end of their sentence."""
    if lost:
        typer.echo(
            f"warning: {lost} protected span{'s' if lost > 1 else ''} (URLs, e-mail "
            "addresses, numbers, codes…) missing from the translations; --nbest 1 names them",
            err=True,
        )
    if appended:
        typer.echo(
            f"note: {appended} protected span{'s' if appended > 1 else ''} the model did not "
            "write put at the end of their sentence (decode.span_guard); --nbest 1 names them",
            err=True,
        )


def rendered(lines: list[str], results: list) -> list[str]:
    """The output lines: the translations, or with --nbest one JSON object a line:
    {"source": ..., "hypotheses": [{"text": ..., "score": ..., "lost": [...],
    "appended": [...], "missed": [...]}, ...]}, best first, scores to 4 decimals, `lost` the
    protected spans the hypothesis lacks, `appended` those decode.span_guard put at the end
    of their sentence, `missed` the glossary's Chinese it does not hold."""
    if not results or isinstance(results[0], str):
        return results
    return [
        json.dumps({"source": line, "hypotheses": [_fields(h) for h in found]}, ensure_ascii=False)
        for line, found in zip(lines, results, strict=True)
    ]


def _fields(hypothesis) -> dict:
    """A hypothesis as JSON fields; a score that was not computed (NaN) as null."""
    fields = hypothesis._asdict()
    if math.isnan(fields["score"]):
        fields["score"] = None
    return fields


def translate_stdin(translator, output: Path | None, interactive: bool) -> None:
    """The prompt loop on a terminal; otherwise stdin translated as its lines arrive, each
    batch written (to stdout or `output`) and flushed as soon as it is decoded."""
    from translator.inference.stream import decoded_lines, prompt_loop, translate_stream

    if interactive and output is None:
        prompt_loop(lambda lines: rendered(lines, translator.translate(lines)))
        return
    with nullcontext(sys.stdout) if output is None else output.open("w", encoding="utf-8") as sink:

        def write(lines: list[str], results: list) -> None:
            sink.write("".join(r + "\n" for r in rendered(lines, results)))
            sink.flush()

        lines = decoded_lines(sys.stdin.buffer)
        translate_stream(translator.translate, lines, write, translator.decode_cfg.batch_size)


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
