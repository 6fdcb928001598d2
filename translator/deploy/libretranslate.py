"""LibreTranslate's HTTP API, mounted at /lt: the open convention that browser extensions,
chat bots, CAT tools and the `libretranslatepy` client speak (docs/deploy.md). Errors are
LibreTranslate's `{"error": ...}`: 400 for a bad request, 403 for a missing or wrong key.
"""

import asyncio
from typing import Any  # no `from __future__ import annotations`: FastAPI reads the routes' types
from urllib.parse import parse_qs, quote

from translator.config import ServeConfig
from translator.deploy.access import accepted, presented
from translator.deploy.decoder import best
from translator.deploy.intake import check_sentences, costs, off_loop
from translator.deploy.limits import BadRequest, parse_json
from translator.deploy.uploads import (
    Downloads,
    Translate,
    attachment,
    form_file,
    format_of,
    queued,
    translated,
    translated_file,
    translated_name,
)
from translator.documents import conversion
from translator.documents.conversion import media_type
from translator.documents.document import FORMATS
from translator.errors import UserError

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
    check_languages(fields)
    if fields.get("format", "text") not in ("text", "html"):
        raise BadRequest(400, "Invalid request: format is text or html")
    return texts, listed


def check_languages(fields: dict[str, Any]) -> None:
    """A 400 for a source other than English or a target other than Chinese."""
    if fields.get("source", "en") not in SOURCES:
        raise BadRequest(400, f"{fields.get('source')} is not supported: the source is en")
    if fields.get("target", "zh") not in TARGETS:
        raise BadRequest(400, f"{fields.get('target')} is not supported: the target is zh")


async def translate_html(pages: list[str], translate: Translate) -> list[str]:
    """Each page translated as an .html file is (documents/formats/html.py): the words of
    each block with their inline markup around them, every tag and attribute as written."""
    out = []
    for page in pages:
        try:
            document = await asyncio.to_thread(conversion.read, page.encode("utf-8"), "html")
        except UserError as exc:
            raise BadRequest(400, f"Invalid request: {exc}") from None
        data, _ = await translated(document, translate)
        out.append(data.decode("utf-8"))
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
            done = await translate_html(texts, queued(batcher, settings, serve_cfg))
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

    add_file_routes(app, batcher, serve_cfg, settings, keys)


def add_file_routes(app, batcher, serve_cfg: ServeConfig, settings, keys: list[str]) -> None:
    """LibreTranslate's files: /lt/translate_file, /lt/download_file and the settings its
    own page reads (/lt/frontend/settings)."""
    from fastapi import Request

    from translator.deploy.schema import FILE_ANSWER, ErrorResponse, upload_schema

    refusals = {status: {"model": ErrorResponse} for status in (400, 403, 413, 503)}
    downloads = Downloads()

    upload = {"multipart/form-data": {"schema": upload_schema("source", "target", "api_key")}}

    @app.post(
        "/lt/translate_file",
        responses=refusals,
        openapi_extra={"requestBody": {"required": True, "content": upload}},
        tags=["LibreTranslate"],
    )
    async def lt_translate_file(request: Request):
        """LibreTranslate's /translate_file: a multipart form with file, source, target and
        api_key; answers {"translatedFileUrl": …}, where the translation can be downloaded
        for ten minutes."""
        body, kind = await request.body(), request.headers.get("content-type", "")
        if not kind.startswith("multipart/form-data"):
            raise BadRequest(400, "Invalid request: send the file as multipart/form-data")
        filename, data, fields = await off_loop(len(body), lambda: form_file(body, kind, serve_cfg))
        if keys and not accepted(str(fields.get("api_key") or presented(request.scope)), keys):
            raise BadRequest(403, "Invalid API key")
        check_languages(fields)
        name = format_of(filename)
        translate = queued(batcher, settings, serve_cfg)
        out, _ = await translated_file(data, name, translate, serve_cfg)
        kept = downloads.add(translated_name(filename, name), out, media_type(name))
        base = str(request.base_url).rstrip("/")
        return {"translatedFileUrl": f"{base}/lt/download_file/{quote(kept)}"}

    @app.get(
        "/lt/download_file/{name}",
        responses={200: FILE_ANSWER, 404: {"model": ErrorResponse}},
        tags=["LibreTranslate"],
    )
    async def lt_download_file(name: str):
        """A file /lt/translate_file translated, for ten minutes after."""
        from fastapi import Response

        kept = downloads.get(name)
        if kept is None:
            raise BadRequest(404, "no such file (a translation is kept for ten minutes)")
        data, kind = kept
        return Response(data, media_type=kind, headers=attachment(name.split(".", 1)[1]))

    @app.get("/lt/frontend/settings", tags=["LibreTranslate"])
    async def lt_settings():
        """What LibreTranslate's own page asks of a server before it shows itself."""
        return {
            "charLimit": serve_cfg.max_chars,
            "frontendTimeout": 500,
            "apiKeys": bool(keys),
            "keyRequired": bool(keys),
            "suggestions": False,
            "filesTranslation": True,
            "supportedFilesFormat": [f".{name}" for name in FORMATS.names()],
            "language": {
                "source": {"code": "en", "name": "English"},
                "target": {"code": "zh", "name": "Chinese"},
            },
        }
