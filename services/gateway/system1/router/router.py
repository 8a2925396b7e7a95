"""The router as the gateway serves it: a chat request in, the chosen model's answer out.

plan:    body → conversation → pre-check → sticky model, or the four-question decision → scoring
forward: the plan's models in turn (fall-through), the answer passed back, usage priced
record:  the decision log line, spend, metrics

One `Router` lives as long as the service; a config reload hands it new settings and keeps its
sticky conversations, in-flight counts and spend.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx

from ..core.jsonl import RotatingJsonl
from ..core.schema import RequestError, new_request_id
from ..core.router_config import ModelEntry, RouterSettings
from .check import Judge, Verdict, answer_text, applies, stronger
from .conversation import Conversation, from_anthropic, from_openai
from .outcomes import Outcomes
from .precheck import PreCheck, precheck
from .scoring import BELOW_FLOOR, Live, Route, route
from .shadow import Shadow, ShadowJob
from .signals import UNKNOWN, Asked, Decider, ask, provider_for
from .skills import load_overlay
from .state import InFlight, Spend, Sticky
from .upstream import AllFailed, Attempted, Forwarded, forward, missing_key

logger = logging.getLogger(__name__)
STICKY = "sticky: the conversation's model"
PASSED = "passed through: the client named the model"
FELL_THROUGH = "fell through: an earlier candidate failed"
READERS: dict[str, Callable[[Any], Conversation]] = {"openai": from_openai, "anthropic": from_anthropic}


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


class RouterError(Exception):
    """What the client gets instead of an answer: a status and a message (never a secret)."""

    def __init__(self, status: int, kind: str, message: str, failed: list[str] | None = None) -> None:
        super().__init__(message)
        self.status, self.kind, self.message, self.failed = status, kind, message, failed or []


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
                        "complexity_score": round(signals.complexity, 3), "risk_score": round(signals.risk, 3)},
            "needs": {**asdict(self.check.needs), "local_only": bool(route and route.local_only)},
            "findings": list(self.check.findings),
            "required_skill": route.required_skill if route else None,
            "sticky": self.sticky,
            "candidates": [{"id": c.id, "skill": c.skill, "est_cost_usd": round(c.est_cost_usd, 8),
                            "eff_cost_usd": round(c.eff_cost_usd, 8), "eligible": c.eligible,
                            **({"why": c.why} if c.why else {})} for c in (route.candidates if route else [])],
        }


@dataclass
class Reply:
    """An upstream's answer with the router's headers, for the edge to send."""

    status: int
    headers: dict[str, str]
    body: bytes | None
    stream: AsyncIterator[bytes] | None = field(default=None, repr=False)


def header_value(text: str) -> str:
    """A header-safe rendering: ASCII kept, anything else as \\uXXXX."""
    return text.encode("ascii", "backslashreplace").decode("ascii").replace("\r", " ").replace("\n", " ")


class Router:
    def __init__(self, settings: RouterSettings, install_dir: Path, observer: RouterObserver,
                 transport: httpx.AsyncBaseTransport | None = None, learned_dir: Path | None = None) -> None:
        self.install_dir = install_dir
        #: Where the refitted skills overlay is read (the state folder unless shared read-only).
        self.learned_dir = learned_dir or install_dir
        self.observer = observer
        self.in_flight = InFlight()
        self.spend = Spend(install_dir / "router" / "spend.json")
        self._transport = transport
        # Redirects are never followed, so an upstream key never reaches another host; no
        # system proxy for loopback or the stack's network (trust_env is only for remote https).
        self.client = httpx.AsyncClient(transport=transport, follow_redirects=False, trust_env=False)
        self.log: RotatingJsonl | None = None
        self.shadow = Shadow(observer)
        self.outcomes = Outcomes()
        self.settings = settings
        self.sticky = Sticky(settings.sticky_ttl_s)
        self.configure(settings)

    def configure(self, settings: RouterSettings) -> None:
        """Take new settings (with the refitted skills overlay laid over the catalogue)."""
        settings = load_overlay(settings, self.learned_dir)
        self.settings = settings
        self.sticky.ttl_s = settings.sticky_ttl_s
        path = settings.decision_log(self.install_dir)
        if self.log is None or self.log.path != path:
            if self.log is not None:
                self.log.close()
            self.log = RotatingJsonl(path, settings.log_max_bytes, settings.log_backups) if settings.enabled else None
        self.shadow.configure(settings, self.install_dir)
        self.outcomes.configure(settings, self.install_dir)

    async def settle(self) -> None:
        """Until the shadow has answered every job offered, then every log written what waits:
        for whatever reads the logs or the shadow's counts next (a refit, a test)."""
        await self.shadow.drain()
        for log in (self.log, self.shadow.log, self.outcomes.log):
            if log is not None:
                log.flush()

    async def aclose(self) -> None:
        await self.shadow.aclose()
        self.outcomes.close()
        await self.client.aclose()
        self.spend.close()
        if self.log is not None:
            self.log.close()

    # -- plan ----------------------------------------------------------------------------------
    def require_on(self) -> None:
        if not self.settings.enabled:
            raise RouterError(404, "not_found", "the router is off: set [router] enabled = true in the gateway config")

    def conversation(self, api: str, body: Any) -> Conversation:
        self.require_on()
        return READERS[api](body)

    async def plan(self, api: str, body: Any, client: str, decider: Decider,
                   decision_stays_local: Callable[[str | None], bool], remember: bool = True) -> Plan:
        """`decision_stays_local(provider or None for the chain)`: whether asking it keeps the
        prompt on this machine. A dry run (`remember` False) reads a conversation's model but
        does not set or refresh it."""
        settings = self.settings
        conversation = self.conversation(api, body)
        check = precheck(conversation, settings.phone_regions)
        needs = check.needs
        request_id = new_request_id()
        if conversation.model not in settings.aliases:
            return Plan(request_id, api, conversation, check, [self._passthrough(conversation, check)], PASSED)
        if remember:
            self.outcomes.arrived(client, conversation)
        live = Live(dict(self.in_flight.counts), dict(self.spend.today), missing_key(settings))
        key = f"{client}\n{conversation.key}"
        remembered = self.sticky.get(key)
        if remembered is not None:
            # The conversation's model and its fall-through, as long as they can take this turn.
            kept = route(settings, UNKNOWN, needs, live)
            usable = {c.id for c in kept.candidates if c.why in ("", BELOW_FLOOR)}
            if remembered[0] in usable:
                models = [m for m in remembered if m in usable]
                order = [(settings.model(m), settings.model(m).upstream, kept.reasoning_effort) for m in models]
                if remember:
                    self.sticky.put(key, remembered)
                return Plan(request_id, api, conversation, check, order, STICKY, kept, sticky=True,
                            key=key if remember else None)
        private = needs.private

        def may_reach(provider: str | None) -> bool:
            return settings.private != "local_only" or not private or decision_stays_local(provider)

        text = conversation.last_user or "\n".join(conversation.texts)
        asked = await ask(decider, settings, text, client, private, may_reach(provider_for(settings, private)))
        if asked.provider:
            self.observer.router_decision(asked.provider, asked.latency_ms / 1000)
        chosen = route(settings, asked.signals, needs, live)
        if chosen.model is None:
            status, kind = (403, "permission_error") if chosen.local_only else (400, "invalid_request_error")
            raise RouterError(status, kind, chosen.reason)
        if remember:
            self.sticky.put(key, tuple(chosen.order))
            if asked.provider:
                self.shadow.offer(ShadowJob(request_id, client, text, private or asked.signals.private,
                                            may_reach(settings.decision.shadow), needs, live, asked.signals,
                                            chosen.model, asked.provider))
        order = [(settings.model(m), settings.model(m).upstream, chosen.reasoning_effort) for m in chosen.order]
        return Plan(request_id, api, conversation, check, order, chosen.reason, chosen, asked,
                    decided_locally=bool(asked.provider) and decision_stays_local(asked.provider),
                    key=key if remember else None)

    def _passthrough(self, conversation: Conversation, check: PreCheck) -> tuple[ModelEntry | None, str, str]:
        settings = self.settings
        model = settings.model(conversation.model)
        upstream = model.upstream if model else settings.passthrough_upstream
        if not upstream:
            known = ", ".join([*settings.aliases, *(m.id for m in settings.models)])
            raise RouterError(404, "not_found", f"model: {conversation.model!r} is not routed or configured; "
                                                f"known: {known}")
        if check.needs.private and settings.private == "local_only" and not settings.upstream_is_local(upstream):
            raise RouterError(403, "permission_error", "private prompt (" + ", ".join(check.findings) + ") may not "
                              f"reach {conversation.model!r}, whose upstream is not on this machine (private = \"local_only\")")
        return model, upstream, ""

    # -- forward -------------------------------------------------------------------------------
    async def answer(self, plan: Plan, body: dict[str, Any], headers: Mapping[str, str], client: str,
                     judge: Judge | None = None) -> Reply:
        """The plan's answer; a whole one is checked (and maybe escalated) by `judge` where
        `[router.check]` applies."""
        stream = plan.conversation.stream
        started = time.perf_counter()
        self.in_flight.acquire(plan.model)
        try:
            forwarded = await forward(self.client, self.settings, plan.api, body, headers, plan.order, stream)
        except AllFailed as exc:
            self.in_flight.release(plan.model)
            self._fell_through(exc.failed)
            failed = [f"{a.model} ({a.why})" for a in exc.failed]
            self._record(plan, client, None, time.perf_counter() - started, exc.failed)
            rate_limited = all(a.why == "HTTP 429" for a in exc.failed)
            raise RouterError(429 if rate_limited else 502, "rate_limit_error" if rate_limited else "api_error",
                              f"every candidate failed: {exc}", failed) from None
        self._fell_through(forwarded.failed)
        if forwarded.stream is None:
            earlier: list[Forwarded] = []
            checks: list[Verdict] = []
            unreached: list[Attempted] = []
            if judge is not None and plan.route is not None and applies(self.settings, stream, headers):
                earlier, forwarded, checks, unreached = await self._check(plan, body, headers, forwarded, judge)
            self.in_flight.release(plan.model)
            self._stay_with(plan, forwarded, earlier)
            self._finish(plan, client, forwarded, time.perf_counter() - started, earlier, checks, unreached)
            reply_headers = {**forwarded.headers, **self.headers_for(plan, forwarded, earlier, checks)}
            return Reply(forwarded.status, reply_headers, forwarded.body)
        self._stay_with(plan, forwarded, [])
        reply_headers = {**forwarded.headers, **self.headers_for(plan, forwarded)}

        async def relay() -> AsyncIterator[bytes]:
            try:
                async for chunk in forwarded.stream:
                    yield chunk
            finally:  # also when the client hangs up: the upstream stream is closed with it
                await forwarded.stream.aclose()
                self.in_flight.release(plan.model)
                self._finish(plan, client, forwarded, time.perf_counter() - started)

        return Reply(forwarded.status, reply_headers, None, relay())

    async def _check(self, plan: Plan, body: dict[str, Any], headers: Mapping[str, str], forwarded: Forwarded,
                     judge: Judge) -> tuple[list[Forwarded], Forwarded, list[Verdict], list[Attempted]]:
        """Judge the answer; below the bar, send the request to the next stronger model, within
        the caps. The answers replaced, the one the client gets, every verdict, and the stronger
        models that failed when escalated to (the answer before them stands)."""
        check, route = self.settings.check, plan.route
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
            self.observer.checked(self._label(forwarded.model), "none" if verdict.p_yes is None else
                                  "pass" if verdict.passed(check.min_probability) else "fail")
            if verdict.passed(check.min_probability) or len(earlier) >= check.max_escalations:
                break
            better = stronger(route, forwarded.model, tried)
            if better is None or escalation_cost + better.est_cost_usd > check.max_cost_usd:
                break
            model = self.settings.model(better.id)
            tried.add(better.id)
            try:
                again = await forward(self.client, self.settings, plan.api, body, headers,
                                      [(model, model.upstream, route.reasoning_effort)], False)
            except AllFailed as exc:
                self._fell_through(exc.failed)
                unreached.extend(exc.failed)
                break
            self.observer.escalated(self._label(forwarded.model), better.id)
            escalation_cost += better.est_cost_usd
            earlier.append(forwarded)
            forwarded = again
        return earlier, forwarded, checks, unreached

    def _stay_with(self, plan: Plan, forwarded: Forwarded, earlier: Sequence[Forwarded]) -> None:
        """After a fall-through or an escalation, the conversation stays with the model that answered."""
        if (forwarded.failed or earlier) and plan.key is not None:
            models = [m.id for m, _, _ in plan.order if m is not None]
            self.sticky.put(plan.key, (forwarded.model, *(m for m in models if m != forwarded.model)))

    def headers_for(self, plan: Plan, forwarded: Forwarded | None, earlier: Sequence[Forwarded] = (),
                    checks: Sequence[Verdict] = ()) -> dict[str, str]:
        headers = {"x-router-model": forwarded.model if forwarded else plan.model, "x-router-reason": plan.reason,
                   "x-router-request-id": plan.request_id}
        if plan.route is not None:
            signals = plan.asked.signals if plan.asked else UNKNOWN
            headers |= {"x-router-topic": signals.primary or "unknown", "x-router-complexity": str(plan.route.complexity),
                        "x-router-risk": str(plan.route.risk)}
        if plan.asked is not None and plan.asked.provider:
            headers["x-router-decision-ms"] = f"{plan.asked.latency_ms:.1f}"
        failed = _failed([*earlier, forwarded] if forwarded is not None else [])
        if failed:
            headers["x-router-failed"] = ", ".join(a.model for a in failed)
        if earlier:
            headers["x-router-escalated"] = " -> ".join([*(f.model for f in earlier), forwarded.model])
        if checks:
            last = checks[-1]
            headers["x-router-check"] = "none" if last.p_yes is None else f"{last.p_yes:.3f}"
        return {k: header_value(v) for k, v in headers.items()}

    # -- record --------------------------------------------------------------------------------
    def _label(self, model: str) -> str:
        """A metric label: a catalogue id, or "passthrough" for a name only a client chose."""
        return model if self.settings.model(model) is not None else "passthrough"

    def _fell_through(self, attempts: Sequence[Attempted]) -> None:
        for attempt in attempts:
            self.observer.fell_through(self._label(attempt.model))

    def _finish(self, plan: Plan, client: str, forwarded: Forwarded, seconds: float, earlier: Sequence[Forwarded] = (),
                checks: Sequence[Verdict] = (), unreached: Sequence[Attempted] = ()) -> None:
        """Charge, count and log an answer; `unreached`: stronger models that failed when
        escalated to, logged with the failures (refit counts them) but not said to the client."""
        cost = sum(self._charge(f) for f in [*earlier, forwarded])
        if plan.key is not None:  # a routed request (not a pass-through): its turn may come again
            self.outcomes.answered(client, plan.conversation, plan.request_id, forwarded.model)
        status = "broken" if forwarded.broken else str(forwarded.status)
        self.observer.upstream(self._label(forwarded.model), status, seconds)
        failed = _failed([*earlier, forwarded])
        self.observer.routed(self._label(forwarded.model), plan.reason if not failed else FELL_THROUGH)
        if forwarded.broken:
            logger.warning("router: %s's stream for %s was cut short: %s", forwarded.model, plan.request_id,
                           forwarded.broken)
        self._record(plan, client, forwarded, seconds, [*failed, *unreached], cost, earlier, checks)

    def _charge(self, forwarded: Forwarded) -> float:
        """An answer's cost from its usage, added to its model's spend."""
        model = self.settings.model(forwarded.model)
        cost = forwarded.usage.cost(model) if model else 0.0
        if model is not None and cost:
            self.spend.add(model.id, cost)
            self.observer.spent(model.id, cost, self.spend.today.get(model.id, 0.0), model.daily_budget_usd)
        return cost

    def _record(self, plan: Plan, client: str, forwarded: Forwarded | None, seconds: float, failed: list[Attempted],
                cost: float = 0.0, earlier: Sequence[Forwarded] = (), checks: Sequence[Verdict] = ()) -> None:
        if self.log is None:
            return
        report = plan.report()
        entry = {
            "ts": round(time.time(), 3), "id": plan.request_id, "client": client, "api": plan.api,
            "requested": plan.conversation.model, "model": forwarded.model if forwarded else None,
            "planned": plan.model, "reason": plan.reason, "sticky": plan.sticky, "stream": plan.conversation.stream,
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
            "checks": [c.entry(self.settings.check.min_probability) for c in checks],
        }
        if self.settings.log_prompts:
            entry["prompt"] = plan.conversation.last_user
        self.log.write(entry)


def _failed(answers: Sequence[Forwarded]) -> list[Attempted]:
    """The candidates that failed before any of these answers (the first, and any escalation)."""
    return [attempt for answer in answers for attempt in answer.failed]


def error_body(api: str, error: RouterError | RequestError) -> dict[str, Any]:
    """The error in the client's API's own shape, so its SDK raises its usual exception."""
    if isinstance(error, RequestError):
        kind, message = "invalid_request_error", error.message
    else:
        kind, message = error.kind, error.message
    if api == "anthropic":
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}
