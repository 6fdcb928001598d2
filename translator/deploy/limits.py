"""What a request may cost the server, enforced before the app sees it (an ASGI middleware
around the FastAPI app: the body's size and time to arrive, the time to answer, clients
that leave), and the strict JSON reader the app parses bodies with. The body is read here,
whole and bounded: the app never reads from a client's socket.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
from typing import Any

log = logging.getLogger(__name__)
_BODY_METHODS = {"POST", "PUT", "PATCH"}


class BadRequest(Exception):
    """A request we will not answer, with its status and a message for the client."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


def parse_json(body: bytes) -> Any:
    """`body` as JSON, strictly (UTF-8, no NaN or Infinity, no key given twice, no lone
    surrogate) and in linear time: anything else, any nesting or number Python cannot take
    included, is a 400 or 422 naming what is wrong, never an exception of another kind."""
    try:
        value = json.loads(
            body.decode("utf-8"), parse_constant=_no_constant, object_pairs_hook=_unique_keys
        )
    except UnicodeDecodeError:
        raise BadRequest(400, "the body is not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise BadRequest(400, f"the body is not valid JSON: {exc.msg} at {exc.pos}") from None
    except RecursionError:
        raise BadRequest(400, "the JSON is nested too deeply") from None
    except ValueError as exc:  # a duplicate key, NaN, or an integer of thousands of digits
        raise BadRequest(400, f"the body is not acceptable JSON: {exc}") from None
    if _SURROGATE_ESCAPE.search(body) and (where := lone_surrogate(value)) is not None:
        raise BadRequest(422, f"{where} holds a lone surrogate (\\uD800–\\uDFFF): not text")
    return value


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise ValueError(f"key {twice!r} is given more than once")
    return found


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")  # how JSON writes one: \ud800
_LONE = re.compile("[\ud800-\udfff]")


def lone_surrogate(value: Any) -> str | None:
    """Where the first string (or key) holding a lone surrogate is, as `"text"[0]`, `a key
    of "glossary"` or `the body`; None where none does. Visits each value once."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str) and _LONE.search(item):
            return where or "the body"
        if isinstance(item, dict):
            for key, inner in item.items():
                if _LONE.search(key):
                    return f"a key of {where or 'the body'}"
                stack.append((inner, f'{where}["{key[:40]}"]' if where else f'"{key[:40]}"'))
        elif isinstance(item, list):
            stack += [(inner, f"{where}[{i}]") for i, inner in enumerate(item)]
    return None


class _TooLarge(Exception):
    pass


class _Gone(Exception):
    pass


class Limits:
    """The ASGI middleware: bounded body reading, timeouts, and cancelling for clients gone."""

    def __init__(
        self,
        app,
        max_body: int,
        read_timeout: float,
        request_timeout: float,
        max_file: int = 0,
        file_paths: tuple[str, ...] = (),
    ):
        self.app, self.max_body = app, max_body
        self.read_timeout, self.request_timeout = read_timeout, request_timeout
        self.max_file, self.file_paths = max_file or max_body, file_paths  # uploads

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] not in _BODY_METHODS:
            await self.app(scope, receive, send)
            return
        upload = _upload(scope, self.file_paths)
        limit = self.max_file if upload else self.max_body
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await respond(send, 413, self._too_large(upload))
            return
        try:
            body = await asyncio.wait_for(self._read(receive, limit), self.read_timeout)
        except _TooLarge:
            await respond(send, 413, self._too_large(upload))
            return
        except TimeoutError:
            message = f"the request body did not arrive within {self.read_timeout:g} s"
            await respond(send, 408, message)
            return
        except _Gone:
            log.info("a client went away while sending its request")
            return
        await self._answer(scope, body, receive, send)

    async def _read(self, receive, limit: int) -> bytes:
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Gone
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise _TooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _answer(self, scope, body: bytes, receive, send) -> None:
        """Run the app on `body`; cancel it when the client disconnects or time runs out."""
        gone = asyncio.Event()
        started = delivered = False

        async def replay():
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        async def tracked_send(message) -> None:
            nonlocal started
            started = True
            await send(message)

        app = asyncio.ensure_future(self.app(scope, replay, tracked_send))
        watcher = asyncio.ensure_future(_disconnected(receive, gone))
        try:
            await asyncio.wait(
                {app, watcher}, timeout=self.request_timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            watcher.cancel()
        if app.done():
            app.result()  # the app's own errors surface as they would without this
            return
        app.cancel()
        await asyncio.gather(app, return_exceptions=True)
        if gone.is_set():
            log.info("a client went away before its answer; its request was dropped")
        elif not started:
            message = f"no answer within serve.request_timeout_s ({self.request_timeout:g} s)"
            await respond(send, 503, message)

    def _too_large(self, upload: bool) -> str:
        if not upload:
            return f"the body is larger than serve.max_body_kb ({self.max_body // 1024} KB)"
        kb = self.max_file // 1024 - 64
        return f"the file is larger than serve.max_document_kb ({kb:,} KB)"


def _upload(scope, paths: tuple[str, ...]) -> bool:
    """Whether a request is a file upload: a multipart form to one of `paths`."""
    if scope.get("path") not in paths:
        return False
    kind = dict(scope.get("headers", [])).get(b"content-type", b"")
    return kind.startswith(b"multipart/form-data")


async def _disconnected(receive, gone: asyncio.Event) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    gone.set()


def _content_length(scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            return int(value) if value.isdigit() else math.inf
    return None


async def respond(send, status: int, message: str, headers: dict[str, str] | None = None) -> None:
    """A JSON `{"error": message}` answer, written straight to the ASGI `send`."""
    body = json.dumps({"error": message}).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
