"""`translator serve`: the model behind HTTP (FastAPI + uvicorn), loaded once at start-up.

    POST /translate  {"text": ["Hello.", ...], "beam": 5}  →  {"translations": [...], ...}
                     optional: "split": false (each text one sentence), "nbest": N (≤ beam:
                     "hypotheses" [[{"text", "score"}, ...], ...] added)
    GET  /health     →  {"status": "ok", "engine": ..., ...}
    GET  /           →  a page to type English and see Chinese

Requests arriving together are decoded together: the first request of a batch waits up to
`serve.batch_wait_ms` for others (up to `decode.batch_size` sentences), then one decode
runs in a worker thread while the next batch gathers, so throughput grows with
concurrency. Requests with different settings (beam, split, nbest) are decoded in separate
groups. A bad request (not JSON, wrong types, an empty list, too many or too long
sentences, a beam or nbest out of range) gets a 4xx JSON `{"error": ...}`, never a 500.
"""

import asyncio
import dataclasses
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from translator.config import ServeConfig
from translator.errors import UserError
from translator.inference.text import TextTranslator


def require_fastapi() -> None:
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise UserError(
            'serving needs FastAPI and uvicorn: pip install "translator[serve]"'
        ) from None


@dataclass(frozen=True)
class Settings:
    """What a request may choose about decoding; requests that agree decode together."""

    beam: int
    split: bool
    nbest: int = 0


@dataclass
class _Pending:
    sentences: list[str]
    settings: Settings
    done: asyncio.Future = field(repr=False)


class Batcher:
    """Gathers requests for `wait` seconds after the first (up to `max_sentences`) and
    decodes the sentences of the requests with the same settings in one call, one decode at
    a time."""

    def __init__(self, translator: TextTranslator, wait: float, max_sentences: int, on: bool):
        self.translator = translator
        self.wait = wait if on else 0.0
        self.max_sentences = max_sentences if on else 1
        self.queue: asyncio.Queue[_Pending] = asyncio.Queue()
        self.executor = ThreadPoolExecutor(max_workers=1)  # the model decodes one batch at a time
        self.engines: dict[Settings, TextTranslator] = {}
        self.decodes = 0  # how many decodes ran (for tests and /health)

    async def translate(self, sentences: list[str], settings: Settings) -> list:
        done = asyncio.get_running_loop().create_future()
        await self.queue.put(_Pending(sentences, settings, done))
        return await done

    async def run(self) -> None:
        while True:
            batch = await self._gather()
            for settings in dict.fromkeys(p.settings for p in batch):
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
        return batch

    async def _decode(self, requests: list[_Pending], settings: Settings) -> None:
        sentences = [s for p in requests for s in p.sentences]
        if settings not in self.engines:
            self.engines[settings] = self.translator.with_decode(**dataclasses.asdict(settings))
        engine = self.engines[settings]
        loop = asyncio.get_running_loop()
        try:
            outputs = await loop.run_in_executor(self.executor, engine.translate, sentences)
        except Exception as exc:  # noqa: BLE001 - handed to each waiting request
            for p in requests:
                p.done.set_exception(exc)
            return
        self.decodes += 1
        start = 0
        for p in requests:
            p.done.set_result(outputs[start : start + len(p.sentences)])
            start += len(p.sentences)


def check_request(body: Any, limits: ServeConfig, defaults: Settings) -> tuple[list[str], Settings]:
    """The sentences and settings of a request body; BadRequest (status, message) if it is
    not one we can answer."""
    if not isinstance(body, dict):
        raise BadRequest(422, 'the body must be a JSON object like {"text": ["Hello."]}')
    unknown = set(body) - {"text", "beam", "split", "nbest"}
    if unknown:
        raise BadRequest(422, f"unknown field(s): {', '.join(sorted(unknown))}")
    text, beam = body.get("text"), body.get("beam", defaults.beam)
    split, nbest = body.get("split", defaults.split), body.get("nbest", 0)
    if not isinstance(text, list) or not all(isinstance(s, str) for s in text):
        raise BadRequest(422, '"text" must be a list of strings')
    if not text:
        raise BadRequest(422, '"text" is empty: give at least one sentence')
    if len(text) > limits.max_sentences:
        raise BadRequest(413, f"too many sentences: {len(text)} > {limits.max_sentences}")
    longest = max(len(s) for s in text)
    if longest > limits.max_chars:
        raise BadRequest(413, f"a sentence has {longest} characters > {limits.max_chars}")
    if isinstance(beam, bool) or not isinstance(beam, int) or not 1 <= beam <= limits.max_beam:
        raise BadRequest(422, f'"beam" must be an integer from 1 to {limits.max_beam}')
    if not isinstance(split, bool):
        raise BadRequest(422, '"split" must be true or false')
    if isinstance(nbest, bool) or not isinstance(nbest, int) or not 0 <= nbest <= beam:
        raise BadRequest(422, f'"nbest" must be an integer from 0 to the beam ({beam})')
    return text, Settings(beam, split, nbest)


class BadRequest(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def create_app(translator: TextTranslator, limits: ServeConfig, about: dict[str, Any]):
    """The FastAPI app around one loaded translator."""
    from fastapi import FastAPI, Request
    from fastapi.responses import HTMLResponse, JSONResponse

    wait = limits.batch_wait_ms / 1000
    defaults = Settings(translator.decode.beam, translator.decode.split)
    batcher = Batcher(translator, wait, translator.decode.batch_size, limits.batching)
    page = resources.files("translator.deploy").joinpath("static/index.html").read_text("utf-8")

    async def lifespan(app):
        task = asyncio.create_task(batcher.run())
        yield
        task.cancel()

    app = FastAPI(title="translator", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.batcher = batcher

    @app.exception_handler(BadRequest)
    async def bad_request(request: Request, exc: BadRequest):
        return JSONResponse({"error": exc.message}, status_code=exc.status)

    @app.exception_handler(Exception)
    async def failed(request: Request, exc: Exception):
        message = str(exc) if isinstance(exc, UserError) else type(exc).__name__
        return JSONResponse({"error": f"translation failed: {message}"}, status_code=500)

    @app.post("/translate")
    async def translate(request: Request):
        started = time.perf_counter()
        try:
            body = json.loads(await request.body())
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise BadRequest(400, "the body is not valid JSON") from None
        sentences, settings = check_request(body, limits, defaults)
        found = await batcher.translate(sentences, settings)
        ms = (time.perf_counter() - started) * 1000
        if not settings.nbest:
            return {"translations": found, "beam": settings.beam, "milliseconds": round(ms, 1)}
        return {
            "translations": [hypotheses[0].text if hypotheses else "" for hypotheses in found],
            "hypotheses": [[h._asdict() for h in hypotheses] for hypotheses in found],
            "beam": settings.beam,
            "milliseconds": round(ms, 1),
        }

    @app.get("/health")
    async def health():
        return {"status": "ok", **about, "decodes": batcher.decodes}

    @app.get("/", response_class=HTMLResponse)
    async def index():
        return page

    return app
