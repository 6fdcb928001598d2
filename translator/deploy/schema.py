"""The server's request and response bodies as pydantic models: FastAPI publishes them in
`/openapi.json`, and a request is checked against them (strictly: no field of the wrong
type is converted, no unknown field is accepted) before anything else is done with it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class TranslateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    text: list[str] = Field(description="English texts; each may hold several sentences.")
    beam: int | None = Field(None, ge=1, description="Beam size (default: decode.beam).")
    split: bool | None = Field(
        None, description="Split each text into sentences (default: decode.split)."
    )
    nbest: int = Field(0, ge=0, description="1 or more: that many hypotheses, at most beam.")


class Hypothesis(BaseModel):
    text: str
    score: float = Field(description="log P / length penalty, as beam search ranked it.")


class TranslateResponse(BaseModel):
    translations: list[str]
    beam: int
    milliseconds: float
    hypotheses: list[list[Hypothesis]] | None = Field(
        None, description="With nbest ≥ 1: each text's hypotheses, best first."
    )


class ErrorResponse(BaseModel):
    error: str
