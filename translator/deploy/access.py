"""Who may call the server: optional API keys, checked before a request's body is read.

Keys come from `serve.api_keys` and from the environment variable TRANSLATOR_API_KEYS
(comma-separated; better than a key written in a config file). With none, every request
is let through. With keys, a request must carry one as `Authorization: Bearer KEY` or
`X-API-Key: KEY`, else 401; `/health` and `/ready` stay open for load balancers, and the
page at `/` and its `/info` for people (the page asks for a key when /info says one is
needed). Every key is compared in constant time (hmac.compare_digest), all of them each
time, so the answer's timing says nothing about how much of a key was right.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Sequence

from translator.deploy.limits import respond

ENVIRONMENT = "TRANSLATOR_API_KEYS"
OPEN_PATHS = ("/", "/health", "/ready", "/info")
OWN_KEYS = "/lt/"  # the LibreTranslate API checks keys itself: they may come in the body


def api_keys(configured: Sequence[str]) -> list[str]:
    """The keys in force: the config's and the environment's, blanks dropped."""
    from_env = os.environ.get(ENVIRONMENT, "").split(",")
    return [key.strip() for key in [*configured, *from_env] if key.strip()]


def presented(scope) -> str:
    """The key a request carries, or ''."""
    headers = dict(scope.get("headers", []))
    bearer = headers.get(b"authorization", b"").decode("latin-1")
    if bearer.lower().startswith("bearer "):
        return bearer[7:].strip()
    return headers.get(b"x-api-key", b"").decode("latin-1").strip()


def accepted(key: str, keys: Sequence[str]) -> bool:
    given = key.encode()
    return any([hmac.compare_digest(given, k.encode()) for k in keys])  # all compared


class RequireKey:
    """The ASGI middleware: 401 for an HTTP request without a valid key."""

    def __init__(self, app, keys: Sequence[str]):
        self.app, self.keys = app, list(keys)

    async def __call__(self, scope, receive, send) -> None:
        if (
            scope["type"] == "http"
            and scope["path"] not in OPEN_PATHS
            and not scope["path"].startswith(OWN_KEYS)
            and scope["method"] != "OPTIONS"
            and not accepted(presented(scope), self.keys)
        ):
            message = "a valid API key is needed: Authorization: Bearer KEY, or X-API-Key"
            await respond(send, 401, message, {"WWW-Authenticate": "Bearer"})
            return
        await self.app(scope, receive, send)
