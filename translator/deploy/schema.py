"""The server's request and response bodies as pydantic models: FastAPI publishes them in
`/openapi.json`, and a request is checked against them strictly (no conversion, no unknown
field) before anything else is done with it; `request_models` adds a server's limits."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, create_model

from translator.config import ServeConfig, help_of

BEAM = help_of("beam") + " (default: decode.beam)"


class TranslateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    # the fields in their published order; request_models gives all but split their types
    # and limits (a description here would not reach /openapi.json)
    text: list[str]
    beam: int | None = None
    split: bool | None = Field(None, description=help_of("split") + " (default: decode.split)")
    nbest: int = 0
    glossary: dict[str, str] | None = None


class NBestEntry(BaseModel):
    text: str
    score: float = Field(description="log P / length penalty, as beam search ranked it.")
    lost: list[str] = Field(
        default_factory=list,
        description="Protected spans of the text (URLs, numbers, codes…) missing from this one.",
    )
    appended: list[str] = Field(
        default_factory=list,
        description="Protected spans the model did not write, put at the end of their "
        "sentence (decode.span_guard).",
    )
    missed: list[str] = Field(
        default_factory=list,
        description="The glossary's Chinese for terms of the text that this one does not hold.",
    )


class TranslateResponse(BaseModel):
    translations: list[str]
    lost: list[list[str]] = Field(
        default_factory=list,
        description="Each text's protected spans (URLs, numbers, codes…) missing from its "
        "translation.",
    )
    appended: list[list[str]] = Field(
        default_factory=list,
        description="Each text's protected spans the model did not write, put at the end of "
        "their sentence in its translation (decode.span_guard).",
    )
    missed: list[list[str]] = Field(
        default_factory=list,
        description="Each text's glossary terms (their Chinese) missing from its translation.",
    )
    beam: int
    milliseconds: float
    hypotheses: list[list[NBestEntry]] | None = Field(
        None, description="With nbest ≥ 1: each text's hypotheses, best first."
    )


class DocumentRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    text: str  # the fields in their published order; document_model gives their limits
    beam: int | None = None
    glossary: dict[str, str] | None = None


class LineNotes(BaseModel):
    line: int = Field(description="The line of the document, from 1.")
    lost: list[str] = Field(default_factory=list)
    appended: list[str] = Field(default_factory=list)
    missed: list[str] = Field(default_factory=list)


class DocumentResponse(BaseModel):
    translation: str = Field(description="The translated document, line for line.")
    lines: int = Field(description="Lines translated (blank lines are kept, not counted).")
    notes: list[LineNotes] = Field(
        default_factory=list,
        description="The lines with protected spans lost or put at the end, or glossary "
        "terms missed (as /translate's lost, appended and missed).",
    )
    beam: int
    milliseconds: float


class ModelInfo(BaseModel):
    """The model that answers, by name: never a path of the server's filesystem."""

    run: str = Field(description="The name of the run directory the checkpoint is in.")
    checkpoint: str = Field(description="The checkpoint's file name, e.g. average5.pt.")
    sha256: str = Field(
        description="The first 12 hex digits of the checkpoint's SHA-256 (empty for an "
        "export written before exports recorded it)."
    )
    engine: str = Field(description="The engine that decodes, as decode.engine names it.")
    precision: str
    decodes_from: str = Field(
        description="The name of what the engine decodes from: the checkpoint, or its "
        "CTranslate2 export (e.g. average5.ct2)."
    )


class Health(BaseModel):
    """GET /health: the server is up, and which model answers, by name (ModelInfo's fields)."""

    status: Literal["ok"]
    run: str
    checkpoint: str
    sha256: str
    engine: str
    precision: str
    decodes_from: str
    batching: bool = Field(description="Whether concurrent requests are decoded together.")
    glossary: int = Field(description="Entries of the server's own glossary.")
    decodes: int = Field(description="Decodes run since the server started.")


class ServerInfo(BaseModel):
    model: ModelInfo
    beam: int = Field(description="The default beam (decode.beam).")
    limits: dict[str, int] = Field(
        description="max_sentences, max_chars, max_beam, max_document_chars, "
        "max_glossary_entries, max_term_chars (serve.*)."
    )
    keys: bool = Field(description="Whether requests need an API key.")
    glossary: int = Field(description="Entries of the server's own glossary.")
    features: list[str] = Field(description="What requests may ask for: nbest, glossary, document.")


class ErrorResponse(BaseModel):
    error: str


class LibreTranslateResponse(BaseModel):
    translatedText: str | list[str]  # noqa: N815 - LibreTranslate's name
    detectedLanguage: dict[str, float | str] | None = None  # noqa: N815


def request_models(serve_cfg: ServeConfig) -> tuple[type[BaseModel], type[BaseModel]]:
    """Our request model and LibreTranslate's, with this server's limits in them."""
    text = Annotated[str, StringConstraints(max_length=serve_cfg.max_chars)]
    term = Annotated[str, StringConstraints(max_length=serve_cfg.max_term_chars)]
    ours = create_model(
        "TranslateRequest",
        __base__=TranslateRequest,
        text=(list[text], Field(min_length=1, max_length=serve_cfg.max_sentences)),
        beam=(int | None, Field(None, ge=1, le=serve_cfg.max_beam, description=BEAM)),
        nbest=(
            int,
            Field(
                0,
                ge=0,
                le=serve_cfg.max_beam,
                description="1 or more: that many hypotheses a text, at most the beam.",
            ),
        ),
        glossary=(dict[term, term] | None, Field(None, max_length=serve_cfg.max_glossary_entries)),
    )
    filled = Annotated[str, StringConstraints(min_length=1, max_length=serve_cfg.max_chars)]
    texts = Annotated[list[text], Field(min_length=1, max_length=serve_cfg.max_sentences)]
    theirs = create_model(
        "LibreTranslateRequest",
        q=(filled | texts, ...),
        source=(Literal["en", "auto"], "en"),
        target=(Literal["zh", "zh-Hans", "zh-CN"], "zh"),
        format=(Literal["text", "html"], "text"),
        api_key=(str | None, None),
    )
    return ours, theirs


def document_model(serve_cfg: ServeConfig) -> type[BaseModel]:
    """The request model of POST /document, with this server's limits in it."""
    term = Annotated[str, StringConstraints(max_length=serve_cfg.max_term_chars)]
    return create_model(
        "DocumentRequest",
        __base__=DocumentRequest,
        text=(Annotated[str, StringConstraints(max_length=serve_cfg.max_document_chars)], ...),
        beam=(int | None, Field(None, ge=1, le=serve_cfg.max_beam, description=BEAM)),
        glossary=(dict[term, term] | None, Field(None, max_length=serve_cfg.max_glossary_entries)),
    )


def upload_schema(*fields: str) -> dict:
    """A multipart form's schema: the file, and `fields` (strings) beside it."""
    described = {
        "format": "the format to read the file as, where its extension does not say",
        "beam": "the beam size (1 to serve.max_beam)",
        "glossary": "a JSON object of English terms and their Chinese",
        "retranslate": "true: PO and XLIFF entries translated already are translated again",
        "source": "en or auto",
        "target": "zh",
        "api_key": "the API key, where the server needs one",
    }
    properties = {"file": {"type": "string", "format": "binary", "description": "the file"}}
    properties |= {name: {"type": "string", "description": described[name]} for name in fields}
    return {"type": "object", "required": ["file"], "properties": properties}


FILE_ANSWER = {"description": "The file, translated, in its own format", "content": {"*/*": {}}}
