"""`translator serve`: the model behind HTTP (FastAPI on granian: listen.py), loaded once at
start-up.

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
                        503 {"status": "warming"} before, and {"status": "busy"} while
                        the decoder is busy past serve.busy_s (readiness)
    GET  /metrics    →  Prometheus metrics (observe.py)
    /lt/...          →  LibreTranslate's API (libretranslate.py)
    GET  /           →  a page to type English and see Chinese

A request is read and checked before any of it is decoded (intake.py): the limits count
what the decoder will do (its sentences after splitting, their characters, the beam), and
a large body is parsed in a worker thread, so /health is answered throughout. Its texts
then wait in the queue of batcher.py, which cuts batches from the requests waiting in turn
(up to `decode.batch_size` sentences; the first of a batch waits up to
`serve.batch_wait_ms` for others) and runs one decode at a time in the decoding process
(decoder.py): a long document does not hold a short request back, a request whose client
left costs no more decoder time, and a batch that fails is decoded again request by
request so that a bad request fails alone. At most `serve.max_queue` sentences wait: a
request beyond that gets 503 with Retry-After. Who is let in before the body is read (rate
limits, wrong keys counted with them, a full queue) is admission.py's; what a request may
cost before the app sees it (body size, read and answer timeouts, clients that leave) is
limits.py's; its body is checked against the models of schema.py, which `/openapi.json`
publishes. A bad request (too large, not JSON or not acceptable JSON, a lone surrogate,
wrong types, an empty list, too many or too long sentences, a beam or nbest out of range)
gets a 4xx JSON `{"error": ...}` naming the field or the limit, never a 500.
"""

import asyncio
import time
from importlib import resources

from translator.config import DecodeConfig, ServeConfig
from translator.deploy.access import RequireKey, api_keys
from translator.deploy.admission import Admission
from translator.deploy.batcher import Batcher, Decoder
from translator.deploy.decoder import Settings, best
from translator.deploy.intake import check_document, check_request, document_units, off_loop
from translator.deploy.libretranslate import add_routes
from translator.deploy.limits import BadRequest, Limits, parse_json
from translator.deploy.observe import Metrics, Observe
from translator.errors import UserError
from translator.inference.hypothesis import Hypothesis
from translator.inference.sentences import join


def require_fastapi() -> None:
    try:
        import fastapi  # noqa: F401
        import granian  # noqa: F401
        import prometheus_client  # noqa: F401
    except ImportError:
        raise UserError(
            'serving needs FastAPI, granian and prometheus-client: pip install "translator[serve]"'
        ) from None


async def translated_document(
    batcher: Batcher, text: str, settings: Settings, window: int, max_chars: int
) -> dict:
    """A document's translation, line for line (blank lines and the line ending kept), and
    notes on the lines with spans lost or put at the end or glossary terms missed. Its
    sentences (intake.document_units) go through the queue `window` at a time, the first
    window admitted as a request is, the rest as its continuation; each line's
    translations are joined as the decoder joins a line's sentences."""
    ending = "\r\n" if "\r\n" in text else "\n"
    lines = [line.rstrip("\r") for line in text.split("\n")]
    units, owners = await asyncio.to_thread(document_units, lines, max_chars)
    found: list[list[Hypothesis]] = [[] for _ in lines]
    for start in range(0, len(units), window):
        part = units[start : start + window]
        top = best(await batcher.translate(part, settings, admitted=start > 0))
        for line, hypothesis in zip(owners[start : start + window], top, strict=True):
            found[line].append(hypothesis)
    out, notes = list(lines), []
    for i, hypotheses in enumerate(found):
        if not hypotheses:
            continue
        out[i] = join([h.text for h in hypotheses])
        note = {
            "lost": [span for h in hypotheses for span in h.lost],
            "appended": [span for h in hypotheses for span in h.appended],
            "missed": [term for h in hypotheses for term in h.missed],
        }
        if any(note.values()):
            notes.append({"line": i + 1, **note})
    return {"translation": ending.join(out), "lines": len(set(owners)), "notes": notes}


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
        "max_term_chars": serve_cfg.max_term_chars,
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
    # no key), admission (rate limits, wrong keys counted too, a full queue), keys, limits
    app.add_middleware(
        Limits,
        max_body=serve_cfg.max_body_kb * 1024,
        read_timeout=serve_cfg.read_timeout_s,
        request_timeout=serve_cfg.request_timeout_s,
    )
    keys = api_keys(serve_cfg)
    if keys:
        app.add_middleware(RequireKey, keys=keys)
    app.add_middleware(
        Admission,
        full=batcher.refusal,
        rate=serve_cfg.rate_limit,
        burst=serve_cfg.rate_burst,
        keys=keys,
        metrics=metrics,
        delay=serve_cfg.refusal_delay_s,
    )
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
        body = await request.body()
        texts, settings, costs = await off_loop(
            len(body), lambda: check_request(parse_json(body), serve_cfg, defaults, ours)
        )
        found = await batcher.translate(texts, settings, costs)
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
        body = await request.body()
        text, settings = await off_loop(
            len(body), lambda: check_document(parse_json(body), serve_cfg, defaults, document)
        )
        window, max_chars = serve_cfg.max_sentences, serve_cfg.max_chars
        done = await translated_document(batcher, text, settings, window, max_chars)
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
        """200 once a request will be decoded at once, as fast as the ones after it: 503
        while the decoder warms up, and while it is busy past serve.busy_s (a batch that
        long, or a request waiting that long for its next batch)."""
        retry = {"Retry-After": "1"}
        if not getattr(decoder, "ready", True):
            return JSONResponse({"status": "warming"}, status_code=503, headers=retry)
        if (busy := batcher.busy()) > serve_cfg.busy_s:
            answer = {"status": "busy", "busy_s": round(busy, 1)}
            return JSONResponse(answer, status_code=503, headers=retry)
        return {"status": "ready", "warm_up_s": round(getattr(decoder, "warm_s", 0.0), 2)}

    @app.get("/", response_class=HTMLResponse)
    async def index():
        return page

    return app
