"""The adapter contract every engine implements, the answer it returns, and its errors.

Error tree (adapters translate their client's exceptions into these, once, with `from exc`);
each carries the provider, the engine URL without credentials and the HTTP status when there
is one, so callers match on fields, never on message text:

    EngineError              any failure of one attempt
    ├── ProviderError        transport failure, an engine error status, a request the engine
    │                        cannot take (too many options): the attempt's outcome is `error`
    │   └── Overloaded       the provider's lane queue is full; carries a retry hint
    ├── ProviderTimeout      the engine did not answer in time: outcome `timeout`
    └── MalformedResponse    a reply the adapter cannot read: outcome `malformed`

An adapter answers each question with an `EngineAnswer`; the gateway checks it against the
question with `check_answer` (not the adapter), so a wrong answer is `malformed` whatever the
engine.
"""

from __future__ import annotations

import abc
import asyncio
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import httpx
from pydantic import BaseModel, ConfigDict, Field

from .hosts import stays_local


class EngineError(Exception):
    """Base of the errors one attempt can end with."""

    def __init__(self, message: str, *, provider: str | None = None, url: str | None = None,
                 status: int | None = None) -> None:
        super().__init__(message)
        self.provider = provider
        self.url = url  # without credentials
        self.status = status


class ProviderError(EngineError):
    pass


class Overloaded(ProviderError):
    def __init__(self, message: str, retry_after_s: int, *, provider: str | None = None) -> None:
        super().__init__(message, provider=provider)
        self.retry_after_s = retry_after_s


class ProviderTimeout(EngineError):
    pass


class MalformedResponse(EngineError):
    pass


@dataclass(frozen=True)
class Query:
    """One question as the adapters see it: `choices` are never empty (yes/no filled in). The
    text it is asked about (the state) travels beside it, once for all questions of a pass."""

    question: str
    choices: list[str]
    yes_no: bool = False
    #: The decision kind the request named (see `core.heads`), if any.
    kind: str | None = None
    #: Ask for the judged text's embedding in the same pass (engines that can give it).
    embed: bool = False
    #: A score: `choices` are the levels, lowest first, and the answer is a level with the
    #: probability of each (the expected level is Σ index × probability). Engines that speak
    #: Jev's `score` are asked one; others read it as a choice over the levels.
    score: bool = field(default=False, kw_only=True)
    #: This question's own threshold, over the call's (None: the call's).
    min_confidence: float | None = field(default=None, kw_only=True)


@dataclass(frozen=True)
class EngineAnswer:
    """One engine's answer to one question. Fields are as the engine gave them until
    `check_answer` has passed them."""

    decision: Any = None
    confidence: Any = None
    probabilities: Any = None
    rationale: str | None = None
    model: str = ""
    abstain: bool = False
    #: The judged text's embedding, from engines asked for it in the same pass (`Query.embed`).
    embedding: list[float] | None = None
    #: A yes/no answer that is only how related the text is to the question (a bi-encoder's,
    #: serve.py's MiniLM says so), alike for a question and its opposite: it decides only through
    #: a learned head or a calibration fit made for that very question.
    relevance: bool = False

    @classmethod
    def abstained(cls, rationale: str, model: str = "") -> EngineAnswer:
        return cls(rationale=rationale, model=model, abstain=True)

    @classmethod
    def from_mapping(cls, raw: Any) -> EngineAnswer:
        """An answer given as a JSON object (`decision`, `confidence`, ... or `abstain`)."""
        if not isinstance(raw, Mapping):
            raise MalformedResponse(f"answer is not an object but {type(raw).__name__}")
        rationale = raw.get("rationale")
        return cls(raw.get("decision"), raw.get("confidence"), raw.get("probabilities"),
                   None if rationale is None else str(rationale), str(raw.get("model") or ""),
                   raw.get("abstain") is True)


def _unit_number(value: Any) -> bool:
    return (
        not isinstance(value, bool)
        and isinstance(value, (int, float))
        and math.isfinite(value)
        and 0.0 <= value <= 1.0
    )


