"""What a routed answer leaves behind: its cost charged to its model's spend, the metrics, the
turn in the outcome log, and the decision log's line."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from ..core.jsonl import RotatingJsonl
from ..core.router_config import RouterSettings
from .outcomes import Outcomes
from .plan import Plan, failed_before
from .state import Spend
from .upstream import Attempted, Forwarded
from .check import Verdict

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
