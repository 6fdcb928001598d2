"""`translator serve`: the model behind HTTP (FastAPI + uvicorn), loaded once at start-up.

    POST /translate  {"text": ["Hello.", ...], "beam": 5}  →  {"translations": [...],
                     "lost": [[span, ...], ...], "appended": [[span, ...], ...],
                     "missed": [[term, ...], ...], ...}
                     optional: "split": false (each text one sentence), "nbest": N (≤ beam:
                     "hypotheses" [[{"text", "score", "lost", "appended", "missed"}, ...],
                     ...] added), "glossary": {"GPU": "显卡", ...} (laid over the server's)
    POST /document   {"text": "a whole document", "beam": 5, "glossary": {...}}  →
                     {"translation": "...", "lines": N, "notes": [...], ...}: each line
                     translated sentence by sentence, blank lines and line breaks kept
                     (the page's file translation; at most serve.max_document_chars)
    GET  /info       →  which model answers (run, checkpoint, short hash, engine, precision:
                        names, no paths), the limits, whether keys are needed, what
                        requests may ask for (the page)
    GET  /health     →  {"status": "ok", "run": ..., "engine": ..., ...}: the server is up
                        (liveness); the model by name (model_of), never a path
    GET  /ready      →  200 {"status": "ready"} once the decoder is loaded and warmed up,
                        503 {"status": "warming"} before (readiness)
    GET  /metrics    →  Prometheus metrics (observe.py)
    /lt/...          →  LibreTranslate's API (libretranslate.py)
    GET  /           →  a page to type English and see Chinese

Requests arriving together are decoded together: the first request of a batch waits up to
`serve.batch_wait_ms` for others (up to `decode.batch_size` sentences), then one decode
runs in the decoding process (decoder.py) while the next batch gathers, so throughput
grows with concurrency. Requests with different settings (beam, split, nbest) are decoded
in separate groups. At most `serve.max_queue` sentences wait: a request beyond that gets
503 with Retry-After. Who is let in before the body is read (rate limits, a full queue) is
admission.py's; what a request may cost before the app sees it (body size, read and
answer timeouts, clients that leave) is limits.py's; its body is checked against the
models of schema.py, which `/openapi.json` publishes. A bad request (too large, not JSON or
not acceptable JSON, wrong types, an empty list, too many or too long sentences, a beam or
nbest out of range) gets a 4xx JSON `{"error": ...}`, never a 500.
"""

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Protocol

from translator.config import DecodeConfig, ServeConfig, nbest_within_beam
from translator.data.glossary import Glossary
from translator.deploy.access import RequireKey, api_keys
from translator.deploy.admission import Admission
from translator.deploy.decoder import Settings, best
from translator.deploy.libretranslate import add_routes
from translator.deploy.limits import BadRequest, Limits, parse_json
from translator.deploy.observe import Metrics, Observe
from translator.errors import UserError


def require_fastapi() -> None:
    try:
        import fastapi  # noqa: F401
        import prometheus_client  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise UserError(
            'serving needs FastAPI, uvicorn and prometheus-client: pip install "translator[serve]"'
        ) from None


class Decoder(Protocol):
    """What the Batcher decodes with: decoder.py's DecoderProcess (a process of its own, as
    `translator serve` runs) or LocalDecoder (in the worker thread)."""

    def decode(self, sentences: list[str], settings: Settings) -> tuple[list, int]: ...


@dataclass
class _Pending:
    sentences: list[str]
    settings: Settings
    done: asyncio.Future = field(repr=False)


