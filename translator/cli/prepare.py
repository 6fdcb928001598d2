"""Getting data ready: translator download and translator prepare."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from translator import config as config_module
from translator.cli.common import ConfigOpt, SetOpt, command, setup_process
from translator.errors import UserError

if TYPE_CHECKING:
    from translator.corpus.preparer import Prepared


@command()
def download(
    source: Annotated[
        str,
        typer.Option(
            "--source",
            help="tatoeba (the weekly exports), anki (manythings.org), opus (any OPUS corpus, "
            "with --corpus) or wmt (WMT training data, with --corpus).",
        ),
    ] = "tatoeba",
    corpus: Annotated[
        str | None,
        typer.Option("--corpus", help="opus/wmt: which corpus (see --list), e.g. News-Commentary."),
    ] = None,
    version: Annotated[
        str, typer.Option("--version", help="opus: the corpus release, e.g. v16.")
    ] = "latest",
    list_: Annotated[
        bool, typer.Option("--list", help="List the OPUS and WMT corpora for en-zh, with sizes.")
    ] = False,
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory to write.")] = Path(
        "data/raw"
    ),
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url",
            help="A mirror of the source's files (or TRANSLATOR_DOWNLOAD_URL); for opus, "
            "another API endpoint (or TRANSLATOR_OPUS_API).",
        ),
    ] = None,
):
    """Download English–Chinese pairs (resumable, cached with checksums) into a file
    `translator prepare --input` reads."""
    from translator.corpus import remote
    from translator.corpus.download import download as run_download

    if list_:
        listed = remote.opus_corpora(base_url if source == "opus" else None)
        listed += remote.wmt_corpora(base_url if source == "wmt" else None)
        typer.echo(f"{'source':6}  {'corpus':28} {'version':9} {'pairs':>12} {'download':>10}")
        for e in sorted(listed, key=lambda e: (e.source, -(e.pairs or 0))):
            pairs = f"{e.pairs:,}" if e.pairs is not None else "?"
            size = f"{e.size / 1e6:,.1f} MB" if e.size is not None else "?"
            typer.echo(f"{e.source:6}  {e.corpus:28} {e.version:9} {pairs:>12} {size:>10}")
        return
    if source in ("opus", "wmt"):
        if not corpus:
            raise UserError(
                f"--source {source} needs --corpus NAME (see translator download --list)"
            )
        got = remote.fetch_corpus(source, corpus, out, base_url, version, progress=True)
        pairs = f"{got.pairs:,} pairs in " if got.pairs is not None else ""
        typer.echo(f"{pairs}{got.path} ({'downloaded' if got.fetched else 'from the cache'})")
        typer.echo(f"next: translator prepare --input {got.path}")
        return
    result = run_download(source, out, base_url)
    cache = "downloaded " + ", ".join(result.fetched) if result.fetched else "all from the cache"
    typer.echo(f"{result.pairs:,} pairs in {result.pairs_file} ({cache})")
    typer.echo(f"next: translator prepare --input {result.pairs_file}")


@command()
def prepare(
    config_file: ConfigOpt = config_module.DEFAULT_CONFIG,
    input: Annotated[  # noqa: A002 - the option is --input
        list[Path] | None,
        typer.Option("--input", "-i", help="Corpus file (repeatable); default: data.inputs."),
    ] = None,
    pair: Annotated[
        tuple[Path, Path] | None,
        typer.Option(
            "--pair",
            metavar="EN_FILE ZH_FILE",
            help="A corpus as two line-aligned files (Moses format), read after any --input; "
            "more pairs and weights: data.inputs.",
        ),
    ] = None,
    exclude: Annotated[
        list[Path] | None,
        typer.Option(
            "--exclude",
            help="Drop every pair sharing a sentence with this file, e.g. a test set "
            "(repeatable; default: data.exclude).",
        ),
    ] = None,
    format: Annotated[  # noqa: A002
        str | None, typer.Option("--format", help="auto, tatoeba, anki, jsonl or tmx.")
    ] = None,
    tokenizers_from: Annotated[
        Path | None,
        typer.Option(
            "--tokenizers-from",
            metavar="RUN_DIR|CHECKPOINT",
            help="Encode with a trained model's tokenizers instead of training new ones, to "
            "fine-tune that model on this corpus (data.tokenizers_from).",
        ),
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
    from translator.corpus.preparer import output_dir_for
    from translator.corpus.preparer import prepare as run_prepare

    inputs: list = [str(p) for p in input or []]
    if pair:
        inputs.append({"src": str(pair[0]), "tgt": str(pair[1])})
    if out is None and inputs:
        out = output_dir_for(str((input or pair)[0]), len(inputs))
    values = {
        "data.inputs": inputs or None,
        "data.exclude": [str(p) for p in exclude] if exclude else None,
        "data.format": format,
        "data.dir": None if out is None else str(out),
        "data.workers": workers,
        "data.tokenizers_from": None if tokenizers_from is None else str(tokenizers_from),
    }
    configured_dir = config_module.load(config_file, set_ or []).data.dir
    config = config_module.load(config_file, set_ or [], values)
    setup_process()
    result = run_prepare(config.data)
    _report(result, config.data)
    if config.data.dir != configured_dir:
        typer.echo(f"to train on it: translator train -c {config_file} --set data.dir='{out}'")


def _report(result: Prepared, data: config_module.DataConfig) -> None:
    """What `prepare` read (malformed rows on stderr), dropped and wrote, and how long it took."""
    s = result.stats
    for example in s["malformed_examples"]:
        typer.echo(f"skipped {example}", err=True)
    kinds = ", ".join(f"{n:,} {kind}" for kind, n in s["malformed_by_kind"].items())
    excluded = f", {s['excluded']:,} excluded (data.exclude)" if data.exclude else ""
    typer.echo(
        f"read {s['rows_read']:,} rows from {len(s['inputs'])} corpus(es): {s['malformed']:,} "
        f"malformed{f' ({kinds})' if kinds else ''}, {s['headers']:,} header(s), "
        f"{s['empty']:,} empty, {s['filtered']:,} filtered (too long or bad length ratio), "
        f"{s['duplicates']:,} duplicates{excluded}; {s['traditional_converted']:,} converted "
        f"to simplified"
    )
    if len(s["inputs"]) > 1 or data.exclude:
        for c in s["inputs"]:
            typer.echo(
                f"  {c['name']} ({c['format']}, weight {c['weight']:g}): {c['rows']:,} read, "
                f"{c['pairs']:,} kept, {c['dropped']:,} dropped ({c['malformed']:,} malformed, "
                f"{c['empty'] + c['too_long'] + c['bad_length_ratio']:,} empty or filtered, "
                f"{c['duplicates']:,} duplicates, {c['excluded']:,} excluded)"
            )
    splits = " | ".join(f"{name} {count:,}" for name, count in s["splits"].items())
    typer.echo(
        f"{s['pairs']:,} pairs in {s['groups']:,} groups sharing no sentence (largest "
        f"{s['largest_group']:,}) → {splits}"
    )
    cover = s["coverage"]
    origin = f"from {data.tokenizers_from}" if data.tokenizers_from else "trained here"
    typer.echo(
        f"tokenizers {origin}: vocab {s['vocab_size']['en']:,} en / {s['vocab_size']['zh']:,} "
        f"zh; <unk> or byte pieces: en {cover['en']['fallback']:.2%}, zh "
        f"{cover['zh']['fallback']:.2%}"
    )
    typer.echo(f"wrote splits, spm.en.model, spm.zh.model, ids and stats.json to {result.dir}")
    stages = ", ".join(f"{name} {sec:.1f} s" for name, sec in result.seconds.items())
    total = sum(result.seconds.values())
    readers = f"{result.workers} process{'es' if result.workers > 1 else ''}"
    typer.echo(f"took {total:.1f} s: {stages} (read by {readers})")