def check_answer(answer: Any, query: Query, default_model: str) -> EngineAnswer:
    """The answer with its numbers as floats and its model named; `MalformedResponse` when it
    is not an answer to `query`."""
    if not isinstance(answer, EngineAnswer):
        raise MalformedResponse(f"answer is not an EngineAnswer but {type(answer).__name__}")
    model = answer.model or default_model
    if answer.abstain:
        return replace(answer, decision=None, confidence=None, probabilities=None, model=model)
    decision, confidence, probabilities = answer.decision, answer.confidence, answer.probabilities
    if not isinstance(decision, str) or decision not in query.choices:
        raise MalformedResponse(f"decision {decision!r:.80} is not one of the options")
    if not _unit_number(confidence):
        raise MalformedResponse(f"confidence {confidence!r:.40} is not a number in [0, 1]")
    if probabilities is not None:
        if not isinstance(probabilities, Mapping) or not all(
            option in query.choices and _unit_number(p) for option, p in probabilities.items()
        ):
            raise MalformedResponse("probabilities must map options to numbers in [0, 1]")
        probabilities = {option: float(p) for option, p in probabilities.items()}
    return replace(answer, confidence=float(confidence), probabilities=probabilities, model=model)


@dataclass(frozen=True)
class HealthProbe:
    ok: bool
    detail: str


@dataclass(frozen=True)
class Capabilities:
    max_options: int | None
    multi_question: bool = False
    batch: bool = False
    probabilities: bool = True
    model: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "max_options": self.max_options,
            "multi_question": self.multi_question,
            "batch": self.batch,
            "probabilities": self.probabilities,
            "model": self.model,
            **self.extra,
        }


#: Config keys that would hold a secret: refused in any file, since keys come from the environment.
SECRET_KEYS = frozenset({"api_key", "apikey", "key", "token", "secret", "password"})


class ProviderOptions(BaseModel):
    """Settings of one provider, from `[providers.<name>]` or `SYSTEM1_<NAME>_<KEY>`.

    The lane keys apply to every provider: engine passes in flight at once, requests that may
    wait, and how many queued requests one batch pass may carry; and the circuit breaker's:
    consecutive timeouts or errors that open it (0: never) and how long it stays open.
    """

    model_config = ConfigDict(extra="forbid")

    slots: int = Field(default=1, ge=1, le=64)
    max_queue: int = Field(default=64, ge=0, le=10_000)
    max_batch: int = Field(default=32, ge=1, le=64)
    breaker_failures: int = Field(default=3, ge=0, le=1000)
    breaker_cooldown_s: float = Field(default=30.0, gt=0.0, le=3600.0)
    #: Whether the engine may answer a yes/no question that comes with no text to judge. A chat
    #: model answers from what it knows; an engine that compares the question with a text would
    #: compare it with itself and say "yes" for certain, so the core abstains for it instead.
    answers_without_context: bool = False


class Provider(abc.ABC):
    """One engine. Subclasses set `name` and `Options` and implement `decide_many` (or, for
    engines that take one question per call, derive from `OneQuestionProvider`), `health` and
    `capabilities`."""

    name: ClassVar[str]
    Options: ClassVar[type[ProviderOptions]] = ProviderOptions
    #: Environment variables holding this provider's secrets (never config keys).
    secret_env: ClassVar[tuple[str, ...]] = ()

    def __init__(self, options: ProviderOptions, client: httpx.AsyncClient | None = None) -> None:
        self.options = options
        self._client = client

    @property
    def local(self) -> bool:
        """Whether what this provider is asked stays on this machine (see `hosts.stays_local`);
        an engine without an endpoint runs in process."""
        endpoint = getattr(self.options, "endpoint", None)
        return endpoint is None or stays_local(endpoint)

    @property
    def model_id(self) -> str:
        """The model or checkpoint the engine answers with, as calibration fits name it."""
        return str(getattr(self.options, "model", "") or self.name)

    @abc.abstractmethod
    async def decide_many(self, state: Any, queries: list[Query], timeout_s: float) -> list[EngineAnswer]:
        """Answer every question about one text (`state`, None for none); pass `timeout_s` to
        every I/O call."""

    async def decide(self, state: Any, query: Query, timeout_s: float) -> EngineAnswer:
        """One question about `state`."""
        return (await self.decide_many(state, [query], timeout_s))[0]

    async def decide_batch(
        self, states: list[Any], queries: list[Query], timeout_s: float
    ) -> list[list[EngineAnswer]]:
        """The same questions about several texts, in one pass where `capabilities().batch`."""
        raise ProviderError(f"{self.name} has no batch endpoint", provider=self.name)

    async def embed(self, state: Any, query: Query, timeout_s: float, model: str | None = None) -> tuple[str, list[float]]:
        """The model id and the embedding of the text this engine judges for `query` about
        `state`, by embedding model `model` (None: the engine's own), for learned heads; engines
        without embeddings raise `ProviderError`."""
        raise ProviderError(f"{self.name} has no embeddings", provider=self.name)

    @abc.abstractmethod
    async def health(self, timeout_s: float) -> HealthProbe:
        """Probe the engine; never raise."""

    @abc.abstractmethod
    def capabilities(self) -> Capabilities:
        """Non-secret facts about the engine, including `max_options`."""

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()


