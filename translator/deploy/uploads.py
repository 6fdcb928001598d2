"""Documents over HTTP: a file sent to POST /document (multipart/form-data) or to
LibreTranslate's /lt/translate_file, read by its format and translated as `translate --input`
translates it (documents/), its units' sentences through the batcher's queue like any
request's. A file that cannot be read is a 400 naming why; the upload is never written to
disk, nor is its translation (kept in memory for /lt/download_file, a while and bounded).
The file limit (serve.max_document_kb) holds for multipart bodies of FILE_PATHS only.
"""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from pathlib import PurePath
from urllib.parse import quote

from translator.config import ServeConfig
from translator.data.glossary import key
from translator.data.splitting import join
from translator.deploy.batcher import Batcher
from translator.deploy.decoder import Settings, best
from translator.deploy.intake import document_units, off_loop
from translator.deploy.limits import BadRequest
from translator.documents import conversion, inline
from translator.documents.document import FORMATS, Document
from translator.errors import UserError
from translator.inference.hypothesis import Hypothesis

Translate = Callable[[inline.Request], Awaitable[list[str]]]
FILE_PATHS = ("/document", "/lt/translate_file")  # bodies up to serve.max_document_kb


async def lines_translated(
    batcher: Batcher, lines: list[str], settings: Settings, window: int, max_chars: int
) -> list[list[Hypothesis]]:
    """Each line's sentences' best hypotheses (none for a blank line); the sentences go
    through the queue `window` at a time, the first window admitted as a request is."""
    units, owners = await asyncio.to_thread(document_units, lines, max_chars)
    found: list[list[Hypothesis]] = [[] for _ in lines]
    for start in range(0, len(units), window):
        part = units[start : start + window]
        top = best(await batcher.translate(part, settings, admitted=start > 0))
        for line, hypothesis in zip(owners[start : start + window], top, strict=True):
            found[line].append(hypothesis)
    return found


def form_file(
    body: bytes, content_type: str, serve_cfg: ServeConfig
) -> tuple[str, bytes, dict[str, str]]:
    """The uploaded file of a multipart form (field `file`): its name, its bytes and the
    form's other fields; a 400 naming what is missing. Parsed by python-multipart from the
    body limits.py has read, in memory (nothing is spooled to disk)."""
    from python_multipart.multipart import create_form_parser

    limit = serve_cfg.max_document_kb * 1024
    fields: dict[str, str] = {}
    uploads = []
    config = {"MAX_MEMORY_FILE_SIZE": len(body) + 1, "MAX_BODY_SIZE": len(body) + 1}
    try:
        parser = create_form_parser(
            {"Content-Type": content_type.encode("latin-1")},
            lambda field: fields.__setitem__(
                (field.field_name or b"").decode("utf-8", "replace"),
                (field.value or b"").decode("utf-8", "replace"),
            ),
            uploads.append,
            config,
        )
        parser.write(body)
        parser.finalize()
    except Exception as exc:  # python-multipart's errors, as one line
        raise BadRequest(400, f"the form could not be read: {exc}") from None
    named = [u for u in uploads if u.field_name == b"file" and u.file_name]
    if len(named) != 1:
        raise BadRequest(400, "the form needs one file (a field named file, with its file name)")
    upload = named[0]
    upload.file_object.seek(0)
    data = upload.file_object.read()
    if len(data) > limit:
        raise BadRequest(
            413, f"the file is larger than serve.max_document_kb ({serve_cfg.max_document_kb:,} KB)"
        )
    name = PurePath(upload.file_name.decode("utf-8", "replace").replace("\\", "/")).name
    return name, data, fields


def format_of(filename: str, given: str = "") -> str:
    """The format a file is read as: `given`, else its extension; a 400 naming those there are."""
    name = (given or PurePath(filename).suffix.lstrip(".")).lower()
    if name not in FORMATS.names():
        raise BadRequest(
            400, f"no format reads {filename!r} (formats: {', '.join(FORMATS.names())})"
        )
    return name


def queued(batcher: Batcher, settings: Settings, serve_cfg: ServeConfig) -> Translate:
    """A document's translation calls (inline.py's Requests) through the batcher's queue
    with `settings`: a Request's terms under the request's own glossary."""

    own = {key(english)[0] for english, _ in settings.glossary}

    async def translate(request: inline.Request) -> list[str]:
        terms = [(e, c) for e, c in request.terms.items() if key(e)[0] not in own]
        asked = dataclasses.replace(settings, glossary=tuple(terms) + settings.glossary)
        found = await lines_translated(
            batcher, request.texts, asked, serve_cfg.max_sentences, serve_cfg.max_chars
        )
        return [join([h.text for h in hypotheses]) for hypotheses in found]

    return translate


