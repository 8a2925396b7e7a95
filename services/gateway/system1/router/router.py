"""The router as the gateway serves it: a chat request in, the chosen model's answer out.

plan:    body → conversation → pre-check → sticky model, or the four-question decision → scoring
forward: the plan's models in turn (fall-through), a whole answer checked and maybe escalated
record:  spend, metrics and the decision log line (`ledger.py`)

One `Router` lives as long as the service; a config reload hands it new settings and keeps its
sticky conversations, in-flight counts and spend. It borrows the gateway core one way, through
the `borrow` it is handed once, for the decision, the answer check and the shadow.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from ..core.lanes import BATCH
from ..core.router_config import ModelEntry, RouterSettings
from ..core.schema import RequestError, new_request_id
from .check import applies
from .conversation import Conversation, from_anthropic, from_openai
from .escalation import escalate, judging
from .ledger import Ledger, RouterObserver
from .outcomes import Outcomes
from .plan import Plan, Reply, RouterError
from .precheck import Budget, PreCheck, checked
from .scoring import BELOW_FLOOR, Live, Needs, Route, est_cost, over_budget, route
from .shadow import Shadow, ShadowJob
from .signals import UNKNOWN, Asked, Borrow, Core, ask, private_rule, provider_for
from .skills import load_overlay
from .spend import Spend
from .state import InFlight, Sticky, UpstreamSlots
from .upstream import AllBusy, AllFailed, Forwarded, forward, missing_key

STICKY = "sticky: the conversation's model"
PASSED = "passed through: the client named the model"
READERS: dict[str, Callable[[Any], Conversation]] = {"openai": from_openai, "anthropic": from_anthropic}
#: The client the shadow engine's decisions are asked as: one client, for the lanes' fairness.
SHADOW_CLIENT = "router-shadow"


class Router:
    def __init__(self, settings: RouterSettings, install_dir: Path, observer: RouterObserver, borrow: Borrow,
                 transport: httpx.AsyncBaseTransport | None = None, learned_dir: Path | None = None) -> None:
        self.install_dir = install_dir
        #: Where the refitted skills overlay is read (the state folder unless shared read-only).
        self.learned_dir = learned_dir or install_dir
        self.observer = observer
        self.borrow = borrow
        self.in_flight = InFlight()
        self.spend = Spend(install_dir / "router" / "spend.json")
        # Redirects are never followed, so an upstream key never reaches another host; no system
        # proxy (trust_env); each upstream's `max_connections` bounds it (`slots`), not the pool.
        self.client = httpx.AsyncClient(transport=transport, follow_redirects=False, trust_env=False,
                                        limits=httpx.Limits(max_connections=None, max_keepalive_connections=50))
        self.slots = UpstreamSlots()
        self.shadow = Shadow(observer)
        self.outcomes = Outcomes()
        self.ledger = Ledger(settings, observer, self.spend, self.outcomes)
        self.settings = settings
        self.sticky = Sticky(settings.sticky_ttl_s)
        #: What is wrong with the refitted skills overlay, when it was skipped.
        self.skills_error: str | None = None
        self.configure(settings)

    def configure(self, settings: RouterSettings) -> None:
        """Take new settings (with the refitted skills overlay laid over the catalogue)."""
        settings, self.skills_error = load_overlay(settings, self.learned_dir)
        self.settings = settings
        self.sticky.ttl_s = settings.sticky_ttl_s
        self.ledger.configure(settings, self.install_dir)
        self.shadow.configure(settings, self.install_dir)
        self.outcomes.configure(settings, self.install_dir)

    def start(self) -> None:
        """Begin the shadow's work (inside the event loop)."""
        self.shadow.start(self._ask_shadow)

    async def _ask_shadow(self, job: ShadowJob) -> Asked:
        """The shadow provider's four answers for a planned request, as batch work (behind every
        interactive decision in its lane)."""
        async with self.borrow() as core:
            return await ask(core, self.settings, job.text, SHADOW_CLIENT, job.private, job.may_ask,
                             only=self.settings.decision.shadow, priority=BATCH)

    async def settle(self) -> None:
        """Until the shadow has answered every job offered, then every log written what waits:
        for whatever reads the logs or the shadow's counts next (a refit, a test)."""
        await self.shadow.drain()
        for log in (self.ledger.log, self.shadow.log, self.outcomes.log):
            if log is not None:
                log.flush()

    async def aclose(self) -> None:
        await self.shadow.aclose()
        self.outcomes.close()
        await self.client.aclose()
        self.spend.close()
        self.ledger.close()

    # -- plan ----------------------------------------------------------------------------------
    def require_on(self) -> None:
        if not self.settings.enabled:
            raise RouterError(404, "not_found", "the router is off: set [router] enabled = true in the gateway config")

    def conversation(self, api: str, body: Any) -> Conversation:
        self.require_on()
        return READERS[api](body)

    def _live(self, settings: RouterSettings) -> Live:
        return Live(dict(self.in_flight.counts), self.spend.committed(), missing_key(settings))

    async def plan(self, api: str, body: Any, client: str, remember: bool = True) -> Plan:
        """The plan for a chat request, its decision asked of the borrowed core. A dry run
        (`remember` False) reads a conversation's model but does not set or refresh it."""
        async with self.borrow() as core:
            return await self._plan(api, body, client, core, remember)

    async def _plan(self, api: str, body: Any, client: str, core: Core, remember: bool) -> Plan:
        settings = self.settings
        conversation = self.conversation(api, body)
        check = await checked(conversation, settings.phone_regions,
                              Budget(settings.precheck_max_chars, settings.precheck_timeout_s))
        needs = check.needs
        request_id = new_request_id()
        if conversation.model not in settings.aliases:
            return Plan(request_id, api, conversation, check, [passthrough(settings, conversation, check, self._live(settings))], PASSED)
        if remember:
            self.outcomes.arrived(client, conversation)
        live = self._live(settings)
        key = f"{client}\n{conversation.key}"
        remembered = self.sticky.get(key)
        text = conversation.last_user or "\n".join(conversation.texts)
        asked = None
        if remembered is not None and _each_turn_checked(settings, remembered, needs):
            asked = await _ask(core, settings, text, client, needs.private)
            if asked.signals.private:
                remembered = None
        kept = None if remembered is None else _kept(settings, remembered, needs, live)
        if kept is not None:
            order, route_kept = kept
            if remember:
                self.sticky.put(key, remembered)
            return Plan(request_id, api, conversation, check, order, STICKY, route_kept, sticky=True,
                        key=key if remember else None)
        private = needs.private
        asked = asked or await _ask(core, settings, text, client, private)
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
                                            _may_read(settings, core, settings.decision.shadow), needs, live,
                                            asked.signals,
                                            chosen.model, asked.provider))
        order = [(settings.model(m), settings.model(m).upstream, chosen.reasoning_effort) for m in chosen.order]
        rule = private_rule(settings, check.findings, asked.signals) if chosen.local_only else None
        return Plan(request_id, api, conversation, check, order, chosen.reason, chosen, asked,
                    decided_locally=bool(asked.provider) and core.stays_local(asked.provider),
                    key=key if remember else None, private_rule=rule)

    # -- forward -------------------------------------------------------------------------------
    async def answer(self, plan: Plan, body: dict[str, Any], headers: Mapping[str, str], client: str) -> Reply:
        """The plan's answer; a whole one is checked (and maybe escalated) where `[router.check]`
        applies, its verdicts asked of the borrowed core."""
        stream = plan.conversation.stream
        started = time.perf_counter()
        reserved = self.ledger.reserve(plan, body, self._live(self.settings))
        self.in_flight.acquire(plan.model)

        def done() -> None:
            self.in_flight.release(plan.model)
            self.spend.release(plan.model, reserved)

        try:
            forwarded = await forward(self.client, self.settings, plan.api, body, headers, plan.order, stream,
                                      self.slots)
        except AllBusy as exc:
            done()
            self.ledger.record(plan, client, None, time.perf_counter() - started, [])  # no model failed
            raise RouterError(503, "overloaded_error",
                              f"every candidate's upstream is at its connection limit: {exc}") from None
        except AllFailed as exc:
            done()
            self.ledger.fell_through(exc.failed)
            failed = [f"{a.model} ({a.why})" for a in exc.failed]
            self.ledger.record(plan, client, None, time.perf_counter() - started, exc.failed)
            rate_limited = all(a.why == "HTTP 429" for a in exc.failed)
            raise RouterError(429 if rate_limited else 502, "rate_limit_error" if rate_limited else "api_error",
                              f"every candidate failed: {exc}", failed) from None
        self.ledger.fell_through(forwarded.failed)
        if forwarded.stream is None:
            earlier, checks, unreached = [], [], []
            if plan.route is not None and applies(self.settings, stream, headers):
                earlier, forwarded, checks, unreached = await escalate(
                    self.client, self.slots, self.settings, self.ledger, plan, body, headers, forwarded,
                    judging(self.borrow, self.settings, plan, client))
            done()
            stay_with(self.sticky, plan, forwarded, earlier)
            self.ledger.finish(plan, client, forwarded, time.perf_counter() - started, earlier, checks, unreached)
            return Reply(forwarded.status, {**forwarded.headers, **plan.headers(forwarded, earlier, checks)},
                         forwarded.body)
        stay_with(self.sticky, plan, forwarded, [])
        reply_headers = {**forwarded.headers, **plan.headers(forwarded)}

        async def relay() -> AsyncIterator[bytes]:
            try:
                async for chunk in forwarded.stream:
                    yield chunk
            finally:  # also when the client hangs up: the upstream stream is closed with it
                await forwarded.stream.aclose()
                done()
                self.ledger.finish(plan, client, forwarded, time.perf_counter() - started)

        return Reply(forwarded.status, reply_headers, None, relay())


