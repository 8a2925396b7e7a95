"""Every Prometheus metric of the gateway, declared in one place.

Labels come only from bounded sets: provider names from the registry (or `none`), the status,
outcome and abstention-reason enums, and client names listed in `[service] clients` (everyone
else is `other`). No request ids or text ever become labels.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    disable_created_metrics,
    generate_latest,
)

from .. import __version__
from ..core.events import Observer
from ..core.result import Decision

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64)
CONFIDENCE_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0)
CONTENT_TYPE = CONTENT_TYPE_LATEST
OTHER = "other"
CIRCUIT_STATES = {"closed": 0, "open": 1, "half-open": 2}

# `*_created` series double the output and no dashboard here reads them.
disable_created_metrics()


class Metrics(Observer):
    def __init__(self, clients: Iterable[str] = ()) -> None:
        self.clients = frozenset(clients)
        self._children: dict[tuple, Any] = {}
        r = self.registry = CollectorRegistry()
        self.decisions = Counter("system1_decisions", "Decisions answered, by provider and status.",
                                 ["provider", "status"], registry=r)
        self.latency = Histogram("system1_decision_seconds", "End-to-end decision latency.",
                                 buckets=LATENCY_BUCKETS, registry=r)
        self.attempts = Counter("system1_attempts", "Provider attempts, by outcome.",
                                ["provider", "outcome"], registry=r)
        self.pass_latency = Histogram("system1_engine_pass_seconds", "Latency of one engine pass.",
                                      ["provider"], buckets=LATENCY_BUCKETS, registry=r)
        self.batch_size = Histogram("system1_engine_batch_size", "Requests carried by one engine pass.",
                                    ["provider"], buckets=BATCH_BUCKETS, registry=r)
        self.queue_depth = Gauge("system1_lane_queue_depth", "Requests waiting in a provider's lane.",
                                 ["provider"], registry=r)
        self.in_flight = Gauge("system1_lane_in_flight", "Engine passes in flight in a provider's lane.",
                               ["provider"], registry=r)
        self.engine_up_gauge = Gauge("system1_engine_up", "1 when the last health probe of the engine passed.",
                                     ["provider"], registry=r)
        self.abstentions = Counter("system1_abstentions", "Abstentions, by reason.", ["reason"], registry=r)
        self.calibrated = Counter("system1_calibrated_decisions",
                                  "Answers by the calibration that applied: question, options, unseen, head or none.",
                                  ["provider", "fit"], registry=r)
        self.head_decisions = Counter("system1_head_decisions", "Answers given by a learned head, by kind.",
                                      ["kind"], registry=r)
        self.reworded_decisions = Counter("system1_reworded_decisions",
                                          "Reworded questions asked as a head's own question, by how: same or "
                                          "opposite (the answer turned back).", ["read_as"], registry=r)
        self.stage_decisions = Counter("system1_stage_decisions",
                                       "Decisions by the cascade stage that gave them (1: the chain) and status.",
                                       ["stage", "status"], registry=r)
        self.confidence = Histogram("system1_confidence", "Confidence of answered decisions.",
                                    buckets=CONFIDENCE_BUCKETS, registry=r)
        self.client_decisions = Counter("system1_client_decisions", "Decisions per configured client.",
                                        ["client"], registry=r)
        self.circuit_state = Gauge("system1_circuit_state", "A provider's circuit: 0 closed, 1 open, 2 half-open.",
                                   ["provider"], registry=r)
        self.mcp_sessions = Gauge("system1_mcp_sessions", "Open MCP sessions over /mcp.", registry=r)
        self.overloaded = Counter("system1_overloaded", "Requests turned away because every lane was full.",
                                  registry=r)
        # The router: model labels are catalogue ids (a passed-through name is "passthrough").
        self.router_requests = Counter("system1_router_requests", "Chat requests answered, by model and reason.",
                                       ["model", "reason"], registry=r)
        self.router_decision_latency = Histogram("system1_router_decision_seconds",
                                                 "The router's four-question decision, by provider.", ["provider"],
                                                 buckets=LATENCY_BUCKETS, registry=r)
        self.router_upstream_latency = Histogram("system1_router_upstream_seconds",
                                                 "Upstream answers (to their end, streams included), by model and status.",
                                                 ["model", "status"], buckets=LATENCY_BUCKETS, registry=r)
        self.router_fall_throughs = Counter("system1_router_fall_throughs",
                                            "Candidates skipped on a 429, a 5xx or no answer in time.", ["model"],
                                            registry=r)
        self.router_cost = Counter("system1_router_cost_usd", "US dollars spent, from upstream usage.", ["model"],
                                   registry=r)
        self.router_spent_today = Gauge("system1_router_spent_today_usd", "US dollars spent today (UTC).", ["model"],
                                        registry=r)
        self.router_budget = Gauge("system1_router_daily_budget_usd", "A model's daily budget.", ["model"], registry=r)
        self.router_shadow = Counter("system1_router_shadow_agreement",
                                     "Shadow decisions agreeing (or not) with the decision, by signal and routed model.",
                                     ["signal", "model", "agreed"], registry=r)
        self.router_shadow_skipped = Counter("system1_router_shadow_skipped",
                                             "Shadow decisions not made: queue_full, private or error.", ["why"],
                                             registry=r)
        self.router_checks = Counter("system1_router_checks",
                                     "Answers checked, by model and verdict: pass, fail or none (no verdict).",
                                     ["model", "verdict"], registry=r)
        self.router_escalations = Counter("system1_router_escalations",
                                          "Requests sent on to a stronger model after a failed check, by model and target.",
                                          ["model", "to"], registry=r)
        self.build = Info("system1_build", "Gateway build.", registry=r)
        self.build.info({"version": __version__})

    def client_label(self, client: str) -> str:
        return client if client in self.clients else OTHER

    # -- Observer ----------------------------------------------------------------------------
    def _child(self, metric: Any, *labels: str) -> Any:
        """`metric.labels(*labels)`, remembered: prometheus_client validates and locks on every
        lookup, and these run several times per decision."""
        key = (metric, labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def decision(self, decision: Decision, client: str, seconds: float) -> None:
        self._child(self.decisions, decision.provider or "none", decision.status).inc()
        self.latency.observe(seconds)
        self._child(self.client_decisions, self.client_label(client)).inc()
        if decision.abstain_reason is not None:
            self._child(self.abstentions, decision.abstain_reason).inc()
        if decision.calibration is not None:
            self._child(self.calibrated, decision.provider, decision.calibration).inc()
        if decision.head is not None:
            self._child(self.head_decisions, decision.head).inc()
        if decision.read_as is not None:
            self._child(self.reworded_decisions, decision.read_as).inc()
        if decision.status != "error":
            self._child(self.stage_decisions, str(decision.stage), decision.status).inc()
        if decision.confidence is not None:
            self.confidence.observe(decision.confidence)
        if decision.retry_after_s is not None:
            self.overloaded.inc()

    def attempt(self, provider: str, outcome: str) -> None:
        self._child(self.attempts, provider, outcome).inc()

    def engine_pass(self, provider: str, size: int, seconds: float) -> None:
        self._child(self.pass_latency, provider).observe(seconds)
        self._child(self.batch_size, provider).observe(size)

    def lane(self, provider: str, queued: int, in_flight: int) -> None:
        self._child(self.queue_depth, provider).set(queued)
        self._child(self.in_flight, provider).set(in_flight)

    def circuit(self, provider: str, state: str) -> None:
        self._child(self.circuit_state, provider).set(CIRCUIT_STATES[state])

    def engine_up(self, provider: str, ok: bool) -> None:
        self._child(self.engine_up_gauge, provider).set(1 if ok else 0)

    # -- RouterObserver ----------------------------------------------------------------------
    def routed(self, model: str, reason: str) -> None:
        self._child(self.router_requests, model, reason).inc()

    def router_decision(self, provider: str, seconds: float) -> None:
        self._child(self.router_decision_latency, provider).observe(seconds)

    def upstream(self, model: str, status: str, seconds: float) -> None:
        self._child(self.router_upstream_latency, model, status).observe(seconds)

    def fell_through(self, model: str) -> None:
        self._child(self.router_fall_throughs, model).inc()

    def spent(self, model: str, usd: float, today_usd: float, budget_usd: float | None) -> None:
        self._child(self.router_cost, model).inc(usd)
        self._child(self.router_spent_today, model).set(today_usd)
        if budget_usd is not None:
            self._child(self.router_budget, model).set(budget_usd)

    def shadow_agreement(self, signal: str, model: str, agreed: bool) -> None:
        self._child(self.router_shadow, signal, model, "true" if agreed else "false").inc()

    def shadow_skipped(self, why: str) -> None:
        self._child(self.router_shadow_skipped, why).inc()

    def checked(self, model: str, verdict: str) -> None:
        self._child(self.router_checks, model, verdict).inc()

    def escalated(self, model: str, to: str) -> None:
        self._child(self.router_escalations, model, to).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
