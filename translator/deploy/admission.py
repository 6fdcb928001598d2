"""Who gets in, decided from a request's headers before its body is read (an ASGI
middleware): a refusal here costs a few microseconds of the HTTP process and nothing of
the decoder. More POST requests a second from one client than serve.rate_limit get 429, a
POST to a translating path while the queue is full 503, both with Retry-After.

Each refusal is held `serve.refusal_delay_s` first, as HAProxy's tarpit does, so that a
client retrying at once cannot take the server's time (measured in docs/deploy.md). A client
is its valid API key, else its address; a request that access.py will refuse for its key
counts against its address, so keys cannot be guessed faster than the limit.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Sequence

from translator.deploy.access import accepted, presented, refused
from translator.deploy.limits import BadRequest, respond

# requests that join the queue
TRANSLATING = ("/translate", "/document", "/lt/translate", "/lt/translate_file")
PRUNE_EVERY_S = 60.0


class Buckets:
    """Token buckets by client: `rate` requests a second, `burst` at once."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic):
        self.rate, self.burst, self.clock = rate, burst, clock
        self.buckets: dict[str, tuple[float, float]] = {}  # client → (tokens, when)
        self.pruned = clock()

    def wait(self, client: str) -> float:
        """Take one request from `client`'s bucket: 0 if it may go now, else seconds to wait."""
        now = self.clock()
        tokens, then = self.buckets.get(client, (self.burst, now))
        tokens = min(self.burst, tokens + (now - then) * self.rate)
        if now - self.pruned > PRUNE_EVERY_S:  # memory holds the clients of the last minute
            full = self.burst / self.rate  # seconds an empty bucket takes to refill
            self.buckets = {c: b for c, b in self.buckets.items() if now - b[1] < full}
            self.pruned = now
        if tokens < 1:
            self.buckets[client] = (tokens, now)
            return (1 - tokens) / self.rate
        self.buckets[client] = (tokens - 1, now)
        return 0.0


class Admission:
    """The ASGI middleware: rate limits by client, and a full queue refused early."""

    def __init__(
        self,
        app,
        full: Callable[[int], BadRequest | None],
        rate: float,
        burst: int,
        keys: Sequence[str],
        metrics,
        delay: float = 0.0,
    ):
        self.app, self.full, self.keys, self.metrics = app, full, list(keys), metrics
        self.delay = delay
        self.buckets = Buckets(rate, burst) if rate > 0 else None
        metrics.clients.set_function(lambda: len(self.buckets.buckets) if self.buckets else 0)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or not (scope["method"] == "POST" or refused(scope, self.keys)):
            await self.app(scope, receive, send)
            return
        if self.buckets and (wait := self.buckets.wait(self.client(scope))):
            self.metrics.rate_limited.inc()
            retry = str(max(1, math.ceil(wait)))
            message = "too many requests from this client (serve.rate_limit); slow down"
            await asyncio.sleep(min(self.delay, wait))
            await respond(send, 429, message, {"Retry-After": retry})
            return
        if scope["path"] in TRANSLATING and (busy := self.full(1)):
            await asyncio.sleep(self.delay)
            await respond(send, busy.status, busy.message, busy.headers)
            return
        await self.app(scope, receive, send)

    def client(self, scope) -> str:
        key = presented(scope) if self.keys else ""
        if key and accepted(key, self.keys):
            return "key:" + key
        return "address:" + (scope.get("client") or ("-", 0))[0]
