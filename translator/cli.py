"""The `translator` command. Each subcommand parses its options, loads the config, calls one
function and prints a short summary. Errors a user can cause end with one line on stderr
and exit code 2."""

from __future__ import annotations

import functools
import logging
import sys
from pathlib import Path
from typing import Annotated

import typer
from tqdm import tqdm

from translator import config as config_module
from translator.errors import UserError
from translator.runtime import keep_freed_memory

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="English→Chinese neural machine translation: prepare → train → translate → eval.",
)

ConfigOpt = Annotated[
    Path,
    typer.Option(
        "--config", "-c", help="TOML config; paths in it are relative to the current directory."
    ),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override a config value, e.g. --set train.lr=5e-4 (repeatable)."),
]
DeviceOpt = Annotated[
    str | None, typer.Option("--device", help="auto, cpu, cuda or cuda:N (default: the config's).")
]
CheckpointOpt = Annotated[
    Path | None,
    typer.Option("--checkpoint", help="Checkpoint to use (default: the run's best.pt)."),
]
BeamOpt = Annotated[
    int | None, typer.Option("--beam", help="Beam size; 1 is greedy (default: decode.beam).")
]
PenaltyOpt = Annotated[
    float | None,
    typer.Option("--length-penalty", help="GNMT length penalty alpha for beam search."),
]
DEFAULT_CONFIG = config_module.DEFAULT_CONFIG


class _TqdmHandler(logging.Handler):
    """Log lines printed above any progress bar instead of through it."""

    def emit(self, record: logging.LogRecord) -> None:
        tqdm.write(self.format(record), file=sys.stderr)


def _setup_process() -> None:
    """Log lines on stderr; also the process-wide CPU settings every heavy command wants."""
    keep_freed_memory()
    handler = _TqdmHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger("translator")
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    root.propagate = False


def _user_errors(command):
    """Turn UserError (and Ctrl-C) into one line on stderr and a non-zero exit."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except UserError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            typer.echo("interrupted", err=True)
            raise typer.Exit(130) from None

    return wrapper


def _default_checkpoint(cfg: config_module.Config, given: Path | None) -> Path:
    from translator.rundir import RunDir

    return given or RunDir(cfg.train.run_dir).best


def _run_options(
    device: str | None, beam: int | None, length_penalty: float | None
) -> dict[str, object]:
    """The flags of translate and eval, as the config keys they set."""
    return {"train.device": device, "decode.beam": beam, "decode.length_penalty": length_penalty}


@app.command()
@_user_errors
def prepare(
    config: ConfigOpt = DEFAULT_CONFIG,
    input: Annotated[  # noqa: A002 - the option is --input
        list[Path] | None,
        typer.Option("--input", "-i", help="Corpus file (repeatable); default: data.inputs."),
    ] = None,
    format: Annotated[  # noqa: A002
        str | None, typer.Option("--format", help="auto, tatoeba, anki or jsonl.")
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Output directory (data.dir).")] = None,
    workers: Annotated[
        int | None, typer.Option("--workers", help="Processes (data.workers; 0: every core).")
    ] = None,
    set_: SetOpt = None,
):
    """Read, normalise, filter, deduplicate and split a corpus; train the tokenizers; encode
    the splits.

    With --input and no --out, the output goes to data/prepared/<input name>, never over
    the config's data.dir."""
    from translator.data.prepare import output_dir_for
    from translator.data.prepare import prepare as run_prepare

    inputs = [str(p) for p in input] if input else None
    if out is None and inputs:
        out = output_dir_for(inputs)
    values = {
        "data.inputs": inputs,
        "data.format": format,
        "data.dir": None if out is None else str(out),
        "data.workers": workers,
    }
    configured_dir = config_module.load(config, set_ or []).data.dir
    cfg = config_module.load(config, set_ or [], values)
    _setup_process()
    result = run_prepare(cfg.data)
    s = result.stats
    for example in s["malformed_examples"]:
        typer.echo(f"skipped {example}", err=True)
    kinds = ", ".join(f"{n:,} {kind}" for kind, n in s["malformed_by_kind"].items())
    typer.echo(
        f"read {s['rows_read']:,} rows from {len(s['inputs'])} file(s): {s['malformed']:,} "
        f"malformed{f' ({kinds})' if kinds else ''}, {s['headers']:,} header(s), "
        f"{s['empty']:,} empty, {s['filtered']:,} filtered (too long or bad length ratio), "
        f"{s['duplicates']:,} duplicates; {s['traditional_converted']:,} converted to simplified"
    )
    splits = " | ".join(f"{name} {count:,}" for name, count in s["splits"].items())
    typer.echo(
        f"{s['pairs']:,} pairs in {s['groups']:,} groups sharing no sentence (largest "
        f"{s['largest_group']:,}) → {splits}"
    )
    typer.echo(f"wrote splits, spm.en.model, spm.zh.model, ids and stats.json to {result.dir}")
    stages = ", ".join(f"{name} {sec:.1f} s" for name, sec in result.seconds.items())
    total = sum(result.seconds.values())
    readers = f"{result.workers} process{'es' if result.workers > 1 else ''}"
    typer.echo(f"took {total:.1f} s: {stages} (read by {readers})")
    if cfg.data.dir != configured_dir:
        typer.echo(f"to train on it: translator train -c {config} --set data.dir='{out}'")


