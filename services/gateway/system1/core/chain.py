"""The provider chain: try the primary, then each fallback, through its lane.

- Fallback runs only on a timeout, an error or a malformed answer, never on an abstention.
- Every try is an `Attempt` with outcome, latency and detail.
- Each try is bounded by the per-attempt timeout and by what is left of the caller's budget,
  with asyncio (the adapter also gets it for its I/O).
- Answers are checked against their questions here (`check_answer`), so a wrong answer is
  `malformed` whatever the engine.

Decisions (one question) and the routing features (several questions about one text, one
pass) both go through `Chain.ask`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..providers.base import (
    EngineAnswer,
    EngineError,
    MalformedResponse,
    Overloaded,
    Provider,
    ProviderTimeout,
    Query,
    check_answer,
)
from .lanes import Lane
from .schema import Attempt, ErrorCode, Outcome

logger = logging.getLogger(__name__)

FAILURE_CODES: dict[Outcome, ErrorCode] = {
    "timeout": ErrorCode.PROVIDER_TIMEOUT,
    "error": ErrorCode.PROVIDER_ERROR,
    "malformed": ErrorCode.MALFORMED_RESPONSE,
}


def ms(seconds: float) -> int:
    return int(round(seconds * 1000))


@dataclass
class ChainAnswer:
    """What the chain got: the answering provider's checked answers, or none, and every try."""

    provider: str | None = None
    answers: list[EngineAnswer] | None = None
    attempts: list[Attempt] = field(default_factory=list)
    #: Set when every provider turned the request away at the door: seconds to wait.
    retry_after_s: int | None = None

    @property
    def failure(self) -> tuple[ErrorCode, str]:
        """Why no provider answered: the last attempt's code and every attempt's story."""
        summary = "; ".join(f"{a.provider}: {a.outcome} ({a.detail})" for a in self.attempts)
        if not self.attempts:
            return ErrorCode.PROVIDER_TIMEOUT, "no provider answered: the time budget ran out"
        return FAILURE_CODES[self.attempts[-1].outcome], f"no provider answered: {summary}"


class Chain:
    def __init__(self, names: list[str], providers: Mapping[str, Provider], lanes: Mapping[str, Lane],
                 timeout_s: float) -> None:
        self.names = names
        self.providers = providers
        self.lanes = lanes
        self.timeout_s = timeout_s

    async def ask(
        self, state: Any, queries: list[Query], client: str, priority: int, budget_s: float | None = None
    ) -> ChainAnswer:
        """`queries` about `state`, from the first provider that answers within its timeout and
        the overall `budget_s`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (budget_s if budget_s is not None else self.timeout_s * len(self.names))
        result = ChainAnswer()
        hints: list[int] = []
        for name in self.names:
            timeout_s = min(self.timeout_s, deadline - loop.time())
            if timeout_s <= 0:
                break
            started = time.perf_counter()
            answers, outcome, detail, hint = await self._try(name, state, queries, client, priority, timeout_s)
            if answers is not None and all(a.abstain for a in answers):
                outcome, detail = "abstained", answers[0].rationale
            result.attempts.append(Attempt(provider=name, outcome=outcome, latency_ms=ms(time.perf_counter() - started),
                                           detail=detail))
            if hint is not None:
                hints.append(hint)
            if answers is not None:
                result.provider, result.answers = name, answers
                return result
        if hints and len(hints) == len(result.attempts):  # every provider turned it away at the door
            result.retry_after_s = min(hints)
        return result

    async def _try(
        self, name: str, state: Any, queries: list[Query], client: str, priority: int, timeout_s: float
    ) -> tuple[list[EngineAnswer] | None, Outcome, str | None, int | None]:
        """One try of one provider: checked answers, or None with the failure's outcome, detail
        and (when turned away) retry hint."""
        provider = self.providers[name]
        try:
            raws = await asyncio.wait_for(self.lanes[name].run(state, queries, client, priority, timeout_s), timeout_s)
            if len(raws) != len(queries):
                raise MalformedResponse(f"{len(raws)} answers for {len(queries)} questions")
            answers = [check_answer(raw, query, provider.model_id) for raw, query in zip(raws, queries)]
        except Overloaded as exc:
            return None, "error", str(exc), exc.retry_after_s
        except (TimeoutError, ProviderTimeout) as exc:
            return None, "timeout", str(exc) or f"no answer within {timeout_s:g} s", None
        except MalformedResponse as exc:
            return None, "malformed", str(exc), None
        except EngineError as exc:
            return None, "error", str(exc), None
        except Exception as exc:  # an adapter bug must not take the chain down
            logger.exception("provider %s raised unexpectedly", name)
            return None, "error", f"internal error in the {name} adapter ({type(exc).__name__})", None
        return answers, "ok", None, None
