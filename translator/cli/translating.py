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
    CheckpointOpt,
    ConfigOpt,
    DeviceOpt,
    SetOpt,
    command,
    decode_options,
    default_checkpoint,
    setup_process,
)
from translator.errors import UserError


@command()
@decode_options("engine", "search", "text")
def translate(
    text: Annotated[
        list[str] | None, typer.Argument(help="Sentences to translate; '-' reads stdin.")
    ] = None,
    config_file: ConfigOpt = config_module.DEFAULT_CONFIG,
    input: Annotated[  # noqa: A002
        Path | None,
        typer.Option(
            "--input",
            "-i",
            help="File of English text; each line is split into sentences and gives one "
            "output line. A document (.docx .pptx .odt .epub .html .md .srt .vtt .po .xliff) "
            "is translated with its structure kept.",
        ),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write translations here.")
    ] = None,
    format_: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="Read --input as this format (txt, md, html, srt, vtt, docx, pptx, odt, epub, "
            "po, pot, xliff) whatever its extension.",
        ),
    ] = None,
    retranslate: Annotated[
        bool,
        typer.Option(
            "--retranslate", help="PO and XLIFF: translate again the entries translated already."
        ),
    ] = False,
    checkpoint: CheckpointOpt = None,
    device: DeviceOpt = None,
    report_time: Annotated[
        bool,
        typer.Option(
            "--report-time", help="Say on stderr how long translating took, and lines a second."
        ),
    ] = False,
    set_: SetOpt = None,
    decode: dict | None = None,
):
    """Translate English into Chinese (greedy, beam search with --beam, or --sample), each
    line split into sentences; --glossary decides how its terms are translated. Without
    text: a prompt on a terminal, else stdin line by line as it arrives."""
    import time

    from translator.data.lines import read_lines, read_stdin_lines
    from translator.inference.text import Translator

    document = read_document(input, output, format_, retranslate, bool(text))
    streaming = (not text or text == ["-"]) and input is None
    sentences: list[str] = []
    for item in [] if streaming else text or []:
        sentences.extend(read_stdin_lines() if item == "-" else [item])
    if input is not None and document is None:
        sentences.extend(read_lines(input))
    config = config_module.load(config_file, set_ or [], {"train.device": device} | decode)
    setup_process()
    translator = Translator.open(config, default_checkpoint(config, checkpoint))
    started = time.perf_counter()
    opened(translator, config.decode.glossary)
    if streaming:
        translate_stdin(translator, output, interactive=not text and sys.stdin.isatty())
        report(translator)
        return
    if document is not None:
        count, what = translate_document(translator, document, output), "units"
    else:
        write_translations(translator, sentences, output)
        count, what = len(sentences), "lines"
    if report_time:
        seconds = time.perf_counter() - started
        typer.echo(
            f"translated {count:,} {what} in {seconds:.2f} s "
            f"({count / max(seconds, 1e-9):,.1f} {what}/s, the model loaded)",
            err=True,
        )
    report(translator)


def opened(translator, glossary_file: str) -> None:
    """What translate says on stderr once the model is open: which model and engine, and
    the glossary (loaded here, before anything is translated)."""
    glossary = translator.glossary  # a bad one is the one line printed
    typer.echo(translator.model_line, err=True)
    typer.echo(translator.engine_line, err=True)
    if glossary is not None:
        typer.echo(
            f"glossary: {len(glossary):,} entries from {glossary_file}; "
            f"terms are kept by {translator.terms.mechanism(translator.decode_cfg)}",
            err=True,
        )


def write_translations(translator, sentences: list[str], output: Path | None) -> None:
    """`sentences` translated, one output line each, into --output or stdout."""
    from translator.data.lines import write_lines

    results = rendered(sentences, translator.translate(sentences))
    if output is not None:
        write_lines(output, results)
    else:
        sys.stdout.write("".join(r + "\n" for r in results))


def read_document(
    path: Path | None, output: Path | None, given: str | None, retranslate: bool, texts: bool
):
    """The document --input holds, read and checked before a model is loaded (so that a
    file that cannot be read is the one line printed); None for lines of text (.txt, and
    any extension no format has, without --format)."""
    from translator.documents.conversion import media_type, read
    from translator.documents.document import FORMATS, format_name

    if path is None:
        if given or retranslate:
            raise UserError("--format and --retranslate go with --input FILE")
        return None
    suffix = path.suffix.lower().lstrip(".")
    if given is None and suffix not in FORMATS.names() or (given or suffix) == "txt":
        if retranslate:
            raise UserError("--retranslate is for PO and XLIFF files")
        return None
    name = format_name(path, given)
    if retranslate and name not in ("po", "pot", "xliff", "xlf"):
        raise UserError("--retranslate is for PO and XLIFF files")
    if texts:
        raise UserError(f"{path} is a document: it is translated alone, without text arguments")
    if output is None and not media_type(name).startswith("text/"):
        raise UserError(f"a .{name} translation is a file: give --output FILE")
    if output is not None and output.resolve() == path.resolve():
        raise UserError(f"{output}: the output would overwrite the input; name another file")
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    return read(path.read_bytes(), name, retranslate)


