"""A routed request's plan (what was chosen, from what and why) and its one rendering: the dry
run's report, from which the `X-Router-*` headers and the decision log line are read."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..core.router_config import ModelEntry
from .check import Verdict
from .conversation import Conversation
from .precheck import PreCheck
from .scoring import Route
from .signals import UNKNOWN, Asked
from .upstream import Attempted, Forwarded


class RouterError(Exception):
    """What the client gets instead of an answer: a status and a message (never a secret)."""

    def __init__(self, status: int, kind: str, message: str, failed: list[str] | None = None) -> None:
        super().__init__(message)
        self.status, self.kind, self.message, self.failed = status, kind, message, failed or []


def header_value(text: str) -> str:
    """A header-safe rendering: ASCII kept, anything else as \\uXXXX."""
    return text.encode("ascii", "backslashreplace").decode("ascii").replace("\r", " ").replace("\n", " ")


def failed_before(answers: Sequence[Forwarded]) -> list[Attempted]:
    """The candidates that failed before any of these answers (the first, and any escalation)."""
    return [attempt for answer in answers for attempt in answer.failed]


@dataclass
class Plan:
    request_id: str
    api: str
    conversation: Conversation
    check: PreCheck
    #: Models to try in turn, with the upstream and effort each is asked with.
    order: list[tuple[ModelEntry | None, str, str]]
    reason: str
    route: Route | None = None
    asked: Asked | None = None
    #: Whether the engine that answered the decision is on this machine (its cost is then 0).
    decided_locally: bool = False
    sticky: bool = False
    #: The conversation's key when its models are remembered (None for a dry run, a pass-through).
    key: str | None = None
    #: What kept the prompt on this machine, in a word and a sentence (`signals.private_rule`).
    private_rule: tuple[str, str] | None = None

    @property
    def model(self) -> str:
        first = self.order[0][0]
        return first.id if first is not None else self.conversation.model

    def report(self) -> dict[str, Any]:
        """The dry run's answer: what was chosen, from what, and why (the seed article's shape)."""
        signals = self.asked.signals if self.asked else UNKNOWN
        route = self.route
        return {
            "model": self.model,
            "reason": self.reason,
            "order": [m.id if m else self.conversation.model for m, _, _ in self.order],
            "decision_provider": self.asked.provider if self.asked else None,
            "decision_ms": round(self.asked.latency_ms, 1) if self.asked else None,
            # A local engine costs nothing; a hosted one's price is not known to the router.
            "decision_cost_usd": 0.0 if self.asked and self.asked.provider and self.decided_locally else None,
            "decision_error": self.asked.error if self.asked else None,
            "signals": {"topics": {t: round(p, 4) for t, p in signals.topics.items()}, "primary": signals.primary,
                        "confidence": round(signals.confidence, 4), "complexity": route.complexity if route else None,
                        "risk": route.risk if route else None, "private": signals.private,
                        "p_private": None if signals.p_private is None else round(signals.p_private, 4),
                        "private_by": signals.private_by or None,
                        "complexity_score": round(signals.complexity, 3), "risk_score": round(signals.risk, 3),
                        "complexity_p": [round(p, 4) for p in signals.complexity_p]},
            "needs": {**asdict(self.check.needs), "local_only": bool(route and route.local_only)},
            "kept_local": None if self.private_rule is None else {"by": self.private_rule[0],
                                                                  "why": self.private_rule[1]},
            "findings": list(self.check.findings),
            "required_skill": route.required_skill if route else None,
            "sticky": self.sticky,
            "rule": route.rule if route else None,
            "candidates": [{"id": c.id, "skill": c.skill, "est_cost_usd": round(c.est_cost_usd, 8),
                            "eff_cost_usd": round(c.eff_cost_usd, 8), "eligible": c.eligible,
                            **({"expected_quality": c.expected_quality} if c.expected_quality is not None else {}),
                            **({"why": c.why} if c.why else {})} for c in (route.candidates if route else [])],
        }

    def headers(self, forwarded: Forwarded | None, earlier: Sequence[Forwarded] = (),
                checks: Sequence[Verdict] = ()) -> dict[str, str]:
        """The `X-Router-*` headers of the answer `forwarded` (None: no answer)."""
        report = self.report()
        headers = {"x-router-model": forwarded.model if forwarded else self.model, "x-router-reason": self.reason,
                   "x-router-request-id": self.request_id}
        if self.route is not None:
            signals = report["signals"]
            headers |= {"x-router-topic": signals["primary"] or "unknown",
                        "x-router-complexity": str(signals["complexity"]), "x-router-risk": str(signals["risk"])}
        if report["decision_provider"]:
            headers["x-router-decision-ms"] = f"{report['decision_ms']:.1f}"
        ranked = [c for c in report["candidates"] if "expected_quality" in c][:4]
        if ranked:
            # The chosen model first, then the others it was weighed against.
            headers["x-router-expected"] = ", ".join(
                f"{c['id']} q={c['expected_quality']:.3f} ${c['est_cost_usd']:.5f}" for c in ranked)
        if self.private_rule is not None:
            headers["x-router-kept-local"] = self.private_rule[0]
        failed = failed_before([*earlier, forwarded] if forwarded is not None else [])
        if failed:
            headers["x-router-failed"] = ", ".join(a.model for a in failed)
        if earlier and forwarded is not None:
            headers["x-router-escalated"] = " -> ".join([*(f.model for f in earlier), forwarded.model])
        if checks:
            last = checks[-1]
            headers["x-router-check"] = "none" if last.p_yes is None else f"{last.p_yes:.3f}"
        return {k: header_value(v) for k, v in headers.items()}

    def log_entry(self, client: str, forwarded: Forwarded | None, seconds: float, failed: Sequence[Attempted],
                  cost: float, earlier: Sequence[Forwarded], checks: Sequence[Verdict], min_probability: float,
                  prompt: bool) -> dict[str, Any]:
        """The decision log's line for this plan's answer (`prompt`: with the prompt's text)."""
        report = self.report()
        entry = {
            "ts": round(time.time(), 3), "id": self.request_id, "client": client, "api": self.api,
            "requested": self.conversation.model, "model": forwarded.model if forwarded else None,
            "planned": self.model, "reason": self.reason, "sticky": self.sticky, "stream": self.conversation.stream,
            "signals": report["signals"], "needs": report["needs"], "findings": report["findings"],
            "decision": {"provider": report["decision_provider"], "ms": report["decision_ms"],
                         "error": report["decision_error"]},
            "required_skill": report["required_skill"],
            "candidates": [{k: c[k] for k in ("id", "skill", "est_cost_usd", "eligible")} for c in report["candidates"]],
            "failed": [{"model": a.model, "why": a.why} for a in failed],
            "status": forwarded.status if forwarded else None,
            "broken": forwarded.broken if forwarded else None,
            "usage": asdict(forwarded.usage) if forwarded else None, "cost_usd": round(cost, 8),
            "upstream_ms": round(seconds * 1000, 1),
            "escalated_from": [f.model for f in earlier],
            "checks": [c.entry(min_probability) for c in checks],
        }
        if prompt:
            entry["prompt"] = self.conversation.last_user
        return entry


@dataclass
class Reply:
    """An upstream's answer with the router's headers, for the edge to send."""

    status: int
    headers: dict[str, str]
    body: bytes | None
    stream: AsyncIterator[bytes] | None = field(default=None, repr=False)