class Batcher:
    """Gathers requests for `wait` seconds after the first (up to `max_sentences`) and
    decodes the sentences of the requests with the same settings in one call, one decode at
    a time."""

    def __init__(
        self,
        decoder: Decoder,
        wait: float,
        max_sentences: int,
        on: bool,
        max_queue: int = 1 << 30,
        on_decode=lambda sentences, tokens, lost, appended: None,
    ):
        self.decoder = decoder
        # told each decode's sentences, tokens, spans lost and put at the end (/metrics)
        self.on_decode = on_decode
        self.max_queue = max_queue
        self.queued = 0  # sentences waiting, not yet taken into a batch
        self.wait = wait if on else 0.0
        self.max_sentences = max_sentences if on else 1
        self.queue: asyncio.Queue[_Pending] = asyncio.Queue()
        self.executor = ThreadPoolExecutor(max_workers=1)  # the model decodes one batch at a time
        self.decodes = 0  # how many decodes ran (for tests and /health)

    async def translate(self, sentences: list[str], settings: Settings) -> list:
        """The hypotheses of each of `sentences` (decoder.py), once decoded; BadRequest 503
        at once when the queue has no room for them (the app answers it after
        serve.refusal_delay_s). Cancelling the call drops them if not yet decoding."""
        if refused := self.refusal(len(sentences)):
            raise refused
        done = asyncio.get_running_loop().create_future()
        self.queued += len(sentences)
        self.queue.put_nowait(_Pending(sentences, settings, done))
        return await done

    def refusal(self, sentences: int) -> BadRequest | None:
        """The 503 for `sentences` more when the queue has no room for them, else None."""
        if self.queued + sentences <= self.max_queue:
            return None
        message = (
            f"busy: {self.queued} sentences are waiting (serve.max_queue {self.max_queue}); "
            "try again shortly"
        )
        return BadRequest(503, message, {"Retry-After": "1"})

    async def run(self) -> None:
        while True:
            batch = await self._gather()
            for settings in dict.fromkeys(p.settings for p in batch if not p.done.done()):
                await self._decode([p for p in batch if p.settings == settings], settings)

    async def _gather(self) -> list[_Pending]:
        batch = [await self.queue.get()]
        size = len(batch[0].sentences)
        deadline = time.monotonic() + self.wait
        while size < self.max_sentences:
            try:
                timeout = max(0.0, deadline - time.monotonic())
                item = await asyncio.wait_for(self.queue.get(), timeout)
            except asyncio.TimeoutError:
                break
            batch.append(item)
            size += len(item.sentences)
        self.queued -= size
        return [p for p in batch if not p.done.done()]  # a cancelled request is not decoded

    async def _decode(self, requests: list[_Pending], settings: Settings) -> None:
        sentences = [s for p in requests for s in p.sentences]
        loop = asyncio.get_running_loop()
        decode = self.decoder.decode
        try:
            outputs, tokens = await loop.run_in_executor(self.executor, decode, sentences, settings)
        except Exception as exc:  # noqa: BLE001 - handed to each waiting request
            for p in requests:
                if not p.done.done():
                    p.done.set_exception(exc)
            return
        self.decodes += 1
        top = best(outputs)
        lost = sum(len(h.lost) for h in top)
        self.on_decode(sentences, tokens, lost, sum(len(h.appended) for h in top))
        start = 0
        for p in requests:
            if not p.done.done():  # cancelled while it was decoding: nobody waits for it
                p.done.set_result(outputs[start : start + len(p.sentences)])
                await asyncio.sleep(0)  # one answer a turn of the loop: /health goes between
            start += len(p.sentences)


def check_request(
    body: Any, serve_cfg: ServeConfig, defaults: Settings, model=None
) -> tuple[list[str], Settings]:
    """The sentences and settings of a parsed request body, checked against the request
    model (`model`: schema.request_models' for these limits) and the serve limits;
    BadRequest (status, message) if it is not one we answer."""
    from pydantic import ValidationError

    from translator.deploy.schema import request_models

    if not isinstance(body, dict):
        raise BadRequest(422, 'the body must be a JSON object like {"text": ["Hello."]}')
    text = body.get("text")
    if isinstance(text, list) and len(text) > serve_cfg.max_sentences:
        raise BadRequest(413, f"too many sentences: {len(text)} > {serve_cfg.max_sentences}")
    longest = max((len(s) for s in text if isinstance(s, str)), default=0) if text else 0
    if isinstance(text, list) and longest > serve_cfg.max_chars:
        raise BadRequest(413, f"a sentence has {longest} characters > {serve_cfg.max_chars}")
    check_glossary_size(body.get("glossary"), serve_cfg)
    try:
        request = (model or request_models(serve_cfg)[0]).model_validate(body)
    except ValidationError as exc:
        raise BadRequest(422, _explained(exc.errors(), serve_cfg)) from None
    split = defaults.split if request.split is None else request.split
    settings = _settings(request, defaults, split, request.nbest)
    return request.text, settings