async def translated(
    document: Document, translate: Translate, split: bool = True
) -> tuple[bytes, inline.Counts]:
    """`document` translated by `translate` (inline.py's steps, driven here), written in a
    worker thread; and what was counted."""
    counts = inline.Counts()
    walk = inline.steps(document.units, counts, split)
    request = next(walk)
    while True:
        try:
            request = walk.send(await translate(request))
        except StopIteration as end:
            return await asyncio.to_thread(conversion.written, document, end.value), counts


async def translated_file(
    data: bytes,
    name: str,
    translate: Translate,
    serve_cfg: ServeConfig,
    retranslate: bool = False,
    split: bool = True,
) -> tuple[bytes, inline.Counts]:
    """The file `data` (format `name`) translated, and what was counted; a file that cannot
    be read, or holds more than serve.max_document_chars to translate, is a 400."""
    limit = serve_cfg.max_document_chars
    try:
        document = await asyncio.to_thread(conversion.read, data, name, retranslate, limit)
    except UserError as exc:
        raise BadRequest(400, str(exc)) from None
    return await translated(document, translate, split)


def translated_name(filename: str, name: str) -> str:
    """A translation's file name: `report.docx` → `report.zh.docx` (`README`, read as
    format `name` md, → `README.zh.md`)."""
    path = PurePath(filename)
    return f"{path.stem}.zh{path.suffix or '.' + name}"


def attachment(filename: str) -> dict[str, str]:
    """The Content-Disposition of a download named `filename` (any characters, RFC 6266)."""
    filename = "".join(c if c.isprintable() else "_" for c in filename)  # no control character
    ascii_name = filename.encode("ascii", "replace").decode().replace('"', "'").replace("?", "_")
    return {
        "Content-Disposition": f'attachment; filename="{ascii_name}"; '
        f"filename*=UTF-8''{quote(filename)}"
    }


class Downloads:
    """Translated files kept in memory for LibreTranslate's /download_file: each under an
    unguessable name for `keep_s`, at most `max_bytes` in all (the oldest go first)."""

    def __init__(self, keep_s: float = 600.0, max_bytes: int = 256 * 2**20):
        self.keep_s, self.max_bytes = keep_s, max_bytes
        self._files: OrderedDict[str, tuple[float, bytes, str]] = OrderedDict()

    def add(self, filename: str, data: bytes, media_type: str) -> str:
        """Keep `data`; the name it is downloaded by."""
        self._prune(len(data))
        name = f"{secrets.token_hex(16)}.{filename}"
        self._files[name] = (time.monotonic() + self.keep_s, data, media_type)
        return name

    def get(self, name: str) -> tuple[bytes, str] | None:
        self._prune(0)
        kept = self._files.get(name)
        return None if kept is None else kept[1:]

    def _prune(self, coming: int) -> None:
        now, held = time.monotonic(), sum(len(d) for _, d, _ in self._files.values())
        while self._files and (
            next(iter(self._files.values()))[0] < now or held + coming > self.max_bytes
        ):
            held -= len(self._files.popitem(last=False)[1][1])


def form_settings(fields: dict[str, str], serve_cfg: ServeConfig, defaults: Settings, model):
    """A file form's beam and glossary (a JSON object), checked as POST /document's are."""
    from translator.deploy.intake import check_document
    from translator.deploy.limits import parse_json

    body: dict = {"text": "-"}
    if fields.get("beam"):
        if not fields["beam"].isdigit():
            raise BadRequest(422, f'"beam" must be an integer from 1 to {serve_cfg.max_beam}')
        body["beam"] = int(fields["beam"])
    if fields.get("glossary"):
        try:
            body["glossary"] = parse_json(fields["glossary"].encode("utf-8"))
        except BadRequest as exc:
            message = exc.message.replace("the body", "the glossary field")
            raise BadRequest(exc.status, message) from None
    return check_document(body, serve_cfg, defaults, model)[1]


async def file_answer(request, batcher: Batcher, serve_cfg: ServeConfig, defaults, model):
    """POST /document's answer to a file: its translation, as a download of its own format
    named `<name>.zh.<ext>`, with what was counted in X-Translator-* headers."""
    from fastapi import Response

    body, kind = await request.body(), request.headers.get("content-type", "")
    filename, data, fields = await off_loop(len(body), lambda: form_file(body, kind, serve_cfg))
    name = format_of(filename, fields.get("format", ""))
    settings = form_settings(fields, serve_cfg, defaults, model)
    again = fields.get("retranslate", "").lower() in ("1", "true", "on", "yes")
    translate = queued(batcher, settings, serve_cfg)
    out, counts = await translated_file(data, name, translate, serve_cfg, again, settings.split)
    headers = attachment(translated_name(filename, name)) | {
        "X-Translator-Units": str(counts.units),
        "X-Translator-Spans": str(counts.spans),
        "X-Translator-Spans-Unplaced": str(counts.spans_unplaced),
        "X-Translator-Kept-Moved": str(counts.kept_moved),
    }
    return Response(out, media_type=conversion.media_type(name), headers=headers)
