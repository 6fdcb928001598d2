"""Operating the server: Prometheus metrics (`GET /metrics`, prometheus-client) and one
structured access-log line per request.

    translator_requests_total{path, status}     requests answered, refusals included
    translator_request_seconds{path}            time to answer (histogram)
    translator_sentences_total                  sentences translated
    translator_source_tokens_total              their source tokens
    translator_queue_sentences                  sentences waiting to be decoded now
    translator_batch_sentences                  sentences per decode (histogram)
    translator_rate_limited_total               requests refused by serve.rate_limit (429)
    translator_rate_limit_clients               clients with a rate-limit bucket now

The access line is a JSON object on the `translator.access` logger (stderr), e.g.
{"client": "127.0.0.1", "method": "POST", "path": "/translate", "status": 200, "ms": 41.2}.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable

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
        self.requests = Counter(
            "translator_requests", "Requests answered", ["path", "status"], registry=registry
        )
        self.seconds = Histogram(
            "translator_request_seconds", "Time to answer", ["path"], buckets=SECONDS,
            registry=registry,
        )  # fmt: skip
        self.sentences = Counter("translator_sentences", "Sentences translated", registry=registry)
        self.tokens = Counter(
            "translator_source_tokens", "Source tokens translated", registry=registry
        )
        self.spans_lost = Counter(
            "translator_spans_lost",
            "Protected spans (URLs, numbers, codes…) missing from translations",
            registry=registry,
        )
        self.spans_appended = Counter(
            "translator_spans_appended",
            "Protected spans the model did not write, put at the end of their sentence "
            "(decode.span_guard)",
            registry=registry,
        )
        queue = Gauge("translator_queue_sentences", "Sentences waiting", registry=registry)
        queue.set_function(queued)
        self.batches = Histogram(
            "translator_batch_sentences", "Sentences per decode", buckets=SIZES, registry=registry
        )
        self.rate_limited = Counter(
            "translator_rate_limited", "Requests refused by serve.rate_limit", registry=registry
        )
        self.clients = Gauge(
            "translator_rate_limit_clients", "Clients with a rate-limit bucket", registry=registry
        )

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
    """The ASGI middleware around everything: times each HTTP request, counts it by path
    and status, and writes its access-log line."""

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
            client = (scope.get("client") or ("-", 0))[0]
            line = {
                "client": client,
                "method": scope["method"],
                "path": scope["path"][:200],
                "status": status or None,
                "ms": round(seconds * 1000, 1),
            }
            access_log.info(json.dumps(line))
