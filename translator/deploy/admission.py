"""Who gets in, decided from a request's headers before its body is read (an ASGI
middleware): a refusal here costs a few microseconds of the HTTP process and nothing of
the decoder.

    more POST requests a second from one client than serve.rate_limit  → 429, Retry-After
    a POST to a translating path while the queue has no room at all    → 503, Retry-After

Each refusal is answered after a pause, `serve.refusal_delay_s` (1 s; for a 429 at most
until the client's bucket has a request again), as HAProxy's tarpit does: a client that
honours Retry-After waits as long anyway, and one that retries at once can then send
about one request a second per connection, so that answering its refusals cannot take the
server's time (measured in docs/deploy.md). A held refusal costs a sleeping task, no CPU.

The rate limit is a token bucket per client: `serve.rate_burst` requests at once, refilled
at `serve.rate_limit` a second (0: no limit). A client is its API key when keys are set
and the request carries a valid one in a header, else its address (behind a proxy on
this machine, the X-Forwarded-For it sets: listen.py). POST requests count (they are the ones
that translate), and so does any request that access.py will refuse for its key: a wrong
or missing key is counted against its address before it is checked, so keys cannot be
guessed faster than the limit. The page, /health, /ready, /metrics and /openapi.json with
a valid key (or none needed) do not count. Buckets of
clients idle long enough to have refilled are dropped, so memory stays bounded by the
clients of the last minute.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Sequence

from translator.deploy.access import accepted, presented, refused
from translator.deploy.limits import BadRequest, respond

TRANSLATING = (
    "/translate",
    "/document",
    "/lt/translate",
)  # the paths whose requests join the queue
PRUNE_EVERY_S = 60.0


class Buckets:
    """Token buckets by client: `rate` requests a second, `burst` at once."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic):
        self.rate, self.burst, self.clock = rate, burst, clock
        self.buckets: dict[str, tuple[float, float]] = {}  # client → (tokens, when)
        self.pruned = clock()

    def wait(self, client: str) -> float:
        """Take one request from `client`'s bucket: 0 if it may go now, else the seconds
        until it may (nothing taken)."""
        now = self.clock()
        tokens, then = self.buckets.get(client, (self.burst, now))
        tokens = min(self.burst, tokens + (now - then) * self.rate)
        if now - self.pruned > PRUNE_EVERY_S:
            self._prune(now)
        if tokens < 1:
            self.buckets[client] = (tokens, now)
            return (1 - tokens) / self.rate
        self.buckets[client] = (tokens - 1, now)
        return 0.0

    def _prune(self, now: float) -> None:
        full = self.burst / self.rate  # seconds an empty bucket takes to refill
        self.buckets = {c: b for c, b in self.buckets.items() if now - b[1] < full}
        self.pruned = now


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
