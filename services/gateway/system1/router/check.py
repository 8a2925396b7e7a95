"""Check-and-escalate: after a whole answer, one yes/no decision "does this answer satisfy the
request?"; below `[router.check] min_probability` the request goes to the next stronger model
that can take it, within a cap on escalations and on their estimated cost.

The verdict is a decision like any other (chain, lanes, calibration, a learned `router-check`
head where one is fitted; with `[router.check] min_confidence`, the cascade's judge where the
first stage is less sure). An answer that cannot be judged (no text, the engine failed) stands.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..core.lanes import INTERACTIVE
from ..providers.base import Query, head_and_tail
from ..core.router_config import RouterSettings
from .scoring import BELOW_FLOOR, Candidate, Route
from .signals import Decider, provider_for

CHECK_QUESTION = "Does this answer satisfy the request?"
CHECK_KIND = "router-check"
#: `X-Router-Check: on` asks for the check where `requests = "marked"`; `off` skips it.
MARK_HEADER = "x-router-check"


@dataclass(frozen=True)
class Verdict:
    """The check of one model's answer: P(it satisfies the request), or None with why not."""

    model: str
    p_yes: float | None
    provider: str | None = None
    ms: float = 0.0
    error: str | None = None

    def passed(self, min_probability: float) -> bool:
        return self.p_yes is None or self.p_yes >= min_probability

    def entry(self, min_probability: float) -> dict[str, Any]:
        return {"model": self.model, "p_yes": None if self.p_yes is None else round(self.p_yes, 4),
                "passed": self.passed(min_probability), "provider": self.provider, "ms": round(self.ms, 1),
                **({"error": self.error} if self.error else {})}


#: (the request's text, the answer's text, the model that answered) → its verdict.
Judge = Callable[[str, str, str], Awaitable[Verdict]]


def applies(settings: RouterSettings, stream: bool, headers: Mapping[str, str]) -> bool:
    check = settings.check
    mark = headers.get(MARK_HEADER, "").strip().lower()
    if not check.enabled or stream or mark == "off":
        return False
    return check.requests == "all" or mark == "on"


def answer_text(api: str, body: bytes | None) -> str | None:
    """The text of a whole answer in the client API's shape; None when it has none (tool calls
    only, an error body, not JSON)."""
    try:
        payload = json.loads(body or b"")
    except ValueError:
        return None
    if not isinstance(payload, dict):
        return None
    if api == "anthropic":
        blocks = payload.get("content")
        parts = [b.get("text") for b in blocks if isinstance(b, dict) and b.get("type") == "text"] if isinstance(blocks, list) else []
    else:
        choices = payload.get("choices")
        message = choices[0].get("message") if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        parts = [content] if isinstance(content, str) else [
            p.get("text") for p in content or [] if isinstance(p, dict) and p.get("type") == "text"]
    text = "\n".join(p for p in parts if isinstance(p, str)).strip()
    return text or None


async def judge(decider: Decider, settings: RouterSettings, request: str, answer: str, model: str, client: str,
                private: bool, may_leave: Callable[[str | None], bool]) -> Verdict:
    """The verdict on `model`'s answer, from `[router.check] provider` (or the decision's)."""
    provider = settings.check.provider or provider_for(settings, private)
    if not may_leave(provider):
        return Verdict(model, None, error="a private prompt's answer may not reach the check's engine (private = \"local_only\")")
    chars = settings.check.chars
    state = {"request": head_and_tail(request, chars), "answer": head_and_tail(answer, chars)}
    started = time.perf_counter()
    query = Query(CHECK_QUESTION, ["yes", "no"], yes_no=True, kind=CHECK_KIND,
                  min_confidence=settings.check.min_confidence or None)
    [decision] = await decider.decide_many(state, [query], client, INTERACTIVE, threshold=0.0, only=provider)
    ms = (time.perf_counter() - started) * 1000
    p_yes = (decision.probabilities or {}).get("yes")
    if p_yes is None:
        return Verdict(model, None, decision.provider, ms, decision.error.message if decision.error else "no probabilities")
    return Verdict(model, float(p_yes), decision.provider, ms)


def stronger(route: Route, current: str, tried: set[str]) -> Candidate | None:
    """The next stronger model that can take the request: the least skilled of those more
    skilled than `current` (over the floor or not), not yet tried; the cheaper on a tie."""
    skills = {c.id: c.skill for c in route.candidates}
    floor = skills.get(current, 0.0)
    capable = [c for c in route.candidates if c.why in ("", BELOW_FLOOR) and c.skill > floor and c.id not in tried]
    return min(capable, key=lambda c: (c.skill, c.est_cost_usd, c.id), default=None)
