"""Learned heads at answer time: which heads a question has, the embedding they read, and
their probabilities in place of the engine's.

A head answers only where the embedding comes with the engine's answer (the embedder
answered) or the embedder gives it in time, for the head's own model; otherwise the engine's
answer stands, never worse than without a head. A kind that `[learning] models` ties to an
embedding model reads only heads for that model, its vector asked of the embedder by name.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from ..providers.base import EngineAnswer, EngineError, ProviderTimeout, Query
from .heads import Head, Heads, kind_of
from .lanes import BATCH, Lane
from .logs import Repeated
from .schema import AttemptOutcome, parse_request

logger = logging.getLogger(__name__)
#: A head and its probabilities for one answer.
Learned = tuple[Head, dict[str, float]]


class EmbedderUnavailable(Exception):
    """No embedder is configured, or it failed or did not answer in time (`outcome`, as an
    attempt of the chain would say it)."""

    def __init__(self, message: str, outcome: AttemptOutcome = "error") -> None:
        super().__init__(message)
        self.outcome: AttemptOutcome = outcome


async def embedding(lane: Lane, state: Any, query: Query, timeout_s: float, model: str | None, client: str,
                    priority: int) -> tuple[str, list[float]]:
    """The model and vector of `lane`'s engine (by embedding model `model`, None for its own),
    asked through its lane for `client` at `priority` and bounded by `timeout_s`; any failure (a
    full queue, an adapter bug included, as in the chain) is `EmbedderUnavailable` naming it."""
    try:
        return await asyncio.wait_for(lane.embed(state, query, model, client, priority, timeout_s), timeout_s)
    except TimeoutError:
        raise EmbedderUnavailable(f"the embedder {lane.name} did not answer within {timeout_s:g} s",
                                  "timeout") from None
    except EngineError as exc:
        raise EmbedderUnavailable(str(exc), "timeout" if isinstance(exc, ProviderTimeout) else "error") from None
    except Exception as exc:
        logger.exception("embedder %s failed", lane.name)
        raise EmbedderUnavailable(f"the embedder {lane.name} failed ({type(exc).__name__})") from None


class LearnedHeads:
    def __init__(self, heads: Heads, embedder: Lane | None, timeout_s: float,
                 models: Mapping[str, str] | None = None) -> None:
        self.heads = heads
        #: The embedder's lane: its vectors wait in the same queue as its answers.
        self.embedder = embedder
        self.timeout_s = timeout_s
        #: The embedding model by kind, for kinds that do not read the embedder's own vector.
        self.models = dict(models or {})
        #: Why the embedder last failed, until it answers again (for health).
        self.error: str | None = None
        self._warned = Repeated(logger)

    def candidates(self, query: Query) -> list[Head]:
        """The heads for the query's kind, for the embedder's models (the kind's own model, where
        it has one)."""
        if self.embedder is None:
            return []
        kind = kind_of(query.question, query.choices, query.kind, query.yes_no)
        heads = self.heads.candidates(kind, self.embedder.name, query.choices)
        model = self.models.get(kind)
        return [h for h in heads if h.model == model] if model else heads

    def answers_with(self, names: list[str]) -> bool:
        """Whether the embedder is among `names` (then its answers can carry the embedding)."""
        return self.embedder is not None and self.embedder.name in names

    async def embed(self, payload: Any, client: str) -> dict[str, Any]:
        """For `system1 learn` (batch work of `client`): the embedder's vector of a decide
        request's judged text, with its kind. `RequestError` for a bad request;
        `EmbedderUnavailable` when none answers."""
        request = parse_request(payload)
        if self.embedder is None:
            raise EmbedderUnavailable("learning is off or [learning] embedder is not configured")
        query = Query(request.question, request.choices, request.options is None, request.kind)
        kind = kind_of(query.question, query.choices, query.kind, query.yes_no)
        model, vector = await embedding(self.embedder, request.context, query, self.timeout_s, self.models.get(kind),
                                        client, BATCH)
        return {"embedder": self.embedder.name, "model": model, "embedding": vector, "kind": kind}

    async def apply(
        self, state: Any, queries: list[Query], candidates: list[list[Head]], name: str, replies: list[EngineAnswer],
        budget_s: float | None, client: str, priority: int,
    ) -> list[Learned | None]:
        """For each query with `candidates`: the head and its probabilities, for the answer that
        provider `name` gave; else None (the engine's answer stands). A vector that did not come
        with the answer is asked for `client` at `priority`."""
        found: list[Learned | None] = [None] * len(queries)
        if self.embedder is None:
            return found
        timeout_s = self.timeout_s if budget_s is None else min(self.timeout_s, budget_s)
        for index, (query, reply, heads) in enumerate(zip(queries, replies, candidates)):
            if not heads or reply.abstain:
                continue
            wanted = self.models.get(heads[0].kind)
            if name == self.embedder.name and reply.embedding is not None and wanted in (None, reply.model):
                model, vector = reply.model, reply.embedding
            elif timeout_s <= 0:
                continue
            else:
                try:
                    model, vector = await embedding(self.embedder, state, query, timeout_s, wanted, client, priority)
                except EmbedderUnavailable as exc:
                    self.error = str(exc)
                    self._warned.warning("the engine's answer stands: %s", exc)
                    continue
                self.error = None
            head = next((h for h in heads if h.model == model), None)
            probabilities = head.probabilities(vector, state, choices=query.choices) if head else None
            if head is not None and probabilities is not None:
                found[index] = (head, probabilities)
        return found