def check_document(
    body: Any, serve_cfg: ServeConfig, defaults: Settings, model
) -> tuple[str, Settings]:
    """The text and settings of a parsed POST /document body (`model`: schema's
    document_model for these limits); BadRequest as for check_request."""
    from pydantic import ValidationError

    if not isinstance(body, dict):
        raise BadRequest(422, 'the body must be a JSON object like {"text": "Hello."}')
    text = body.get("text")
    if isinstance(text, str) and len(text) > serve_cfg.max_document_chars:
        raise BadRequest(
            413,
            f"the document has {len(text):,} characters > {serve_cfg.max_document_chars:,} "
            "(serve.max_document_chars): translate it with translator translate --input",
        )
    check_glossary_size(body.get("glossary"), serve_cfg)
    try:
        request = model.model_validate(body)
    except ValidationError as exc:
        raise BadRequest(422, _explained(exc.errors(), serve_cfg, "a string")) from None
    return request.text, _settings(request, defaults, split=True, nbest=0)


def _settings(request, defaults: Settings, split: bool, nbest: int) -> Settings:
    """A validated request's decoding settings: its beam (or the default), its glossary
    checked as a file is (400 naming the entry)."""
    beam = defaults.beam if request.beam is None else request.beam
    if wrong := nbest_within_beam(nbest, beam):
        raise BadRequest(422, f'"nbest" ({nbest}) {wrong}')
    glossary = ()
    if request.glossary:
        try:
            Glossary.of(request.glossary, origin='"glossary"')
        except UserError as exc:
            raise BadRequest(400, str(exc)) from None
        glossary = tuple(request.glossary.items())
    return Settings(beam, split, nbest, glossary)


def check_glossary_size(glossary: Any, serve_cfg: ServeConfig) -> None:
    """413 for a request glossary over serve.max_glossary_entries or serve.max_glossary_kb
    (its English and Chinese in UTF-8), as for too many or too long texts."""
    if not isinstance(glossary, dict):
        return
    if len(glossary) > serve_cfg.max_glossary_entries:
        raise BadRequest(
            413, f"too many glossary entries: {len(glossary)} > {serve_cfg.max_glossary_entries}"
        )
    size = sum(len(str(k).encode()) + len(str(v).encode()) for k, v in glossary.items())
    if size > serve_cfg.max_glossary_kb * 1024:
        raise BadRequest(413, f"the glossary has {size:,} bytes > {serve_cfg.max_glossary_kb} KB")


def _explained(errors: list[dict], serve_cfg: ServeConfig, text: str = "a list of strings") -> str:
    """pydantic's findings about a request, as one message in the API's own words."""
    unknown = [str(e["loc"][0]) for e in errors if e["type"] == "extra_forbidden"]
    if unknown:
        return f"unknown field(s): {', '.join(sorted(unknown))}"
    field = str(errors[0]["loc"][0]) if errors[0]["loc"] else ""
    if field == "text" and errors[0]["type"] == "too_short":
        return '"text" is empty: give at least one sentence'
    return {
        "text": f'"text" must be {text}',
        "beam": f'"beam" must be an integer from 1 to {serve_cfg.max_beam}',
        "split": '"split" must be true or false',
        "nbest": '"nbest" must be an integer from 0 to the beam',
        "glossary": '"glossary" must be an object of English terms and their Chinese, '
        f"each at most {serve_cfg.max_chars} characters",
    }.get(field, f"{field or 'the body'}: {errors[0]['msg']}")


