"""Operating the server: Prometheus metrics (`GET /metrics`; listed in docs/deploy.md) and
one JSON access-log line per request on the `translator.access` logger (stderr)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from functools import partial

access_log = logging.getLogger("translator.access")
KNOWN_PATHS = {  # a path's metrics label; any other path is "other" (bounded labels)
    *("/", "/translate", "/document", "/info", "/health", "/ready", "/metrics", "/openapi.json"),
    *("/lt/translate", "/lt/languages", "/lt/detect"),
}
SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class Metrics:
    """The server's metrics, in a registry of their own (one per app)."""

    def __init__(self, queued: Callable[[], int]):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = registry = CollectorRegistry()
        counter, gauge = partial(Counter, registry=registry), partial(Gauge, registry=registry)
        histogram = partial(Histogram, registry=registry)
        self.requests = counter("translator_requests", "Requests answered", ["path", "status"])
        self.seconds = histogram(
            "translator_request_seconds", "Time to answer", ["path"], buckets=SECONDS
        )
        self.sentences = counter("translator_sentences", "Sentences translated")
        self.tokens = counter("translator_source_tokens", "Source tokens translated")
        self.spans_lost = counter(
            "translator_spans_lost",
            "Protected spans (URLs, numbers, codes…) missing from translations",
        )
        self.spans_appended = counter(
            "translator_spans_appended",
            "Protected spans the model did not write, put at the end of their sentence "
            "(decode.span_guard)",
        )
        gauge("translator_queue_sentences", "Sentences waiting").set_function(queued)
        self.batches = histogram(
            "translator_batch_sentences", "Sentences per decode", buckets=SIZES
        )
        self.rate_limited = counter(
            "translator_rate_limited", "Requests refused by serve.rate_limit"
        )
        self.clients = gauge("translator_rate_limit_clients", "Clients with a rate-limit bucket")

    def decoded(self, sentences: list[str], tokens: int, lost: int = 0, appended: int = 0) -> None:
        self.batches.observe(len(sentences))
        self.sentences.inc(len(sentences))
        self.tokens.inc(tokens)
        self.spans_lost.inc(lost)
        self.spans_appended.inc(appended)

    def exposition(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class Observe:
    """The ASGI middleware around everything: each request's metrics and access-log line."""

    def __init__(self, app, metrics: Metrics):
        self.app, self.metrics = app, metrics

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start, status = time.perf_counter(), 0

        async def tracked(message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        finally:
            seconds = time.perf_counter() - start
            path = scope["path"] if scope["path"] in KNOWN_PATHS else "other"
            self.metrics.requests.labels(path, str(status or "none")).inc()
            self.metrics.seconds.labels(path).observe(seconds)
            line = {
                "client": (scope.get("client") or ("-", 0))[0],
                "method": scope["method"],
                "path": scope["path"][:200],
                "status": status or None,
                "ms": round(seconds * 1000, 1),
            }
            access_log.info(json.dumps(line))
