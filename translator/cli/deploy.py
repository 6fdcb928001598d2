"""Shipping a model: translator release, export and serve."""

from __future__ import annotations

import functools
import signal
import socket
import sys
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
    SetOpt,
    SourceArg,
    app,
    default_checkpoint,
    run_options,
    setup_process,
    user_errors,
)
from translator.errors import UserError


@app.command()
@user_errors
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


@app.command()
@user_errors
def export(
    source: SourceArg,
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory to write.")],
    quantization: Annotated[
        str | None,
        typer.Option("--quantization", help="int8, int8_float32, float16, bfloat16, … (none)."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing --out.")] = False,
):
    """Write a CTranslate2 model directory (with both tokenizers and the decoding defaults)
    for `translate`/`eval --engine ctranslate2 --model DIR`."""
    from translator.deploy.export import export as run_export
    from translator.model.rundir import checkpoint_in

    checkpoint = checkpoint_in(source)
    setup_process()
    path = run_export(checkpoint, out, quantization, force)
    typer.echo(f"wrote {path} ({quantization or 'float32'}) from {checkpoint}")


@app.command()
@user_errors
def serve(
    config_file: ConfigOpt = DEFAULT_CONFIG,
    checkpoint: CheckpointOpt = None,
    engine: EngineOpt = None,
    model: ModelDirOpt = None,
    beam: BeamOpt = None,
    device: DeviceOpt = None,
    host: Annotated[
        str | None,
        typer.Option("--host", help="Address to listen on (serve.host; 0.0.0.0: all)."),
    ] = None,
    port: Annotated[int | None, typer.Option("--port", help="Port (serve.port).")] = None,
    batching: Annotated[
        bool | None,
        typer.Option("--batching/--no-batching", help="Decode concurrent requests together."),
    ] = None,
    set_: SetOpt = None,
):
    """Serve the model over HTTP: POST /translate, GET /health, and a page at /."""
    from translator.deploy.decoder import DecoderProcess
    from translator.deploy.server import create_app, require_fastapi

    values = run_options(device, beam, None, engine, model)
    values.update({"serve.host": host, "serve.port": port, "serve.batching": batching})
    config = config_module.load(config_file, set_ or [], values)
    require_fastapi()
    import uvicorn

    setup = functools.partial(setup_process, keep_memory=False)  # back down after a flood
    setup()
    path = default_checkpoint(config, checkpoint)
    _check_free(config.serve.host, config.serve.port)
    decoder = DecoderProcess(config, path, setup)  # loaded before the server starts
    origin = decoder.origin  # this process never imports PyTorch: the decoding process does
    about = {
        "engine": config.decode.engine,
        "model": str(origin),
        "batching": config.serve.batching,
    }
    app_ = create_app(decoder, config.decode, config.serve, about)
    typer.echo(f"serving {origin} on http://{config.serve.host}:{config.serve.port} (Ctrl-C stops)")
    # SIGTERM: uvicorn stops accepting, finishes what it admitted, then raises the signal
    # again once it has restored this handler: exit 0, a clean stop for a process manager
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        uvicorn.run(
            app_,
            host=config.serve.host,
            port=config.serve.port,
            log_level="warning",
            timeout_graceful_shutdown=int(config.serve.request_timeout_s),
        )
    finally:
        decoder.close()  # the decoding process ignores signals: it ends when its pipe closes


def _check_free(host: str, port: int) -> None:
    """One clear line if the address cannot be bound, before uvicorn tries."""
    try:
        socket.create_server((host, port)).close()
    except OSError as exc:
        raise UserError(f"cannot serve on {host}:{port}: {exc.strerror or exc}") from None