class OneQuestionProvider(Provider):
    """An engine that answers one question per call: several questions become several calls
    within the one deadline."""

    @abc.abstractmethod
    async def decide_one(self, state: Any, query: Query, timeout_s: float) -> EngineAnswer:
        """Answer one question about `state`."""

    async def decide_many(self, state: Any, queries: list[Query], timeout_s: float) -> list[EngineAnswer]:
        answers: list[EngineAnswer] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        for query in queries:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise ProviderTimeout(f"{len(answers)} of {len(queries)} questions answered in time",
                                      provider=self.name)
            answers.append(await self.decide_one(state, query, remaining))
        return answers


def check_option_limit(query: Query, limit: int | None, provider: str) -> None:
    if limit is not None and len(query.choices) > limit:
        raise ProviderError(
            f"{provider} takes at most {limit} options; this question has {len(query.choices)}",
            provider=provider,
        )


def plain_text(state: Any) -> str:
    """A context as text: an object as `key: value` lines, other JSON as JSON, none as "" (what
    learned heads' wording features and the llama judge's reading read)."""
    if state is None:
        return ""
    if isinstance(state, str):
        return state
    if isinstance(state, dict):
        return "\n".join(f"{k}: {v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}"
                         for k, v in state.items())
    return json.dumps(state, ensure_ascii=False)


def context_text(state: Any) -> str | None:
    """The judged text as a chat model reads it, or None when there is none."""
    if state in (None, {}, ""):
        return None
    return state if isinstance(state, str) else json.dumps(state, ensure_ascii=False)


def head_and_tail(text: str, limit: int) -> str:
    """At most about `limit` characters of `text`: its start and its end, which say the most."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n…\n{text[-half:]}"


def shortened(state: Any, limit: int) -> Any:
    """`state` with its strings cut (start and end kept) so that together they hold about
    `limit` characters, each in proportion to its length; its shape is kept."""
    lengths: list[int] = []

    def measure(value: Any) -> None:
        if isinstance(value, str):
            lengths.append(len(value))
        elif isinstance(value, dict):
            for item in value.values():
                measure(item)
        elif isinstance(value, list):
            for item in value:
                measure(item)

    measure(state)
    total = sum(lengths)
    if total <= limit:
        return state

    def cut(value: Any) -> Any:
        if isinstance(value, str):
            return head_and_tail(value, max(1, limit * len(value) // total))
        if isinstance(value, dict):
            return {key: cut(item) for key, item in value.items()}
        if isinstance(value, list):
            return [cut(item) for item in value]
        return value

    return cut(state)


#: Context fields that name what is judged rather than hold it: a tool call's `tool` says which
#: tool, nothing of what the call would do.
NAMING_FIELDS = frozenset({"tool"})


def has_evidence(state: Any) -> bool:
    """Whether `state` holds anything to judge: a string that is not blank, or any other value,
    at any depth, outside the naming fields (`{"command": ""}` and `{"tool": "Bash", "command":
    ""}` hold nothing)."""
    if isinstance(state, str):
        return bool(state.strip())
    if isinstance(state, dict):
        return any(has_evidence(value) for key, value in state.items() if key not in NAMING_FIELDS)
    if isinstance(state, list):
        return any(has_evidence(value) for value in state)
    return state is not None


def shares_rationale(label: str, probabilities: dict[str, float], top: int = 5) -> str:
    """`label: a=0.52, b=0.48`, best first; the shape every probability-reporting adapter uses."""
    ranked = sorted(probabilities.items(), key=lambda item: item[1], reverse=True)[:top]
    shown = ", ".join(f"{option}={p:.2f}" for option, p in ranked)
    more = "" if len(probabilities) <= top else f", … ({len(probabilities) - top} more)"
    return f"{label}: {shown}{more}"