def passthrough(settings: RouterSettings, conversation: Conversation, check: PreCheck,
                live: Live) -> tuple[ModelEntry | None, str, str]:
    """The one model a client named, with its upstream, unless privacy or its budget forbids it."""
    model = settings.model(conversation.model)
    upstream = model.upstream if model else settings.passthrough_upstream
    if not upstream:
        known = ", ".join([*settings.aliases, *(m.id for m in settings.models)])
        raise RouterError(404, "not_found", f"model: {conversation.model!r} is not routed or configured; "
                                            f"known: {known}")
    if check.needs.private and settings.private == "local_only" and not settings.upstream_is_local(upstream):
        raise RouterError(403, "permission_error", "private prompt (" + ", ".join(check.findings) + ") may not "
                          f"reach {conversation.model!r}, whose upstream is not on this machine (private = \"local_only\")")
    refusal = over_budget(model, live, est_cost(model, check.needs.input_tokens, 0)) if model else ""
    if refusal:
        raise RouterError(429, "rate_limit_error", f"model: {conversation.model!r} is {refusal}")
    return model, upstream, ""


def stay_with(sticky: Sticky, plan: Plan, forwarded: Forwarded, earlier: Sequence[Forwarded]) -> None:
    """After a fall-through or an escalation, the conversation stays with the model that answered."""
    if (forwarded.failed or earlier) and plan.key is not None:
        models = [m.id for m, _, _ in plan.order if m is not None]
        sticky.put(plan.key, (forwarded.model, *(m for m in models if m != forwarded.model)))


