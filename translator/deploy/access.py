"""Who may call the server: optional API keys, checked before a request's body is read.

Keys come from the environment variable TRANSLATOR_API_KEYS (comma-separated), from the
file `serve.api_key_file` names (one a line; blank lines and lines starting with # are
skipped) and from `serve.api_keys` in the config served with; a key is never saved
(Config.to_dict leaves `serve.api_keys` empty). With none, every request is let through.
With keys, a request must carry one as `Authorization: Bearer KEY` or `X-API-Key: KEY`,
else 401; `/health` and `/ready` stay open for load balancers, and the page at `/` and
its `/info` for people (the page asks for a key when /info says one is needed). Every key
is compared in constant time (hmac.compare_digest), all of them each time, so the
answer's timing says nothing about how much of a key was right.
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
    """The keys in force: the config's, the environment's and the key file's, blanks and
    the file's comments dropped; one clear line if the key file cannot be read or holds
    no key (a server meant to need keys never opens to everyone)."""
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
    return any([hmac.compare_digest(given, k.encode()) for k in keys])  # all compared


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
    """The ASGI middleware: 401 for an HTTP request without a valid key. It runs after
    admission.py's, so that wrong and missing keys count against their address's rate
    limit as any request does."""

    def __init__(self, app, keys: Sequence[str]):
        self.app, self.keys = app, list(keys)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and refused(scope, self.keys):
            message = "a valid API key is needed: Authorization: Bearer KEY, or X-API-Key"
            await respond(send, 401, message, {"WWW-Authenticate": "Bearer"})
            return
        await self.app(scope, receive, send)
