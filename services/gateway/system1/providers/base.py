"""The adapter contract every engine implements, and the errors adapters raise.

Error tree (adapters translate their client's exceptions into these, once, with `from exc`):

    EngineError              any failure of one attempt
    ├── ProviderError        transport failure, an engine error status, a request the engine
    │                        cannot take (too many options): the attempt's outcome is `error`
    │   └── Overloaded       the provider's lane queue is full; carries a retry hint
    ├── ProviderTimeout      the engine did not answer in time: outcome `timeout`
    └── MalformedResponse    a reply the adapter cannot read: outcome `malformed`

An adapter answers with a plain mapping, checked by the gateway (not by the adapter):

    {"decision": str, "confidence": float, "probabilities": {option: p} | None,
     "rationale": str, "model": str}
    or {"abstain": True, "rationale": str}
"""

from __future__ import annotations

import abc
import asyncio
from dataclasses import dataclass, field
from typing import Any, ClassVar

import httpx
from pydantic import BaseModel, ConfigDict, Field


class EngineError(Exception):
    """Base of the errors one attempt can end with."""


class ProviderError(EngineError):
    pass


class Overloaded(ProviderError):
    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class ProviderTimeout(EngineError):
    pass


class MalformedResponse(EngineError):
    pass


@dataclass(frozen=True)
class Query:
    """One question as the adapters see it: `choices` are never empty (yes/no filled in)."""

    question: str
    choices: list[str]
    yes_no: bool = False
    context: Any = None


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


class ProviderOptions(BaseModel):
    """Settings of one provider, from `[providers.<name>]` or `SYSTEM1_<NAME>_<KEY>`.

    The lane keys apply to every provider: engine passes in flight at once, requests that may
    wait, and how many queued requests one batch pass may carry.
    """

    model_config = ConfigDict(extra="forbid")

    slots: int = Field(default=1, ge=1, le=64)
    max_queue: int = Field(default=64, ge=0, le=10_000)
    max_batch: int = Field(default=32, ge=1, le=64)


class Provider(abc.ABC):
    """One engine. Subclasses set `name` and `Options` and implement `decide` and `health`."""

    name: ClassVar[str]
    Options: ClassVar[type[ProviderOptions]] = ProviderOptions
    #: Environment variables holding this provider's secrets (never config keys).
    secret_env: ClassVar[tuple[str, ...]] = ()

    def __init__(self, options: ProviderOptions, client: httpx.AsyncClient | None = None) -> None:
        self.options = options
        self._client = client

    @property
    def model_id(self) -> str:
        """The model or checkpoint the engine answers with, as calibration fits name it."""
        return str(getattr(self.options, "model", "") or self.name)

    @abc.abstractmethod
    async def decide(self, query: Query, timeout_s: float) -> Any:
        """Answer one question; pass `timeout_s` to every I/O call."""

    async def decide_many(self, state: Any, queries: list[Query], timeout_s: float) -> list[Any]:
        """Answer several questions about one text (`state`); engines that can override this
        with one pass. A single question keeps its own context when `state` is None."""
        if len(queries) == 1 and state is None:
            return [await self.decide(queries[0], timeout_s)]
        answers = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        for query in queries:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise ProviderTimeout(f"{len(answers)} of {len(queries)} questions answered in time")
            answers.append(await self.decide(Query(query.question, query.choices, query.yes_no, state), remaining))
        return answers

    async def decide_batch(self, states: list[Any], queries: list[Query], timeout_s: float) -> list[list[Any]]:
        """The same questions about several texts, in one pass where `capabilities().batch`."""
        raise ProviderError(f"{self.name} has no batch endpoint")

    @abc.abstractmethod
    async def health(self, timeout_s: float) -> HealthProbe:
        """Probe the engine; never raise."""

    @abc.abstractmethod
    def capabilities(self) -> Capabilities:
        """Non-secret facts about the engine, including `max_options`."""

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()


def check_option_limit(query: Query, limit: int | None, provider: str) -> None:
    if limit is not None and len(query.choices) > limit:
        raise ProviderError(
            f"{provider} takes at most {limit} options; this question has {len(query.choices)}"
        )


def shares_rationale(label: str, probabilities: dict[str, float], top: int = 5) -> str:
    """`label: a=0.52, b=0.48`, best first; the shape every probability-reporting adapter uses."""
    ranked = sorted(probabilities.items(), key=lambda item: item[1], reverse=True)[:top]
    shown = ", ".join(f"{option}={p:.2f}" for option, p in ranked)
    more = "" if len(probabilities) <= top else f", … ({len(probabilities) - top} more)"
    return f"{label}: {shown}{more}"
