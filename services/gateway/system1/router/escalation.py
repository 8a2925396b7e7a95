"""Check-and-escalate: a whole answer gets a verdict; below the bar, the request goes to the next
stronger model, within the caps on escalations and cost."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from ..core.router_config import RouterSettings
from .check import Judge, Verdict, answer_text, judge, stronger
from .ledger import Ledger
from .plan import Plan
from .signals import Borrow
from .state import UpstreamSlots
from .upstream import AllBusy, AllFailed, Attempted, Forwarded, forward


def judging(borrow: Borrow, settings: RouterSettings, plan: Plan, client: str) -> Judge:
    """The verdict on an answer to `plan`, from `[router.check]`'s engine through the borrowed core."""

    async def verdict(request: str, answer: str, model: str) -> Verdict:
        async with borrow() as core:
            return await judge(core, settings, request, answer, model, client, plan.check.needs.private,
                               core.stays_local)

    return verdict


async def escalate(client: httpx.AsyncClient, slots: UpstreamSlots, settings: RouterSettings, ledger: Ledger, plan: Plan,
                   body: dict[str, Any], headers: Mapping[str, str], forwarded: Forwarded,
                   judge: Judge) -> tuple[list[Forwarded], Forwarded, list[Verdict], list[Attempted]]:
    """The answers replaced, the one the client gets, every verdict, and the stronger models
    that failed when escalated to (the answer before them stands)."""
    check, route = settings.check, plan.route
    assert route is not None  # only routed plans are checked
    request = plan.conversation.last_user or "\n".join(plan.conversation.texts)
    earlier: list[Forwarded] = []
    checks: list[Verdict] = []
    unreached: list[Attempted] = []
    tried = {forwarded.model, *(a.model for a in forwarded.failed)}
    escalation_cost = 0.0
    while True:
        text = answer_text(plan.api, forwarded.body) if forwarded.status == 200 else None
        if text is None:
            break
        verdict = await judge(request, text, forwarded.model)
        checks.append(verdict)
        ledger.observer.checked(ledger.label(forwarded.model), "none" if verdict.p_yes is None else
                                "pass" if verdict.passed(check.min_probability) else "fail")
        if verdict.passed(check.min_probability) or len(earlier) >= check.max_escalations:
            break
        better = stronger(route, forwarded.model, tried)
        if better is None or escalation_cost + better.est_cost_usd > check.max_cost_usd:
            break
        model = settings.model(better.id)
        tried.add(better.id)
        try:
            again = await forward(client, settings, plan.api, body, headers,
                                  [(model, model.upstream, route.reasoning_effort)], False, slots)
        except AllBusy:
            break
        except AllFailed as exc:
            ledger.fell_through(exc.failed)
            unreached.extend(exc.failed)
            break
        ledger.observer.escalated(ledger.label(forwarded.model), better.id)
        escalation_cost += better.est_cost_usd
        earlier.append(forwarded)
        forwarded = again
    return earlier, forwarded, checks, unreached
