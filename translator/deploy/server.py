"""`translator serve`: the model behind HTTP (FastAPI on granian: listen.py), loaded once at
start-up: POST /translate and /document, GET /info, /health, /ready and /metrics,
LibreTranslate's API under /lt and a page at / (docs/deploy.md#serve).

admission.py, access.py and limits.py decide what gets in; a body is checked (intake.py,
schema.py) before any of it is decoded, so a bad request gets a 4xx JSON `{"error": ...}`
naming the field or the limit, never a 500. Its texts then wait in batcher.py's queue.
"""

import asyncio
import time
from importlib import resources

from translator.config import DecodeConfig, ServeConfig
from translator.data.splitting import join
from translator.deploy.access import RequireKey, api_keys
from translator.deploy.admission import Admission
from translator.deploy.batcher import Batcher, Decoder
from translator.deploy.decoder import Settings, best
from translator.deploy.intake import check_document, check_request, off_loop
from translator.deploy.libretranslate import add_routes
from translator.deploy.limits import BadRequest, Limits, parse_json
from translator.deploy.observe import Metrics, Observe
from translator.deploy.uploads import FILE_PATHS, file_answer, lines_translated
from translator.errors import UserError
from translator.inference.hypothesis import Hypothesis


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
    """A document's translation, line for line (blank lines and line endings kept), and notes
    on its lines; its sentences go through the queue `window` at a time."""
    ending = "\r\n" if "\r\n" in text else "\n"
    lines = [line.rstrip("\r") for line in text.split("\n")]
    found = await lines_translated(batcher, lines, settings, window, max_chars)
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
    return {"translation": ending.join(out), "lines": sum(map(bool, found)), "notes": notes}


MODEL_FIELDS = ("run", "checkpoint", "sha256", "engine", "precision", "decodes_from")


def model_of(about: dict) -> dict[str, str]:
    """The model as /health and /info name it: MODEL_FIELDS of `about` (decoder.py's
    model_identity), nothing else, so that no path the CLI knows reaches a client."""
    return {name: str(about.get(name, "")) for name in MODEL_FIELDS}


LIMITS = (  # what /info says of serve's limits
    *("max_sentences", "max_chars", "max_beam", "max_document_chars", "max_document_kb"),
    *("max_glossary_entries", "max_term_chars"),
)


class Service:
    """What the routes share: the decoder, its batcher, metrics, default settings and keys."""

    def __init__(self, decoder: Decoder, decode_cfg: DecodeConfig, serve_cfg: ServeConfig):
        self.decoder, self.decode_cfg, self.serve_cfg = decoder, decode_cfg, serve_cfg
        self.defaults = Settings(decode_cfg.beam, decode_cfg.split)
        wait, size = serve_cfg.batch_wait_ms / 1000, decode_cfg.batch_size
        self.batcher = Batcher(decoder, wait, size, serve_cfg.batching, serve_cfg.max_queue)
        self.metrics = Metrics(lambda: self.batcher.queued)
        self.batcher.on_decode = self.metrics.decoded
        self.keys = api_keys(serve_cfg)

    async def lifespan(self, app):
        """The batcher runs while the app serves; the decoder is closed, if it can be, after."""
        task = asyncio.create_task(self.batcher.run())
        yield
        task.cancel()
        if hasattr(self.decoder, "close"):
            await asyncio.to_thread(self.decoder.close)


def create_app(decoder: Decoder, decode_cfg: DecodeConfig, serve_cfg: ServeConfig, about: dict):
    """The FastAPI app around one decoder; `about`: the model by name (model_identity) and
    the server glossary's entries, all that clients are told of it."""
    from fastapi import FastAPI
    from fastapi.responses import HTMLResponse

    from translator.deploy.schema import request_models

    service = Service(decoder, decode_cfg, serve_cfg)
    app = FastAPI(title="translator", lifespan=service.lifespan, docs_url=None, redoc_url=None)
    add_middleware(app, service)
    add_error_handlers(app, serve_cfg)
    ours, theirs = request_models(serve_cfg)
    add_translation(app, service, ours)  # POST /translate, POST /document
    add_routes(app, service.batcher, serve_cfg, service.defaults, service.keys, theirs)  # /lt
    add_status(app, service, about)  # GET /metrics, /health, /info, /ready
    page = resources.files("translator.deploy").joinpath("static/index.html").read_text("utf-8")

    @app.get("/", response_class=HTMLResponse)
    async def index():  # a page to type English and see Chinese
        return page

    return app


