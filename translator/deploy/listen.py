"""How `translator serve` meets the network: granian (an HTTP server written in Rust) runs
the app in this process, with a header timeout, a connection cap and HTTP/1.1 only, so
that slow or idle connections cannot hold the server (uvicorn has no header timeout,
hypercorn no connection cap: docs/deploy.md#slow-clients-and-connections). Behind a proxy
on this machine, the client's address is X-Forwarded-For's (trusting 127.0.0.1 only).
"""

from __future__ import annotations

import asyncio
import logging
import resource
import signal
from collections.abc import Callable

from translator.config import ServeConfig

log = logging.getLogger(__name__)
SPARE_FILES = 64  # descriptors kept beside the connections: logs, the decoder's pipe, …


def _not_experimental(record: logging.LogRecord) -> bool:
    """Drops granian's "Embedded server is experimental!" line: the embedded server is
    what lets the app hold its decoding process, and the line would read as a fault."""
    return "experimental" not in record.getMessage()


def connections(wanted: int) -> int:
    """`wanted` connections, or as many as this process may open files for: the soft
    limit is raised to the hard one where it is lower than needed."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = wanted + SPARE_FILES
    if soft != resource.RLIM_INFINITY and soft < needed:
        raised = needed if hard == resource.RLIM_INFINITY else min(hard, needed)
        resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
        soft = raised
    if soft != resource.RLIM_INFINITY and soft < needed:
        log.warning(
            "serve.max_connections %d is more than this process may open files for "
            "(ulimit -n %d): %d connections at most",
            wanted,
            soft,
            soft - SPARE_FILES,
        )
        return max(1, soft - SPARE_FILES)
    return wanted


def server_for(app, serve_cfg: ServeConfig):
    """A granian server for `app` with serve_cfg's address and limits, not yet started."""
    from granian.constants import HTTPModes, Interfaces
    from granian.http import HTTP1Settings
    from granian.log import LogLevels
    from granian.server.embed import Server
    from granian.utils.proxies import wrap_asgi_with_proxy_headers

    logging.getLogger("_granian").addFilter(_not_experimental)  # a no-op the second time
    settings = HTTP1Settings(header_read_timeout=round(serve_cfg.header_timeout_s * 1000))
    cap = connections(serve_cfg.max_connections)
    return Server(
        wrap_asgi_with_proxy_headers(app, "127.0.0.1"),
        address=serve_cfg.host,
        port=serve_cfg.port,
        interface=Interfaces.ASGI,
        http=HTTPModes.http1,  # granian's HTTP/2 detection has no timeout
        websockets=False,
        backlog=max(128, min(cap, 4096)),
        backpressure=cap,
        http1_settings=settings,
        log_level=LogLevels.warning,
    )


def serve_app(app, serve_cfg: ServeConfig, on_stop: Callable[[], None] = lambda: None) -> None:
    """Serve `app` until SIGTERM or SIGINT, on uvloop where it is installed; then `on_stop`."""

    async def main() -> None:
        server = server_for(app, serve_cfg)
        loop = asyncio.get_running_loop()
        for stop in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(stop, server.stop)
        await server.serve()

    try:
        import uvloop
    except ImportError:
        uvloop = None
    try:
        uvloop.run(main()) if uvloop else asyncio.run(main())
    finally:
        on_stop()
