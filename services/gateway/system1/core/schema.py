"""Schema v1: the request and response of `system1_decide`, and the published JSON Schemas.

New optional fields may be added without a version bump; anything that breaks an existing
client bumps `SCHEMA_VERSION`. The JSON Schemas under `schemas/` are generated from these
models (`python -m system1.core.schema --write`) and a test keeps the committed copies current.
"""

from __future__ import annotations

import enum
import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

SCHEMA_VERSION = "1"
SCHEMA_VERSIONS = (SCHEMA_VERSION,)
YES_NO = ("yes", "no")

MAX_QUESTION_CHARS = 8_000
MIN_OPTIONS = 2
MAX_OPTIONS = 256
MAX_OPTION_CHARS = 500
MAX_REQUEST_ID_CHARS = 128
MAX_JSON_DEPTH = 32

SCHEMA_DIR = Path(__file__).with_name("schemas")
MAX_KIND_CHARS = 100
KIND_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._/-]*$"


class ErrorCode(str, enum.Enum):
    INVALID_REQUEST = "invalid_request"
    CONFIG_ERROR = "config_error"
    PROVIDER_TIMEOUT = "provider_timeout"
    PROVIDER_ERROR = "provider_error"
    MALFORMED_RESPONSE = "malformed_response"


Status = Literal["decided", "abstained", "error"]
AttemptOutcome = Literal["ok", "abstained", "timeout", "error", "malformed"]


# White space by either Python's or JSON Schema's (ECMAScript's) reckoning, so the validator and
# the published pattern agree on what "blank" means.
BLANK = "\\t\\n\\v\\f\\r \\x1c-\\x1f\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
TEXT = f"[^{BLANK}]"  # at least one character that is not white space
_TEXT = re.compile(TEXT)


def has_text(value: str) -> bool:
    return _TEXT.search(value) is not None


def _publish_every_rule(schema: dict[str, Any]) -> None:
    """The published schema says all the validators check, so clients and fuzzers read the
    same contract: non-blank text, and unique, non-blank options of at most 500 characters."""
    properties = schema["properties"]
    properties["question"]["pattern"] = TEXT
    array = next(branch for branch in properties["options"]["anyOf"] if branch.get("type") == "array")
    array["uniqueItems"] = True
    array["items"] = {"type": "string", "minLength": 1, "maxLength": MAX_OPTION_CHARS, "pattern": TEXT}