@app.command()
@_user_errors
def train(
    config: ConfigOpt = DEFAULT_CONFIG,
    resume: Annotated[bool, typer.Option("--resume", help="Continue from last.pt.")] = False,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Start again, replacing an existing run.")
    ] = False,
    max_minutes: Annotated[
        float | None, typer.Option("--max-minutes", help="Time budget (default: the config's).")
    ] = None,
    device: DeviceOpt = None,
    set_: SetOpt = None,
):
    """Train the Transformer on the prepared data; checkpoints go to train.run_dir."""
    from translator.train import Interrupted
    from translator.train import train as run_train

    if resume and overwrite:
        raise UserError("--resume and --overwrite contradict each other")
    values = {"train.device": device, "train.max_minutes": max_minutes}
    cfg = config_module.load(config, set_ or [], values)
    _setup_process()
    try:
        result = run_train(cfg, resume=resume, overwrite=overwrite)
    except Interrupted as stop:
        typer.echo(str(stop), err=True)
        raise typer.Exit(128 + stop.signum) from None
    state = result.state
    where = f"after epoch {state.epoch}"
    if state.position:
        where = f"in epoch {state.epoch + 1} ({state.position}/{result.batches_per_epoch} batches)"
    typer.echo(f"stopped {where}, {state.step:,} updates: {result.stop_reason}")
    typer.echo(
        f"best valid BLEU {state.best_bleu:.2f}; checkpoints and metrics.tsv in {result.run_dir}"
    )


@app.command()
@_user_errors
def translate(
    text: Annotated[
        list[str] | None, typer.Argument(help="Sentences to translate; '-' reads stdin.")
    ] = None,
    config: ConfigOpt = DEFAULT_CONFIG,
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
    set_: SetOpt = None,
):
    """Translate English sentences into Chinese (greedy, or beam search with --beam)."""
    from translator.data.lines import read_lines, read_stdin_lines, write_lines
    from translator.inference import Translator
    from translator.runtime import pick_device

    sentences: list[str] = []
    for item in text or []:
        sentences.extend(read_stdin_lines() if item == "-" else [item])
    if input is not None:
        sentences.extend(read_lines(input))
    if not text and input is None:
        raise UserError("nothing to translate: give sentences, '-' for stdin, or --input FILE")
    cfg = config_module.load(config, set_ or [], _run_options(device, beam, length_penalty))
    _setup_process()
    path = _default_checkpoint(cfg, checkpoint)
    translator, _ = Translator.from_checkpoint(path, pick_device(cfg.train.device), cfg.decode)
    results = translator.translate(sentences)
    if output is not None:
        write_lines(output, results)
    else:
        sys.stdout.write("".join(r + "\n" for r in results))


@app.command("eval")
@_user_errors
def evaluate(
    config: ConfigOpt = DEFAULT_CONFIG,
    src: Annotated[Path | None, typer.Option("--src", help="English file to translate.")] = None,
    ref: Annotated[
        list[Path] | None,
        typer.Option("--ref", help="Chinese reference file, line-aligned with --src (repeatable)."),
    ] = None,
    split: Annotated[
        str, typer.Option("--split", help="Prepared split to score without --src: test or valid.")
    ] = "test",
    checkpoint: CheckpointOpt = None,
    beam: BeamOpt = None,
    length_penalty: PenaltyOpt = None,
    device: DeviceOpt = None,
    set_: SetOpt = None,
):
    """Score the model with sacrebleu BLEU (tokenize=zh) and chrF on the test split: each
    English sentence translated once, scored against all its translations."""
    from translator.evaluate import evaluate_files

    cfg = config_module.load(config, set_ or [], _run_options(device, beam, length_penalty))
    if (src is None) != (not ref):
        raise UserError("--src and --ref go together")
    if split not in ("test", "valid"):
        raise UserError(f"--split must be test or valid, got {split!r}")
    _setup_process()
    result = evaluate_files(cfg, _default_checkpoint(cfg, checkpoint), src, ref or [], split)
    s = result.scores
    typer.echo(f"BLEU = {s.bleu:.2f}  {s.bleu_signature}")
    typer.echo(f"chrF = {s.chrf:.2f}  {s.chrf_signature}")
    if s.references > s.sentences:
        typer.echo(
            f"first reference only: BLEU = {s.bleu_1ref:.2f}, chrF = {s.chrf_1ref:.2f}  "
            f"{s.bleu_1ref_signature}"
        )
    typer.echo(
        f"{s.sentences:,} sentences, {s.references:,} references; hypotheses in {result.hypotheses}"
    )


@app.command()
@_user_errors
def average(
    run_dir: Annotated[Path, typer.Argument(help="A run directory (train.run_dir).")],
    last: Annotated[int, typer.Option("--last", help="How many newest epochs to average.")] = 5,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Default: checkpoints/average<N>.pt.")
    ] = None,
):
    """Average the weights of a run's last N epochs into one checkpoint."""
    from translator.checkpoint import average_last

    path = average_last(run_dir, last, output)
    typer.echo(f"wrote {path}: the mean of the last {last} epochs' weights")


def main() -> None:
    app()
