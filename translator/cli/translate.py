"""`translator translate`: lines in, translations out, from arguments, a file or stdin."""

from __future__ import annotations

import json
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
        json.dumps({"source": line, "hypotheses": [h._asdict() for h in found]}, ensure_ascii=False)
        for line, found in zip(lines, results, strict=True)
    ]


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