def add_middleware(app, service: Service) -> None:
    """What a request passes before a route sees it. The last added runs first: metrics and
    access log, CORS (a browser's preflight needs no key), admission (rate limits, wrong
    keys counted too, a full queue), keys, limits."""
    serve_cfg = service.serve_cfg
    app.add_middleware(
        Limits,
        max_body=serve_cfg.max_body_kb * 1024,
        max_file=(serve_cfg.max_document_kb + 64) * 1024,  # the file and its form
        file_paths=FILE_PATHS,
        read_timeout=serve_cfg.read_timeout_s,
        request_timeout=serve_cfg.request_timeout_s,
    )
    if service.keys:
        app.add_middleware(RequireKey, keys=service.keys)
    app.add_middleware(
        Admission,
        full=service.batcher.refusal,
        rate=serve_cfg.rate_limit,
        burst=serve_cfg.rate_burst,
        keys=service.keys,
        metrics=service.metrics,
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
    app.add_middleware(Observe, metrics=service.metrics)  # outermost: sees every answer


def add_error_handlers(app, serve_cfg: ServeConfig) -> None:
    """A bad request: its 4xx (a 503 held as admission.py holds its refusals); anything
    else: a 500 naming what failed, never a traceback."""
    from fastapi import Request
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException as StarletteHTTPException

    @app.exception_handler(BadRequest)
    async def bad_request(request: Request, exc: BadRequest):
        if exc.status == 503:
            await asyncio.sleep(serve_cfg.refusal_delay_s)
        return JSONResponse({"error": exc.message}, status_code=exc.status, headers=exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def not_routed(request: Request, exc: StarletteHTTPException):  # 404, 405
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def failed(request: Request, exc: Exception):
        message = (
            str(exc) if isinstance(exc, UserError) else getattr(exc, "kind", type(exc).__name__)
        )
        return JSONResponse({"error": f"translation failed: {message}"}, status_code=500)


ERRORS = (400, 401, 408, 413, 422, 429, 503)  # what /translate and /document may answer


def add_translation(app, service: Service, ours) -> None:
    """POST /translate and /document: each request checked (intake.py), then batched."""
    from fastapi import Request

    from translator.deploy.schema import (
        FILE_ANSWER,
        DocumentResponse,
        ErrorResponse,
        TranslateResponse,
        document_model,
        upload_schema,
    )

    serve_cfg, defaults, batcher = service.serve_cfg, service.defaults, service.batcher
    errors = {status: {"model": ErrorResponse} for status in ERRORS}

    def json_body(model, upload: dict | None = None) -> dict:
        content = {"application/json": {"schema": model.model_json_schema()}}
        if upload:
            content["multipart/form-data"] = {"schema": upload}
        return {"requestBody": {"required": True, "content": content}}

    @app.post(
        "/translate",
        response_model=TranslateResponse,
        response_model_exclude_none=True,
        responses=errors,
        openapi_extra=json_body(ours),
    )
    async def translate(request: Request):
        """Translate English texts (read strictly: see the request schema)."""
        started = time.perf_counter()
        body = await request.body()
        texts, settings, costs = await off_loop(
            len(body), lambda: check_request(parse_json(body), serve_cfg, defaults, ours)
        )
        found = await batcher.translate(texts, settings, costs)
        return translation_answer(found, settings, round((time.perf_counter() - started) * 1000, 1))

    document = document_model(serve_cfg)

    @app.post(
        "/document",
        response_model=DocumentResponse,
        responses=errors | {200: FILE_ANSWER},  # JSON, or a file in its format
        openapi_extra=json_body(
            document, upload_schema("format", "beam", "glossary", "retranslate")
        ),
    )
    async def translate_document(request: Request):
        """Translate a document: JSON text line by line, each line sentence by sentence; or
        a file (multipart/form-data, field `file`; .docx .pptx .odt .epub .html .md .srt
        .vtt .po .xliff .txt), answered as its translation in its own format."""
        if request.headers.get("content-type", "").startswith("multipart/form-data"):
            return await file_answer(request, batcher, serve_cfg, defaults, document)
        started = time.perf_counter()
        body = await request.body()
        text, settings = await off_loop(
            len(body), lambda: check_document(parse_json(body), serve_cfg, defaults, document)
        )
        window, max_chars = serve_cfg.max_sentences, serve_cfg.max_chars
        done = await translated_document(batcher, text, settings, window, max_chars)
        ms = round((time.perf_counter() - started) * 1000, 1)
        return {**done, "beam": settings.beam, "milliseconds": ms}


def translation_answer(found: list[list[Hypothesis]], settings: Settings, ms: float) -> dict:
    """What POST /translate answers (with nbest, each text's hypotheses too)."""
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


def add_status(app, service: Service, about: dict) -> None:
    """GET /metrics, /health (liveness), /info (what the page reads) and /ready (readiness)."""
    from fastapi import Response
    from fastapi.responses import JSONResponse

    from translator.deploy.schema import ErrorResponse, Health, ServerInfo

    decoder, batcher, serve_cfg = service.decoder, service.batcher, service.serve_cfg

    @app.get("/metrics", responses={200: {"content": {"text/plain": {}}}})
    async def prometheus():
        body, kind = service.metrics.exposition()
        return Response(body, media_type=kind)

    alive = {"status": "ok", **model_of(about), "batching": serve_cfg.batching}
    alive["glossary"] = about.get("glossary", 0)

    @app.get("/health", response_model=Health)
    async def health():
        """200 while the server listens (liveness), with the model by name."""
        return {**alive, "decodes": batcher.decodes}

    info = {
        "model": model_of(about),
        "beam": service.decode_cfg.beam,
        "limits": {name: getattr(serve_cfg, name) for name in LIMITS},
        "keys": bool(service.keys),
        "glossary": about.get("glossary", 0),
        "features": ["nbest", "glossary", "document"],
    }

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
