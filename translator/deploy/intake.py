"""What a request asks of the decoder, read and checked before any of it is done: its
texts, its settings, and what each text costs (the sentences the decoder will translate,
as the limits count them). Every check is linear in the request's size; nothing here
imports PyTorch: it runs in the HTTP process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from translator.config import ServeConfig, nbest_within_beam
from translator.data.glossary import Glossary
from translator.data.normalization import normalize_en
from translator.data.splitting import sentences
from translator.deploy.decoder import Settings
from translator.deploy.limits import BadRequest
from translator.errors import UserError

T = TypeVar("T")


OFF_LOOP_BYTES = 16 * 1024  # a body at least this large is parsed and checked in a thread


async def off_loop(size: int, work: Callable[[], T]) -> T:
    """`work()`, in a worker thread where the body is large: the event loop goes on meanwhile."""
    return await asyncio.to_thread(work) if size >= OFF_LOOP_BYTES else work()


def costs(texts: list[str], split: bool) -> list[int]:
    """The sentences the decoder translates for each text (none for a blank one)."""
    if not split:
        return [1 if text.strip() else 0 for text in texts]
    return [len(sentences(normalize_en(text))) for text in texts]


def check_sentences(costs: list[int], serve_cfg: ServeConfig) -> None:
    """413 when the texts hold more sentences than serve.max_sentences."""
    if (total := sum(costs)) > serve_cfg.max_sentences:
        raise BadRequest(
            413,
            f"too many sentences: the texts hold {total:,} after splitting > "
            f"{serve_cfg.max_sentences:,} (serve.max_sentences)",
        )


def check_request(
    body: Any, serve_cfg: ServeConfig, defaults: Settings, model=None
) -> tuple[list[str], Settings, list[int]]:
    """The texts, settings and costs of a parsed POST /translate body, else a BadRequest."""
    from pydantic import ValidationError

    from translator.deploy.schema import request_models

    if not isinstance(body, dict):
        raise BadRequest(422, 'the body must be a JSON object like {"text": ["Hello."]}')
    text = body.get("text")
    if isinstance(text, list):
        if len(text) > serve_cfg.max_sentences:
            raise BadRequest(
                413,
                f"too many texts: {len(text)} > {serve_cfg.max_sentences} (serve.max_sentences)",
            )
        longest = max((len(s) for s in text if isinstance(s, str)), default=0)
        if longest > serve_cfg.max_chars:
            raise BadRequest(
                413, f"a text has {longest} characters > {serve_cfg.max_chars} (serve.max_chars)"
            )
    check_glossary_size(body.get("glossary"), serve_cfg)
    try:
        request = (model or request_models(serve_cfg)[0]).model_validate(body)
    except ValidationError as exc:
        raise BadRequest(422, explained(exc.errors(), serve_cfg)) from None
    split = defaults.split if request.split is None else request.split
    settings = _settings(request, defaults, split, request.nbest)
    counted = costs(request.text, split)
    check_sentences(counted, serve_cfg)
    return request.text, settings, counted


def check_document(
    body: Any, serve_cfg: ServeConfig, defaults: Settings, model
) -> tuple[str, Settings]:
    """The text and settings of a parsed POST /document body (`model`: document_model's);
    its units are sentences already (document_units): the decoder does not split them."""
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
        raise BadRequest(422, explained(exc.errors(), serve_cfg, "a string")) from None
    return request.text, _settings(request, defaults, split=False, nbest=0)


# The sentence splitter takes time quadratic in a run of unbalanced quotes: a line longer
# than this is split a stretch at a time (cut at a space), so no stretch costs it much.
SPLIT_CHARS = 10_000


def document_units(lines: list[str], max_chars: int) -> tuple[list[str], list[int]]:
    """The sentences of each line (normalised and split as the decoder would), each longer
    than `max_chars` cut at a space (`_cut`), and the index of the line each unit is of."""
    units: list[str] = []
    owners: list[int] = []
    for i, line in enumerate(lines):
        for stretch in _cut(normalize_en(line), SPLIT_CHARS):
            for sentence in sentences(stretch):
                parts = _cut(sentence, max_chars)
                units += parts
                owners += [i] * len(parts)
    return units, owners


def _cut(text: str, size: int) -> list[str]:
    """`text` in parts of at most `size` characters, each ending before a space where one
    is in its second half."""
    parts, start = [], 0
    while len(text) - start > size:
        space = text.rfind(" ", start + size // 2, start + size + 1)
        stop = space if space > start else start + size
        parts.append(text[start:stop].strip())
        start = stop
    parts.append(text[start:].strip())
    return [part for part in parts if part]


def _settings(request, defaults: Settings, split: bool, nbest: int) -> Settings:
    """A validated request's decoding settings, its glossary checked as a file is (400)."""
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
    """413 for a request glossary over serve.max_glossary_entries or serve.max_glossary_kb."""
    if not isinstance(glossary, dict):
        return
    if len(glossary) > serve_cfg.max_glossary_entries:
        raise BadRequest(
            413,
            f"too many glossary entries: {len(glossary)} > {serve_cfg.max_glossary_entries} "
            "(serve.max_glossary_entries)",
        )
    size = sum(len(str(k).encode()) + len(str(v).encode()) for k, v in glossary.items())
    if size > serve_cfg.max_glossary_kb * 1024:
        raise BadRequest(
            413,
            f"the glossary has {size:,} bytes > {serve_cfg.max_glossary_kb} KB "
            "(serve.max_glossary_kb)",
        )


def explained(errors: list[dict], serve_cfg: ServeConfig, text: str = "a list of strings") -> str:
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
        f"each at most {serve_cfg.max_term_chars} characters (serve.max_term_chars)",
    }.get(field, f"{field or 'the body'}: {errors[0]['msg']}")
