"""A decision core that answers the router's four questions as a test scripts them, and a router
that borrows it, against fake upstreams."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from system1.core.result import Decision
from system1.core.schema import ErrorCode
from system1.providers.base import Query
from system1.core.router_config import RouterSettings
from system1.router.check import CHECK_KIND
from system1.router.plan import Plan
from system1.router.router import Router
from system1.service.metrics import Metrics


def levels(level: int, count: int) -> dict[str, float]:
    """Probabilities over `count` levels, almost all on `level`."""
    return {str(i): (0.97 if i == level else 0.03 / (count - 1)) for i in range(count)}


@dataclass
class Scripted:
    """Answers: topic probabilities by topic name, complexity and risk levels, P(private)."""

    topics: dict[str, float] = field(default_factory=lambda: {"debugging": 1.0})
    confidence: float = 0.95
    complexity: int = 2
    risk: int = 1
    p_private: float = 0.02
    fail: bool = False
    provider: str = "scripted"
    asked: list[tuple[Any, list[Query], str | None]] = field(default_factory=list)

    async def decide_many(self, state: Any, queries: list[Query], client: str, priority: int = 0, *,
                          threshold: float = 0.0, only: str | None = None) -> list[Decision]:
        self.asked.append((state, queries, only))
        if self.fail:
            return [Decision.failed(ErrorCode.PROVIDER_ERROR, "scripted: every engine failed") for _ in queries]
        topic, complexity, risk, private = queries
        by_name = {text.split(":")[0]: text for text in topic.choices}
        answers = [
            {by_name[t]: p for t, p in self.topics.items()},
            {complexity.choices[int(i)]: p for i, p in levels(self.complexity, 4).items()},
            {risk.choices[int(i)]: p for i, p in levels(self.risk, 3).items()},
            {"yes": self.p_private, "no": 1 - self.p_private},
        ]
        return [Decision("r", "decided", decision=max(p, key=p.get), confidence=self.confidence, probabilities=p,
                         provider=only or self.provider) for p in answers]


def always_local(name: str | None) -> bool:
    return True


class ScriptedCore:
    """The core as the router borrows it: `decider` answers the four questions, `judged` (when
    set) the answer check, and `stays_local` says which providers are on this machine."""

    def __init__(self) -> None:
        self.decider: Any = Scripted()
        self.judged: Any = None
        self.local: Callable[[str | None], bool] = always_local

    async def decide_many(self, state: Any, queries: list[Query], client: str, priority: int = 0, *,
                          threshold: float = 0.0, only: str | None = None) -> list[Decision]:
        answering = self.judged if self.judged is not None and queries[0].kind == CHECK_KIND else self.decider
        return await answering.decide_many(state, queries, client, priority, threshold=threshold, only=only)

    def stays_local(self, provider: str | None) -> bool:
        return self.local(provider)

    @asynccontextmanager
    async def borrow(self) -> AsyncIterator[ScriptedCore]:
        yield self


def router_for(settings: RouterSettings, tmp_path: Path) -> Router:
    return Router(settings, tmp_path / "state", Metrics(), ScriptedCore().borrow)


def core_of(router: Router) -> ScriptedCore:
    return router.borrow.__self__


async def plan_with(router: Router, api: str, body: Any, client: str, decider: Any,
                    stays_local: Callable[[str | None], bool] = always_local, remember: bool = True) -> Plan:
    """`router.plan`, its borrowed core answering as `decider`, providers local by `stays_local`."""
    core = core_of(router)
    core.decider, core.local = decider, stays_local
    return await router.plan(api, body, client, remember)