async def translated_document(batcher: Batcher, text: str, settings: Settings, chunk: int) -> dict:
    """A document's translation, line for line (blank lines and the line ending kept), and
    notes on the lines with spans lost or put at the end or glossary terms missed. Its
    lines are decoded `chunk` at a time, each chunk queued as a request is."""
    ending = "\r\n" if "\r\n" in text else "\n"
    lines = [line.rstrip("\r") for line in text.split("\n")]
    filled = [i for i, line in enumerate(lines) if line.strip()]
    out, notes = list(lines), []
    for start in range(0, len(filled), chunk):
        numbers = filled[start : start + chunk]
        top = best(await batcher.translate([lines[i] for i in numbers], settings))
        for i, hypothesis in zip(numbers, top, strict=True):
            out[i] = hypothesis.text
            note = {
                "lost": list(hypothesis.lost),
                "appended": list(hypothesis.appended),
                "missed": list(hypothesis.missed),
            }
            if any(note.values()):
                notes.append({"line": i + 1, **note})
    return {"translation": ending.join(out), "lines": len(filled), "notes": notes}


MODEL_FIELDS = ("run", "checkpoint", "sha256", "engine", "precision", "decodes_from")


def model_of(about: dict) -> dict[str, str]:
    """The model as /health and /info name it: MODEL_FIELDS of `about` (decoder.py's
    model_identity), nothing else, so that no path the CLI knows reaches a client."""
    return {name: str(about.get(name, "")) for name in MODEL_FIELDS}


def server_info(about: dict, decode_cfg: DecodeConfig, serve_cfg: ServeConfig, keys: bool) -> dict:
    """What GET /info says: the model (by name, from what the decoding process said,
    `about`), the default beam, the limits, whether keys are needed, and what a request
    may ask for."""
    limits = {
        "max_sentences": serve_cfg.max_sentences,
        "max_chars": serve_cfg.max_chars,
        "max_beam": serve_cfg.max_beam,
        "max_document_chars": serve_cfg.max_document_chars,
        "max_glossary_entries": serve_cfg.max_glossary_entries,
    }
    return {
        "model": model_of(about),
        "beam": decode_cfg.beam,
        "limits": limits,
        "keys": keys,
        "glossary": about.get("glossary", 0),
        "features": ["nbest", "glossary", "document"],
    }


