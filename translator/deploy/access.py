"""Who may call the server: optional API keys, checked before a request's body is read.

Keys come from TRANSLATOR_API_KEYS, `serve.api_key_file` and `serve.api_keys`, and are
never saved; /health and /ready stay open for load balancers, the page and /info for people.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Sequence
from pathlib import Path

from translator.config import ServeConfig
from translator.deploy.limits import respond
from translator.errors import UserError

ENVIRONMENT = "TRANSLATOR_API_KEYS"
OPEN_PATHS = ("/", "/health", "/ready", "/info")
OWN_KEYS = "/lt/"  # the LibreTranslate API checks keys itself: they may come in the body


def api_keys(serve_cfg: ServeConfig) -> list[str]:
    """The keys in force: the config's, the environment's and the key file's; one clear line
    if the file cannot be read or holds none (a server meant to need keys never opens)."""
    from_env = os.environ.get(ENVIRONMENT, "").split(",")
    from_file = []
    if name := serve_cfg.api_key_file:
        try:
            lines = Path(name).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            why = getattr(exc, "strerror", None) or exc
            raise UserError(f"config key 'serve.api_key_file': cannot read {name}: {why}") from None
        from_file = [line for line in lines if not line.strip().startswith("#")]
        if not any(line.strip() for line in from_file):
            raise UserError(f"config key 'serve.api_key_file': {name} holds no key")
    keys = [*serve_cfg.api_keys, *from_env, *from_file]
    return [key.strip() for key in keys if key.strip()]


def presented(scope) -> str:
    """The key a request carries, or ''."""
    headers = dict(scope.get("headers", []))
    bearer = headers.get(b"authorization", b"").decode("latin-1")
    if bearer.lower().startswith("bearer "):
        return bearer[7:].strip()
    return headers.get(b"x-api-key", b"").decode("latin-1").strip()


def accepted(key: str, keys: Sequence[str]) -> bool:
    given = key.encode()
    # every key, in constant time: the timing says nothing of how much of a key was right
    return any([hmac.compare_digest(given, k.encode()) for k in keys])


def refused(scope, keys: Sequence[str]) -> bool:
    """Whether a request is refused for its key: keys are needed, its path is not open (nor
    one of LibreTranslate's, which check keys themselves), and it carries no valid key."""
    return (
        bool(keys)
        and scope["path"] not in OPEN_PATHS
        and not scope["path"].startswith(OWN_KEYS)
        and scope["method"] != "OPTIONS"
        and not accepted(presented(scope), keys)
    )


class RequireKey:
    """The ASGI middleware: 401 for an HTTP request without a valid key; it runs after
    admission.py's, so wrong and missing keys count against their address's rate limit."""

    def __init__(self, app, keys: Sequence[str]):
        self.app, self.keys = app, list(keys)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and refused(scope, self.keys):
            message = "a valid API key is needed: Authorization: Bearer KEY, or X-API-Key"
            await respond(send, 401, message, {"WWW-Authenticate": "Bearer"})
            return
        await self.app(scope, receive, send)