def error_body(api: str, error: RouterError | RequestError) -> dict[str, Any]:
    """The error in the client's API's own shape, so its SDK raises its usual exception."""
    if isinstance(error, RequestError):
        kind, message = "invalid_request_error", error.message
    else:
        kind, message = error.kind, error.message
    if api == "anthropic":
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _may_read(settings: RouterSettings, core: Core, provider: str | None) -> bool:
    """Whether `provider` (None: the chain) may read the prompt: under local_only no prompt is
    known safe to send before the decision, so only an engine on this machine may."""
    return settings.private != "local_only" or core.stays_local(provider)


async def _ask(core: Core, settings: RouterSettings, text: str, client: str, private: bool) -> Asked:
    return await ask(core, settings, text, client, private,
                     _may_read(settings, core, provider_for(settings, private)))


def _each_turn_checked(settings: RouterSettings, remembered: tuple[str, ...], needs: Needs) -> bool:
    """Whether a kept conversation needs this turn's decision first: under local_only it may go on
    with a remote model only while each turn is known safe to send."""
    return settings.private == "local_only" and not needs.private \
        and not all(settings.is_local(settings.model(m)) for m in remembered)


def _kept(settings: RouterSettings, remembered: tuple[str, ...], needs: Needs,
          live: Live) -> tuple[list[tuple[ModelEntry | None, str, str]], Route] | None:
    """The conversation's model and its fall-through, as long as they can take this turn."""
    kept = route(settings, UNKNOWN, needs, live)
    usable = {c.id for c in kept.candidates if c.why in ("", BELOW_FLOOR)}
    if remembered[0] not in usable:
        return None
    models = [m for m in remembered if m in usable]
    return [(settings.model(m), settings.model(m).upstream, kept.reasoning_effort) for m in models], kept