def translate_document(translator, document, output: Path | None) -> int:
    """A document translated into --output (or stdout), and a line on stderr of what was
    translated and what lost its formatting."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        target = output or Path(tmp) / "translation"
        counts = translator.translate_document(document, target)
        if output is None:
            sys.stdout.buffer.write(target.read_bytes())
    notes = [f"{counts.spans_near:,} placed approximately"] if counts.spans_near else []
    if counts.spans_unplaced:
        notes.append(f"{counts.spans_unplaced:,} lost their formatting, not their words")
    line = f"document: {counts.units:,} units translated, {counts.spans:,} formatted spans"
    line += f" ({'; '.join(notes)})" if notes else ""
    if counts.kept_moved:
        line += f"; {counts.kept_moved:,} kept pieces (code, placeholders) put at their "
        line += "paragraph's end"
    typer.echo(line + (f"; written to {output}" if output else ""), err=True)
    return counts.units


def report(translator) -> None:
    """translate's summary on stderr: protected spans lost or moved, glossary terms, names."""
    lost, appended = translator.counts["spans_lost"], translator.counts["spans_appended"]
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
    if translator.glossary is not None:
        terms, missed = translator.counts["terms"], translator.counts["terms_missed"]
        held = "all of them written as the glossary has them"
        if missed:
            held = f"{missed:,} of them not written as the glossary has them; --nbest 1 names them"
        typer.echo(
            f"glossary: {terms:,} term{'s' if terms != 1 else ''} in the input, {held}", err=True
        )
    if names := translator.counts["names_kept"]:
        typer.echo(
            f"note: {names} name{'s' if names > 1 else ''} the model never saw in training "
            "carried through as written (decode.keep_names)",
            err=True,
        )


def rendered(lines: list[str], results: list) -> list[str]:
    """The output lines: the translations, or with --nbest one JSON object a line
    (docs/translating.md#n-best-lists-and-scores)."""
    if not results or isinstance(results[0], str):
        return results
    return [
        json.dumps({"source": line, "hypotheses": [_fields(h) for h in found]}, ensure_ascii=False)
        for line, found in zip(lines, results, strict=True)
    ]


def _fields(hypothesis) -> dict:
    """A hypothesis as JSON fields; a score that was not computed (NaN) as null."""
    score = hypothesis.score
    return hypothesis._asdict() | {"score": None if math.isnan(score) else score}


def translate_stdin(translator, output: Path | None, interactive: bool) -> None:
    """The prompt loop on a terminal; otherwise stdin translated as its lines arrive."""
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


@command("eval")
@decode_options("engine", "search", "text", exclude=("split", "glossary", "nbest"))
def evaluate(
    config_file: ConfigOpt = config_module.DEFAULT_CONFIG,
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
    device: DeviceOpt = None,
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
    decode: dict | None = None,
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
    given = {"train.device": device, "decode.glossary": glossary and str(glossary)}
    config = config_module.load(config_file, set_ or [], given | decode)
    for wrong, message in (
        ((src is None) != (not ref), "--src and --ref go together"),
        (split not in ("test", "valid"), f"--split must be test or valid, got {split!r}"),
        (robust and src is not None, "--robustness scores a prepared split (--split), not --src"),
        (as_json and not robust, "--json goes with --robustness"),
        (entities < 1, f"--entities must be at least 1, got {entities}"),
    ):
        if wrong:
            raise UserError(message)
    setup_process()
    path = default_checkpoint(config, checkpoint)
    if robust:
        print_robustness(*evaluate_robustness(config, path, split, entities), as_json)
        return
    result = evaluate_files(config, path, src, ref or [], split)
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
    """The lines eval prints: BLEU, chrF, first-reference-only scores, what was scored."""
    typer.echo(f"BLEU = {s.bleu:.2f}  {s.bleu_signature}")
    typer.echo(f"chrF = {s.chrf:.2f}  {s.chrf_signature}")
    if s.references > s.sentences:
        typer.echo(
            f"first reference only: BLEU = {s.bleu_1ref:.2f}, chrF = {s.chrf_1ref:.2f}  "
            f"{s.bleu_1ref_signature}"
        )
    typer.echo(f"{s.sentences:,} sentences, {s.references:,} references; {origin}")
