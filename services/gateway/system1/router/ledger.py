"""A routed answer's accounts: while it is in flight, what it may cost held against its model's
budget; after it, its cost charged to the model's spend, the metrics, the turn in the outcome
log, and the decision log's line."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from ..core.jsonl import RotatingJsonl
from ..core.router_config import RouterSettings
from .check import Verdict
from .outcomes import Outcomes
from .plan import Plan, RouterError, failed_before
from .scoring import Live, est_cost, over_budget
from .spend import Spend
from .upstream import Attempted, Forwarded

logger = logging.getLogger(__name__)
FELL_THROUGH = "fell through: an earlier candidate failed"


class RouterObserver(Protocol):
    def routed(self, model: str, reason: str) -> None: ...
    def router_decision(self, provider: str, seconds: float) -> None: ...
    def upstream(self, model: str, status: str, seconds: float) -> None: ...
    def fell_through(self, model: str) -> None: ...
    def spent(self, model: str, usd: float, today_usd: float, budget_usd: float | None) -> None: ...
    def shadow_agreement(self, signal: str, model: str, agreed: bool) -> None: ...
    def shadow_skipped(self, why: str) -> None: ...
    def checked(self, model: str, verdict: str) -> None: ...
    def escalated(self, model: str, to: str) -> None: ...


class Ledger:
    def __init__(self, settings: RouterSettings, observer: RouterObserver, spend: Spend, outcomes: Outcomes) -> None:
        self.settings = settings
        self.observer = observer
        self.spend = spend
        self.outcomes = outcomes
        self.log: RotatingJsonl | None = None

    def configure(self, settings: RouterSettings, install_dir: Path) -> None:
        """New settings; the decision log reopened where its path changed (none while off)."""
        self.settings = settings
        path = settings.decision_log(install_dir)
        if self.log is None or self.log.path != path:
            self.close()
            self.log = RotatingJsonl(path, settings.log_max_bytes, settings.log_backups) if settings.enabled else None

    def close(self) -> None:
        if self.log is not None:
            self.log.close()
            self.log = None

    def reserve(self, plan: Plan, body: dict[str, Any], live: Live) -> float:
        """Hold what the answer may cost at most (its prompt, and `max_tokens` or the route's
        estimate of the answer) against its model's budget while it is in flight, so requests
        at the same time cannot overshoot it together; a model they would put over it is refused."""
        model = self.settings.model(plan.model)
        if model is None or model.daily_budget_usd is None:
            return 0.0
        cost = est_cost(model, plan.check.needs.input_tokens, answer_tokens(self.settings, plan, body))
        refusal = over_budget(model, live, cost)
        if refusal:
            raise RouterError(429, "rate_limit_error", f"model: {model.id!r} is {refusal}")
        self.spend.reserve(model.id, cost)
        return cost

    def label(self, model: str) -> str:
        """A metric label: a catalogue id, or "passthrough" for a name only a client chose."""
        return model if self.settings.model(model) is not None else "passthrough"

    def fell_through(self, attempts: Sequence[Attempted]) -> None:
        for attempt in attempts:
            self.observer.fell_through(self.label(attempt.model))

    def finish(self, plan: Plan, client: str, forwarded: Forwarded, seconds: float, earlier: Sequence[Forwarded] = (),
               checks: Sequence[Verdict] = (), unreached: Sequence[Attempted] = ()) -> None:
        """Charge, count and log an answer; `unreached`: stronger models that failed when
        escalated to, logged with the failures (refit counts them) but not said to the client."""
        if forwarded.usage.estimated:  # what was sent is known here, not where the stream was read
            forwarded.usage.input_tokens = plan.check.needs.input_tokens
        cost = sum(self._charge(f) for f in [*earlier, forwarded])
        if plan.key is not None:  # a routed request (not a pass-through): its turn may come again
            self.outcomes.answered(client, plan.conversation, plan.request_id, forwarded.model)
        status = "broken" if forwarded.broken else str(forwarded.status)
        self.observer.upstream(self.label(forwarded.model), status, seconds)
        failed = failed_before([*earlier, forwarded])
        self.observer.routed(self.label(forwarded.model), plan.reason if not failed else FELL_THROUGH)
        if forwarded.broken:
            logger.warning("router: %s's stream for %s was cut short: %s", forwarded.model, plan.request_id,
                           forwarded.broken)
        self.record(plan, client, forwarded, seconds, [*failed, *unreached], cost, earlier, checks)

    def _charge(self, forwarded: Forwarded) -> float:
        """An answer's cost from its usage, added to its model's spend."""
        model = self.settings.model(forwarded.model)
        cost = forwarded.usage.cost(model) if model else 0.0
        if model is not None and cost:
            self.spend.add(model.id, cost)
            self.observer.spent(model.id, cost, self.spend.today.get(model.id, 0.0), model.daily_budget_usd)
        return cost

    def record(self, plan: Plan, client: str, forwarded: Forwarded | None, seconds: float, failed: list[Attempted],
               cost: float = 0.0, earlier: Sequence[Forwarded] = (), checks: Sequence[Verdict] = ()) -> None:
        if self.log is not None:
            self.log.write(plan.log_entry(client, forwarded, seconds, failed, cost, earlier, checks,
                                          self.settings.check.min_probability, self.settings.log_prompts))


def answer_tokens(settings: RouterSettings, plan: Plan, body: dict[str, Any]) -> int:
    """The most the answer may run to: the client's `max_tokens` (or `max_completion_tokens`),
    else the estimate for the route's complexity, else the largest estimate."""
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    estimates = settings.est_output_tokens
    return estimates[plan.route.complexity] if plan.route is not None else max(estimates)