class DecideRequest(BaseModel):
    """One multiple-choice question; without `options` it is answered yes or no."""

    model_config = ConfigDict(extra="forbid", strict=True, title="system1_decide request",
                              json_schema_extra=_publish_every_rule)

    question: str = Field(
        min_length=1, max_length=MAX_QUESTION_CHARS, description="The decision to make."
    )
    options: list[str] | None = Field(
        default=None,
        min_length=MIN_OPTIONS,
        max_length=MAX_OPTIONS,
        description="2 to 256 unique non-empty strings of at most 500 characters; "
        "the decision is exactly one of them. Absent: the question is answered yes or no.",
    )
    context: dict[str, Any] | None = Field(default=None, description="Passed to the provider.")
    kind: str | None = Field(
        default=None, min_length=1, max_length=MAX_KIND_CHARS, pattern=KIND_PATTERN,
        description="Names a recurring decision (letters, digits, '.', '_', '-', '/'), so a head learned from "
        "labelled examples of that kind can answer it. Absent: the kind is the option set, or the question "
        "for a yes/no question.",
    )
    min_confidence: float | None = Field(
        default=None, ge=0.0, le=1.0, description="Overrides the configured threshold."
    )
    request_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_REQUEST_ID_CHARS,
        description="Echoed back; generated when omitted.",
    )
    schema_version: Literal["1"] = SCHEMA_VERSION

    @field_validator("question")
    @classmethod
    def _question_has_text(cls, value: str) -> str:
        if not has_text(value):
            raise ValueError("must contain non-whitespace text")
        return value

    @field_validator("options")
    @classmethod
    def _options_are_usable(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        seen: set[str] = set()
        for index, option in enumerate(value):
            if not has_text(option):
                raise ValueError(f"option {index} is empty")
            if len(option) > MAX_OPTION_CHARS:
                raise ValueError(
                    f"option {index} has {len(option)} characters; at most {MAX_OPTION_CHARS} allowed"
                )
            if option in seen:
                raise ValueError(f"option {index} ({option!r}) is a duplicate; options must be unique")
            seen.add(option)
        return value

    @property
    def choices(self) -> list[str]:
        """The options the decision must come from (yes/no when none were given)."""
        return list(self.options) if self.options else list(YES_NO)


class Attempt(BaseModel):
    provider: str
    outcome: AttemptOutcome
    latency_ms: int
    detail: str | None = None


class ErrorInfo(BaseModel):
    code: ErrorCode
    message: str


class DecideResponse(BaseModel):
    model_config = ConfigDict(title="system1_decide response")

    schema_version: Literal["1"] = SCHEMA_VERSION
    request_id: str
    status: Status
    decision: str | None = None
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    rationale: str | None = None
    provider: str | None = None
    probabilities: dict[str, float] | None = None
    calibrated: bool = False
    latency_ms: int = 0
    attempts: list[Attempt] = Field(default_factory=list)
    error: ErrorInfo | None = None


class RequestError(ValueError):
    """A request that failed validation; `message` names the field and the limit."""

    def __init__(self, message: str, request_id: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.request_id = request_id


def new_request_id() -> str:
    """32 random hex digits (as a uuid4's hex, without uuid's object on the hot path)."""
    return os.urandom(16).hex()


def describe(error: dict[str, Any]) -> str:
    """One pydantic error as `field: what is wrong`."""
    field = ".".join(str(part) for part in error["loc"]) or "request"
    kind = error["type"]
    if kind == "extra_forbidden":
        return f"{field}: unknown field (schema v{SCHEMA_VERSION} does not accept it)"
    if kind == "missing":
        return f"{field}: required"
    message = error["msg"].removeprefix("Value error, ")
    return f"{field}: {message}"


def _surrogate(text: str) -> str | None:
    for ch in text:
        if "\ud800" <= ch <= "\udfff":
            return f"U+{ord(ch):04X}"
    return None


def check_json_value(value: Any, field: str = "request", depth: int = 0) -> None:
    """Refuse what parsed as JSON but cannot be answered or written back: lone surrogates (not
    Unicode text), NaN and infinities, and nesting deeper than `MAX_JSON_DEPTH`. The message
    names the field and never repeats the offending text."""
    if depth > MAX_JSON_DEPTH:
        raise RequestError(f"{field}: nested deeper than {MAX_JSON_DEPTH} levels")
    if isinstance(value, str):
        bad = _surrogate(value)
        if bad:
            raise RequestError(f"{field}: contains a lone surrogate ({bad}); text must be valid Unicode")
    elif isinstance(value, float) and not math.isfinite(value):
        raise RequestError(f"{field}: {value} is not a JSON number")
    elif isinstance(value, dict):
        for key, item in value.items():
            name = f"{field}.{key}" if isinstance(key, str) and not _surrogate(key) else f"{field}.<key>"
            check_json_value(key, name, depth + 1)
            check_json_value(item, name, depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_json_value(item, f"{field}.{index}", depth + 1)


def parse_request(payload: Any) -> DecideRequest:
    """Validate a raw request; raise `RequestError` naming every bad field."""
    if not isinstance(payload, dict):
        raise RequestError(f"request: must be a JSON object, not {type(payload).__name__}")
    raw_id = payload.get("request_id")
    echo_id = raw_id if isinstance(raw_id, str) and 0 < len(raw_id) <= MAX_REQUEST_ID_CHARS else None
    try:
        check_json_value(payload)
    except RequestError as exc:
        raise RequestError(exc.message.removeprefix("request."),
                           request_id=echo_id if echo_id and not _surrogate(echo_id) else None) from None
    try:
        return DecideRequest.model_validate(payload)
    except ValidationError as exc:
        problems = "; ".join(describe(e) for e in exc.errors(include_url=False))
        raise RequestError(problems, request_id=echo_id) from exc


def error_response(
    code: ErrorCode,
    message: str,
    request_id: str | None = None,
    attempts: list[Attempt] | None = None,
    latency_ms: int = 0,
) -> DecideResponse:
    return DecideResponse(
        request_id=request_id or new_request_id(),
        status="error",
        error=ErrorInfo(code=code, message=message),
        attempts=attempts or [],
        latency_ms=latency_ms,
    )


def json_schemas() -> dict[str, dict[str, Any]]:
    """The published JSON Schemas, keyed by file name."""
    return {
        "request.json": DecideRequest.model_json_schema(),
        "response.json": DecideResponse.model_json_schema(mode="serialization"),
    }


def render_schema(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def write_schemas(directory: Path = SCHEMA_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, schema in json_schemas().items():
        path = directory / name
        path.write_text(render_schema(schema), encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m system1.core.schema --write")
    for path in write_schemas():
        print(path)
