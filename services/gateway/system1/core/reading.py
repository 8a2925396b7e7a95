"""A later stage answered by its own learned head on the engine's reading, not by its answer.

Where a cascade stage's provider has a head of the question's kind fitted on its own vectors
(the llama judge's last hidden state, `providers/llama.py`) and stacked on the earlier stage's
probabilities (`Head.earlier`), that head decides in the stage's place: one pass of the model
for the vector, no answer asked. A question with no such head, or whose vector does not come in
time, or whose stage 1 did not answer through its own head for the kind (a stacked head weighs
that head's probabilities, nothing else), is asked of the stage as usual: `None` here, or the
failed reading's attempt, which the decision keeps so that it says why the stage did not decide.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ..providers.base import EngineAnswer, Query
from .conclude import conclude
from .heads import Heads, kind_of
from .lanes import Lane
from .learned import EmbedderUnavailable, embedding
from .logs import Repeated
from .result import Decision
from .schema import Attempt

logger = logging.getLogger(__name__)
_warned = Repeated(logger)


async def read_one(lane: Lane, heads: Heads, state: Any, query: Query, before: Decision, request_id: str,
                   threshold: float, budget_s: float, client: str, priority: int) -> Decision | Attempt | None:
    """The decision on `query` of the head of `lane`'s provider (the stage), after the earlier
    stage's `before`; the attempt of a reading that failed; or None where there is no head to
    read. The reading waits in the stage's lane for `client` at `priority`."""
    provider = lane.provider
    kind = kind_of(query.question, query.choices, query.kind, query.yes_no)
    # A stacked head was fitted on what stage 1's head for the kind answers; other probabilities
    # (an engine's raw answer when the embedder is down) are not what it weighs.
    found = [h for h in heads.candidates(kind, provider.name, query.choices)
             if h.earlier is None or before.head == kind]
    if not found or budget_s <= 0:
        return None
    started = time.perf_counter()
    try:
        model, vector = await embedding(lane, state, query, budget_s, None, client, priority)
    except EmbedderUnavailable as exc:
        _warned.warning("%s gave no reading, so it is asked for an answer: %s", provider.name, exc)
        return Attempt(provider=provider.name, outcome=exc.outcome, latency_ms=_ms_since(started),
                       detail=f"no reading: {exc}")
    head = next((h for h in found if h.model == model), None)
    probabilities = head.probabilities(vector, state, before.probabilities, query.choices) if head else None
    if head is None or probabilities is None:
        return None
    choice = max(probabilities, key=probabilities.__getitem__)
    answer = EngineAnswer(decision=choice, confidence=probabilities[choice], probabilities=probabilities,
                          rationale=f"{provider.name} {model}, read by its head", model=model)
    attempt = Attempt(provider=provider.name, outcome="ok", latency_ms=_ms_since(started))
    return conclude(request_id, [*before.attempts, attempt], provider.name, answer,
                    threshold if query.min_confidence is None else query.min_confidence, True, None, None,
                    (head, probabilities), "pass")


def _ms_since(started: float) -> int:
    return round((time.perf_counter() - started) * 1000)