def create_app(decoder: Decoder, decode_cfg: DecodeConfig, serve_cfg: ServeConfig, about: dict):
    """The FastAPI app around one decoder (closed, if it can be, when the server stops).
    `about`: the model by name (decoder.py's model_identity) and the server glossary's
    entries (`glossary`); only those reach clients."""
    from fastapi import FastAPI, Request
    from fastapi.responses import HTMLResponse, JSONResponse

    from translator.deploy.schema import (
        DocumentResponse,
        ErrorResponse,
        Health,
        ServerInfo,
        TranslateResponse,
        document_model,
        request_models,
    )

    wait = serve_cfg.batch_wait_ms / 1000
    defaults = Settings(decode_cfg.beam, decode_cfg.split)
    batcher = Batcher(decoder, wait, decode_cfg.batch_size, serve_cfg.batching, serve_cfg.max_queue)
    metrics = Metrics(lambda: batcher.queued)
    batcher.on_decode = metrics.decoded
    page = resources.files("translator.deploy").joinpath("static/index.html").read_text("utf-8")

    async def lifespan(app):
        task = asyncio.create_task(batcher.run())
        yield
        task.cancel()
        if hasattr(decoder, "close"):
            await asyncio.to_thread(decoder.close)

    app = FastAPI(title="translator", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.batcher = batcher
    # the last added runs first: metrics and access log, CORS (a browser's preflight needs
    # no key), keys, admission (rate limits, a full queue), limits
    app.add_middleware(
        Limits,
        max_body=serve_cfg.max_body_kb * 1024,
        read_timeout=serve_cfg.read_timeout_s,
        request_timeout=serve_cfg.request_timeout_s,
    )
    keys = api_keys(serve_cfg.api_keys)
    app.add_middleware(
        Admission,
        full=batcher.refusal,
        rate=serve_cfg.rate_limit,
        burst=serve_cfg.rate_burst,
        keys=keys,
        metrics=metrics,
        delay=serve_cfg.refusal_delay_s,
    )
    if keys:
        app.add_middleware(RequireKey, keys=keys)
    if serve_cfg.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=serve_cfg.cors_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "X-API-Key", "Content-Type"],
        )
    app.add_middleware(Observe, metrics=metrics)  # outermost: sees every answer

    @app.exception_handler(BadRequest)
    async def bad_request(request: Request, exc: BadRequest):
        if exc.status == 503:  # busy: held as admission.py holds its refusals
            await asyncio.sleep(serve_cfg.refusal_delay_s)
        return JSONResponse({"error": exc.message}, status_code=exc.status, headers=exc.headers)

    @app.exception_handler(Exception)
    async def failed(request: Request, exc: Exception):
        message = (
            str(exc) if isinstance(exc, UserError) else getattr(exc, "kind", type(exc).__name__)
        )
        return JSONResponse({"error": f"translation failed: {message}"}, status_code=500)

    errors = {status: {"model": ErrorResponse} for status in (400, 401, 408, 413, 422, 429, 503)}
    ours, theirs = request_models(serve_cfg)
    body_schema = {"content": {"application/json": {"schema": ours.model_json_schema()}}}

    @app.post(
        "/translate",
        response_model=TranslateResponse,
        response_model_exclude_none=True,
        responses=errors,
        openapi_extra={"requestBody": {"required": True, **body_schema}},
    )
    async def translate(request: Request):
        """Translate English texts (read strictly: see the request schema)."""
        started = time.perf_counter()
        body = parse_json(await request.body())
        sentences, settings = check_request(body, serve_cfg, defaults, ours)
        found = await batcher.translate(sentences, settings)
        ms = round((time.perf_counter() - started) * 1000, 1)
        top = best(found)
        answer = {
            "translations": [h.text for h in top],
            "lost": [list(h.lost) for h in top],
            "appended": [list(h.appended) for h in top],
            "missed": [list(h.missed) for h in top],
            "beam": settings.beam,
            "milliseconds": ms,
        }
        if settings.nbest:
            answer["hypotheses"] = [[h._asdict() for h in hypotheses] for hypotheses in found]
        return answer

    document = document_model(serve_cfg)

    @app.post(
        "/document",
        response_model=DocumentResponse,
        responses=errors,
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": document.model_json_schema()}},
            }
        },
    )
    async def translate_document(request: Request):
        """Translate a document line by line, each line sentence by sentence."""
        started = time.perf_counter()
        text, settings = check_document(
            parse_json(await request.body()), serve_cfg, defaults, document
        )
        done = await translated_document(batcher, text, settings, serve_cfg.max_sentences)
        ms = round((time.perf_counter() - started) * 1000, 1)
        return {**done, "beam": settings.beam, "milliseconds": ms}

    add_routes(app, batcher, serve_cfg, defaults, keys, theirs)  # LibreTranslate's API at /lt

    @app.get("/metrics", responses={200: {"content": {"text/plain": {}}}})
    async def prometheus():
        from fastapi import Response

        body, kind = metrics.exposition()
        return Response(body, media_type=kind)

    alive = {"status": "ok", **model_of(about), "batching": serve_cfg.batching}
    alive["glossary"] = about.get("glossary", 0)

    @app.get("/health", response_model=Health)
    async def health():
        """200 while the server listens (liveness), with the model by name."""
        return {**alive, "decodes": batcher.decodes}

    info = server_info(about, decode_cfg, serve_cfg, bool(keys))

    @app.get("/info", response_model=ServerInfo)
    async def server_about():
        """Which model answers, the limits, whether keys are needed (what the page reads)."""
        return info

    @app.get("/ready", responses={503: {"model": ErrorResponse}})
    async def ready():
        """200 once a request will be decoded at once, as fast as the ones after it."""
        if getattr(decoder, "ready", True):
            return {"status": "ready", "warm_up_s": round(getattr(decoder, "warm_s", 0.0), 2)}
        return JSONResponse({"status": "warming"}, status_code=503, headers={"Retry-After": "1"})

    @app.get("/", response_class=HTMLResponse)
    async def index():
        return page

    return app
