"""The provider chain: try the primary, then each fallback, through its lane.

- Fallback runs only on a timeout, an error or a malformed answer, never on an abstention.
- Every try is an `Attempt` with outcome, latency and detail.
- Each try is bounded by the per-attempt timeout and by what is left of the caller's budget,
  with asyncio (the adapter also gets it for its I/O).
- A provider whose circuit is open (see `breaker.py`) is skipped without a try; the attempt
  (outcome `error`) says so and when it will be tried again.
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
from .breaker import Breaker
from .events import Observer
from .lanes import Lane
from .schema import Attempt, ErrorCode, AttemptOutcome

logger = logging.getLogger(__name__)

FAILURE_CODES: dict[AttemptOutcome, ErrorCode] = {
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
                 timeout_s: float, observer: Observer) -> None:
        self.names = names
        self.providers = providers
        self.lanes = lanes
        self.timeout_s = timeout_s
        self.observer = observer
        self.breakers = {name: Breaker(p.options.breaker_failures, p.options.breaker_cooldown_s)
                         for name, p in providers.items()}

    async def ask(
        self, state: Any, queries: list[Query], client: str, priority: int, budget_s: float | None = None,
        work: int = 0, names: list[str] | None = None,
    ) -> ChainAnswer:
        """`queries` about `state` (`work` characters, see `work.py`), from the first provider
        of the chain (or of `names`) that answers within its timeout and the overall `budget_s`."""
        names = self.names if names is None else names
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (budget_s if budget_s is not None else self.timeout_s * len(names))
        result = ChainAnswer()
        hints: list[int] = []
        for name in names:
            timeout_s = min(self.timeout_s, deadline - loop.time())
            if timeout_s <= 0:
                break
            breaker = self.breakers[name]
            before = breaker.state
            allowed = breaker.allow()
            self._report(name, breaker, before)
            if not allowed:
                detail = (f"skipped: the circuit is open after {breaker.failures} consecutive failures; "
                          f"tried again in {breaker.retry_in_s():.0f} s")
                result.attempts.append(Attempt(provider=name, outcome="error", latency_ms=0, detail=detail))
                continue
            started = time.perf_counter()
            try:
                answers, outcome, detail, hint = await self._try(name, state, queries, client, priority, timeout_s, work)
            except BaseException:  # cancelled: no verdict on the engine
                breaker.released()
                raise
            # A timeout the caller's budget cut short says the engine is slower than this caller
            # can wait (a judge on a long prompt), not that it is down: no verdict on the engine.
            cut = outcome == "timeout" and timeout_s < self.timeout_s
            self._judge(name, breaker, outcome, no_verdict=hint is not None or cut)
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

    def _judge(self, name: str, breaker: Breaker, outcome: AttemptOutcome, no_verdict: bool) -> None:
        """Count the outcome against the breaker; `no_verdict`: the engine was not shown failing
        (the queue turned the request away, or the caller's budget cut the wait short)."""
        before = breaker.state
        if no_verdict:
            breaker.released()
        elif outcome in ("timeout", "error"):
            breaker.failed()
        else:
            breaker.succeeded()
        self._report(name, breaker, before)

    def _report(self, name: str, breaker: Breaker, before: str) -> None:
        if breaker.state != before:
            logger.warning("the circuit of %s is now %s", name, breaker.state)
            self.observer.circuit(name, breaker.state)

    async def _try(
        self, name: str, state: Any, queries: list[Query], client: str, priority: int, timeout_s: float, work: int
    ) -> tuple[list[EngineAnswer] | None, AttemptOutcome, str | None, int | None]:
        """One try of one provider: checked answers, or None with the failure's outcome, detail
        and (when turned away) retry hint."""
        provider = self.providers[name]
        try:
            async with asyncio.timeout(timeout_s):  # unlike wait_for, no task of its own
                raws = await self.lanes[name].run(state, queries, client, priority, timeout_s, work)
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
