"""LibreTranslate's HTTP API, mounted at /lt: the open convention that browser extensions,
chat bots, CAT tools and the `libretranslatepy` client speak (docs/deploy.md). Errors are
LibreTranslate's `{"error": ...}`: 400 for a bad request, 403 for a missing or wrong key.
"""

import asyncio
import html  # no `from __future__ import annotations`: FastAPI reads the routes' types
from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qs

from translator.config import ServeConfig
from translator.deploy.access import accepted, presented
from translator.deploy.decoder import best
from translator.deploy.intake import check_sentences, costs, off_loop
from translator.deploy.limits import BadRequest, parse_json

SOURCES, TARGETS = ("en", "auto"), ("zh", "zh-Hans", "zh-CN")
LANGUAGES = [
    {"code": "en", "name": "English", "targets": ["zh"]},
    {"code": "zh", "name": "Chinese", "targets": []},
]


def read_body(body: bytes, content_type: str) -> dict[str, Any]:
    """A LibreTranslate request's fields, from a form or a JSON object."""
    if content_type.startswith("application/x-www-form-urlencoded") or (
        body and not content_type.startswith("application/json") and body[:1] != b"{"
    ):
        try:
            fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
        except UnicodeDecodeError:
            raise BadRequest(400, "the body is not UTF-8") from None
        return {key: values[0] if len(values) == 1 else values for key, values in fields.items()}
    data = parse_json(body) if body else {}
    if not isinstance(data, dict):
        raise BadRequest(400, "the body must be a JSON object")
    return data


async def fields_of(request, keys: list[str]) -> dict[str, Any]:
    """A request's fields, its key checked (403): the key may come in the body, so the
    body, bounded by limits.py, is read first."""
    body, kind = await request.body(), request.headers.get("content-type", "")
    fields = await off_loop(len(body), lambda: read_body(body, kind))
    if keys and not accepted(str(fields.get("api_key") or presented(request.scope)), keys):
        raise BadRequest(403, "Invalid API key")
    return fields


def texts_of(fields: dict[str, Any], serve_cfg: ServeConfig) -> tuple[list[str], bool]:
    """The texts to translate and whether `q` was a list; BadRequest naming what is wrong."""
    q = fields.get("q")
    if q is None or q == "" or q == []:
        raise BadRequest(400, "Invalid request: missing q parameter")
    listed = isinstance(q, list)
    texts = q if listed else [q]
    if not all(isinstance(t, str) for t in texts):
        raise BadRequest(400, "Invalid request: q must be a string or a list of strings")
    if len(texts) > serve_cfg.max_sentences:
        raise BadRequest(400, f"Invalid request: at most {serve_cfg.max_sentences} texts")
    if (longest := max(map(len, texts))) > (limit := serve_cfg.max_chars):
        message = f"Invalid request: a text of {longest} characters exceeds the limit of {limit}"
        raise BadRequest(400, message)
    for name in ("source", "target", "format", "api_key"):
        if not isinstance(fields.get(name, ""), str | None):
            raise BadRequest(400, f"Invalid request: {name} must be a string")
    if fields.get("source", "en") not in SOURCES:
        raise BadRequest(400, f"{fields.get('source')} is not supported: the source is en")
    if fields.get("target", "zh") not in TARGETS:
        raise BadRequest(400, f"{fields.get('target')} is not supported: the target is zh")
    if fields.get("format", "text") not in ("text", "html"):
        raise BadRequest(400, "Invalid request: format is text or html")
    return texts, listed


class Markup(HTMLParser):
    """HTML cut into markup (kept as written) and text nodes (to translate); the text of
    <script> and <style> is markup."""

    def __init__(self, source: str):
        super().__init__(convert_charrefs=True)
        self.parts: list[tuple[bool, str]] = []  # (is text, content)
        self._raw = 0
        self.feed(source)
        self.close()

    def handle_starttag(self, tag, attrs):
        self._raw += tag in ("script", "style")
        self.parts.append((False, self.get_starttag_text()))

    def handle_startendtag(self, tag, attrs):
        self.parts.append((False, self.get_starttag_text()))

    def handle_endtag(self, tag):
        self._raw -= tag in ("script", "style") and self._raw > 0
        self.parts.append((False, f"</{tag}>"))

    def handle_data(self, data):
        self.parts.append((not self._raw and bool(data.strip()), data))

    def handle_comment(self, data):
        self.parts.append((False, f"<!--{data}-->"))

    def handle_decl(self, decl):
        self.parts.append((False, f"<!{decl}>"))


async def translate_html(pages: list[str], translate) -> list[str]:
    """Each page with its text nodes translated in one call, markup kept; parsed in a worker
    thread, as CPython's HTML parser takes time quadratic in an unclosed tag (gh-135462),
    bounded by serve.max_chars a page."""
    parsed = await asyncio.to_thread(lambda: [Markup(page).parts for page in pages])
    nodes = [text.strip() for parts in parsed for is_text, text in parts if is_text]
    done = iter(await translate(nodes))
    out = []
    for parts in parsed:
        pieces = []
        for is_text, text in parts:
            if not is_text:  # markup, blank space, or the inside of <script>/<style>
                pieces.append(text)
                continue
            lead, trail = text[: len(text) - len(text.lstrip())], text[len(text.rstrip()) :]
            pieces.append(lead + html.escape(next(done), quote=False) + trail)
        out.append("".join(pieces))
    return out


def add_routes(app, batcher, serve_cfg: ServeConfig, settings, keys: list[str], model) -> None:
    """LibreTranslate's endpoints under /lt, decoding through `batcher` with `settings`."""
    from fastapi import Request

    from translator.deploy.schema import ErrorResponse, LibreTranslateResponse

    schema = model.model_json_schema()
    asked = {**schema, "properties": {n: schema["properties"][n] for n in ("q", "api_key")}}
    kinds = ("application/json", "application/x-www-form-urlencoded")
    refusals = {400: {"model": ErrorResponse}, 403: {"model": ErrorResponse}}

    def documented(body: dict) -> dict:
        content = {kind: {"schema": body} for kind in kinds}
        extra = {"requestBody": {"required": True, "content": content}}
        return {"openapi_extra": extra, "responses": refusals, "tags": ["LibreTranslate"]}

    async def translate(texts: list[str]) -> list[str]:
        if not texts:
            return []
        counted = await off_loop(sum(map(len, texts)), lambda: costs(texts, settings.split))
        check_sentences(counted, serve_cfg)
        return [h.text for h in best(await batcher.translate(texts, settings, counted))]

    @app.post("/lt/translate", response_model=LibreTranslateResponse, **documented(schema))
    async def lt_translate(request: Request):
        """LibreTranslate's /translate: q, source, target, format, api_key."""
        fields = await fields_of(request, keys)
        texts, listed = texts_of(fields, serve_cfg)
        if fields.get("format") == "html":
            done = await translate_html(texts, translate)
        else:
            done = await translate(texts)
        answer: dict[str, Any] = {"translatedText": done if listed else done[0]}
        if fields.get("source") == "auto":
            answer["detectedLanguage"] = {"confidence": 100.0, "language": "en"}
        return LibreTranslateResponse(**answer).model_dump(exclude_none=True)

    @app.get("/lt/languages", tags=["LibreTranslate"])
    async def lt_languages():
        return LANGUAGES

    @app.post("/lt/detect", **documented(asked))
    async def lt_detect(request: Request):
        """Every text is taken for English: it is the only source language."""
        texts_of(await fields_of(request, keys), serve_cfg)
        return [{"confidence": 100.0, "language": "en"}]
