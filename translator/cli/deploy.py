"""Shipping a model: translator release, export and serve."""

from __future__ import annotations

import functools
import socket
from pathlib import Path
from typing import Annotated

import typer

from translator import config as config_module
from translator.cli.common import (
    CheckpointOpt,
    ConfigOpt,
    DeviceOpt,
    SetOpt,
    SourceArg,
    command,
    decode_options,
    default_checkpoint,
    setup_process,
)
from translator.errors import UserError


@command()
def release(
    source: SourceArg,
    out: Annotated[Path, typer.Option("--out", "-o", help="The file to write, e.g. model.pt.")],
    dtype: Annotated[
        str,
        typer.Option(
            "--dtype", help="How to store the weights: float32, float16 or bfloat16 (fp16, bf16)."
        ),
    ] = "float32",
):
    """Write a small checkpoint to ship: the weights, config and tokenizers only (no
    optimiser state), for translate, eval, serve, export and the Python API."""
    from translator.deploy.release import release as run_release

    done = run_release(source, out, dtype)
    typer.echo(
        f"wrote {done.path}: {done.bytes / 1e6:.1f} MB, {done.dtype} weights "
        f"({done.source} is {done.source_bytes / 1e6:.1f} MB)"
    )


@command()
def export(
    source: SourceArg,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Directory to write (ct2 default: beside the checkpoint, NAME.ct2, where "
            "translate, eval, distill and serve find it by themselves).",
        ),
    ] = None,
    format_: Annotated[
        str,
        typer.Option(
            "--format",
            help="ct2: a CTranslate2 model; hf: a transformers directory (Marian or Pegasus).",
        ),
    ] = "ct2",
    quantization: Annotated[
        str | None,
        typer.Option("--quantization", help="ct2: int8, int8_float32, float16, … (none)."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing --out.")] = False,
):
    """Write a CTranslate2 model directory (with both tokenizers and the decoding defaults)
    for `translate`/`eval --engine ctranslate2 --model DIR`, or with --format hf a directory
    that transformers' from_pretrained and pipeline("translation") load."""
    from translator.model.rundir import checkpoint_in

    if format_ not in ("ct2", "hf"):
        raise UserError(f"unknown --format {format_!r} (choose ct2 or hf)")
    if format_ == "hf" and quantization is not None:
        raise UserError("--quantization is for --format ct2; a transformers model is float32")
    checkpoint = checkpoint_in(source)
    setup_process()
    if out is None and format_ == "hf":
        raise UserError("--format hf needs --out DIR")
    if format_ == "hf":
        from translator.deploy.hf import export_hf

        path, architecture, caveat = export_hf(checkpoint, out, force)
        typer.echo(f"wrote {path} (transformers, {architecture}) from {checkpoint}")
        if caveat:
            typer.echo(f"note: {caveat}", err=True)
        return
    from translator.deploy.export import export as run_export
    from translator.inference.ct2_engine import beside

    path = run_export(checkpoint, out or beside(checkpoint), quantization, force)
    typer.echo(f"wrote {path} ({quantization or 'float32'}) from {checkpoint}")


@command("import-hf")
def import_hf(
    directory: Annotated[
        Path,
        typer.Argument(help="A local transformers directory: Marian (OPUS-MT) or our own export."),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="The checkpoint to write.")],
    target_token: Annotated[
        str | None,
        typer.Option(
            "--target-token",
            help="A piece put before every source as its id (data.src_prefix), e.g. >>cmn_Hans<<.",
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing --out.")] = False,
):
    """Write a checkpoint (weights, config and both tokenizers, as `release` writes) for a
    transformers model directory, for translate, eval, serve, export, train --init-from,
    distill --teacher and data.tokenizers_from. Nothing is downloaded."""
    from translator.deploy.hf import import_hf as run_import

    setup_process()
    done = run_import(directory, out, target_token, force)
    licence = done.origin["license"] or "not stated in its README.md"
    typer.echo(
        f"wrote {done.path} ({done.architecture}; {done.sizes[0]:,} source and "
        f"{done.sizes[1]:,} target pieces; licence: {licence})"
    )


@command()
@decode_options("engine", "search", "text", exclude=("nbest",))
def serve(
    config_file: ConfigOpt = config_module.DEFAULT_CONFIG,
    checkpoint: CheckpointOpt = None,
    device: DeviceOpt = None,
    host: Annotated[
        str | None, typer.Option("--host", help="Address to listen on (serve.host; 0.0.0.0: all).")
    ] = None,
    port: Annotated[int | None, typer.Option("--port", help="Port (serve.port).")] = None,
    batching: Annotated[
        bool | None,
        typer.Option("--batching/--no-batching", help="Decode concurrent requests together."),
    ] = None,
    set_: SetOpt = None,
    decode: dict | None = None,
):
    """Serve the model over HTTP: POST /translate, GET /health, and a page at /."""
    from translator.deploy.access import api_keys
    from translator.deploy.decoder import DecoderProcess
    from translator.deploy.server import create_app, require_fastapi

    values = {"train.device": device, "serve.host": host, "serve.port": port} | decode
    values["serve.batching"] = batching
    config = config_module.load(config_file, set_ or [], values)
    api_keys(config.serve)  # a key file that cannot be read: one line, before the model loads
    require_fastapi()
    from translator.deploy.listen import serve_app

    setup = functools.partial(setup_process, keep_memory=False)  # back down after a flood
    setup()
    path = default_checkpoint(config, checkpoint)
    address = f"{config.serve.host}:{config.serve.port}"
    try:  # one clear line if the address cannot be bound, before the server tries
        socket.create_server((config.serve.host, config.serve.port)).close()
    except OSError as exc:
        raise UserError(f"cannot serve on {address}: {exc.strerror or exc}") from None
    decoder = DecoderProcess(config, path, setup)  # loaded before the server starts
    # this process never imports PyTorch: the decoding process names what it decodes
    about = {**decoder.model, "glossary": decoder.glossary}  # names, no paths: clients see it
    app_ = create_app(decoder, config.decode, config.serve, about)
    typer.echo(f"serving {decoder.origin} on http://{address} (Ctrl-C stops)")
    # SIGTERM or Ctrl-C: what was admitted answered, then exit 0; the decoder ends with its pipe
    serve_app(app_, config.serve, on_stop=decoder.close)
