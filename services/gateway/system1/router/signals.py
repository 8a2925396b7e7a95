"""The one decision call: four typed questions about the prompt, through the gateway's core
(chain, lanes, calibration, learned heads), read back as the signals scoring needs.

- topic: a choice over the configured topics, with probabilities;
- complexity: a score 0..3, and risk: a score 0..2, each the expected level;
- private data: yes/no, read as "safe to send": under `private = "local_only"` a prompt may leave
  the machine only when the calibrated probability that it is private is below
  `max_leave_probability`. The question carries that bar as its own threshold, so where the
  fast stage is not that sure, the cascade's later stages (the local judge) are asked before
  the route is chosen; an answer still unsure, or none, keeps the prompt here.

Where the decision cannot be had (every engine failed, or the prompt may not reach the engine),
the signals say nothing with no confidence, which makes scoring play safe.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from dataclasses import replace
from typing import Protocol

from ..core.lanes import INTERACTIVE
from ..core.result import Decision
from ..providers.base import Query, head_and_tail
from ..core.router_config import COMPLEXITY_KIND, PRIVATE_KIND, RISK_KIND, TOPIC_KIND, RouterSettings
from .scoring import Signals

COMPLEXITY_LEVELS = (
    "trivial: a greeting, a one-line fact or a tiny edit",
    "routine: a small task with a clear answer",
    "substantial: several steps, real reasoning or debugging",
    "expert: deep reasoning, a design or a subtle bug across a system",
)
RISK_LEVELS = (
    "harmless: a wrong answer costs nothing",
    "annoying: a wrong answer costs some time to notice and fix",
    "damaging: a wrong answer could break production, lose data or money, or leak secrets",
)
TOPIC_QUESTION = "What is the main kind of work this request asks for?"
COMPLEXITY_QUESTION = "How much reasoning capability does this request need?"
RISK_QUESTION = "How costly would a wrong or low-quality answer be?"
PRIVATE_QUESTION = "Does the request contain secrets or personal or confidential data?"
#: Where nothing is known: mid-high complexity and risk (expected value: complexity as likely 3
#: as 2; the step rule: with no confidence, complexity rises a level).
UNKNOWN = Signals(topics={}, confidence=0.0, complexity=2, risk=1, complexity_p=(0.0, 0.0, 0.5, 0.5))


class Decider(Protocol):
    """The gateway core's `decide_many`, as the router calls it."""

    async def decide_many(self, state: object, queries: list[Query], client: str, priority: int = INTERACTIVE, *,
                          threshold: float = 0.0, only: str | None = None) -> list[Decision]: ...


class Core(Decider, Protocol):
    """The gateway core as the router borrows it: its decisions, and whether asking a provider
    (None: the chain) keeps a prompt on this machine."""

    def stays_local(self, provider: str | None) -> bool: ...


#: How the router borrows the core for one use (the service's core in use then, so a reload
#: never pulls it away mid-use): handed to the router once, used for every decision it asks.
Borrow = Callable[[], AbstractAsyncContextManager[Core]]


@dataclass(frozen=True)
class Asked:
    """What the decision call said and cost."""

    signals: Signals
    #: The provider that answered, or None when no engine was asked or none answered.
    provider: str | None
    latency_ms: float
    #: Why the signals are UNKNOWN, when they are.
    error: str | None = None


def questions(settings: RouterSettings) -> list[Query]:
    # Under local_only the private question must be sure either way, or be asked further.
    bar = 1.0 - settings.max_leave_probability if settings.private == "local_only" else None
    sure = settings.decision.min_confidence or None
    return [
        Query(TOPIC_QUESTION, [settings.topic_text(t) for t in settings.topics], kind=TOPIC_KIND,
              min_confidence=sure),
        Query(COMPLEXITY_QUESTION, list(COMPLEXITY_LEVELS), kind=COMPLEXITY_KIND, score=True, min_confidence=sure),
        Query(RISK_QUESTION, list(RISK_LEVELS), kind=RISK_KIND, score=True, min_confidence=sure),
        Query(PRIVATE_QUESTION, ["yes", "no"], yes_no=True, kind=PRIVATE_KIND, min_confidence=bar),
    ]


def private_by_decision(settings: RouterSettings, p_private: float | None) -> bool:
    """Whether the decision's probability (None: no answer) keeps a prompt private: under
    `local_only` unless it is known safe, under `prefer_local` once it is likely private."""
    if settings.private == "local_only":
        return p_private is None or p_private >= settings.max_leave_probability
    limit = settings.prefer_local_probability if settings.private == "prefer_local" else 0.5
    return p_private is not None and p_private >= limit


def unknown(settings: RouterSettings) -> Signals:
    """UNKNOWN, private where only a decision could have shown the prompt safe to send."""
    return replace(UNKNOWN, private=private_by_decision(settings, None))


def private_rule(settings: RouterSettings, findings: tuple[str, ...], signals: Signals) -> tuple[str, str] | None:
    """Which rule makes a prompt private, in a word and in a sentence (None: none does)."""
    if findings:
        return "pre-check", f"the pre-check found {', '.join(findings)}"
    if not signals.private:
        return None
    p = signals.p_private
    if p is None:
        return "no-decision", "no answer to the private question, so not known to be safe to send"
    if settings.private == "local_only":
        return "decision", (f"the probability that it is private, {p:.3f}, is not below "
                            f"max_leave_probability {settings.max_leave_probability:g}")
    return "decision", f"the probability that it is private, {p:.3f}, reaches prefer_local_probability " \
                       f"{settings.prefer_local_probability:g}"


def decision_state(text: str, limit: int) -> dict[str, str]:
    """What the engine is asked about: the judged prompt, as the context of a decide request
    would carry it (so labelled rows for `system1 learn` reproduce it exactly)."""
    return {"prompt": head_and_tail(text, limit)}


def expected_level(decision: Decision, levels: tuple[str, ...]) -> float | None:
    if not decision.probabilities:
        return None
    total = sum(decision.probabilities.values())
    if total <= 0:
        return None
    return sum(levels.index(level) * p for level, p in decision.probabilities.items()) / total


def level_probabilities(decision: Decision, levels: tuple[str, ...]) -> tuple[float, ...]:
    """Each level's probability, in level order (empty where the decision gave none)."""
    if not decision.probabilities or sum(decision.probabilities.values()) <= 0:
        return ()
    return tuple(float(decision.probabilities.get(level, 0.0)) for level in levels)


def signals_of(settings: RouterSettings, decisions: list[Decision]) -> tuple[Signals, str | None]:
    """The four decisions as signals; a question that got no probabilities takes UNKNOWN's value."""
    topic, complexity, risk, private = decisions
    texts = {settings.topic_text(t): t for t in settings.topics}
    failed = [d.error.message for d in decisions if d.error is not None]
    topics = {texts[option]: p for option, p in (topic.probabilities or {}).items() if option in texts}
    level = expected_level(complexity, COMPLEXITY_LEVELS)
    danger = expected_level(risk, RISK_LEVELS)
    p_private = (private.probabilities or {}).get("yes")
    signals = Signals(
        topics=topics,
        confidence=topic.confidence if topics and topic.confidence is not None else 0.0,
        complexity=UNKNOWN.complexity if level is None else level,
        risk=UNKNOWN.risk if danger is None else danger,
        complexity_p=level_probabilities(complexity, COMPLEXITY_LEVELS),
        risk_p=level_probabilities(risk, RISK_LEVELS),
        private=private_by_decision(settings, p_private),
        p_private=p_private,
        private_by=private_source(private) if p_private is not None and private.provider else "",
    )
    return signals, ("; ".join(dict.fromkeys(failed)) or None)


def private_source(decision: Decision) -> str:
    """The stage and engine that answered the private question, and the later stages asked
    that gave no answer (a judge that timed out leaves the fast stage's unsure answer, which
    keeps the prompt here; the report should say why the judge did not decide)."""
    source = f"stage {decision.stage or 1}: {decision.provider}"
    answered = max((i for i, a in enumerate(decision.attempts) if a.provider == decision.provider), default=-1)
    unanswered = [f"{a.provider} {a.outcome}" for a in decision.attempts[answered + 1:]
                  if a.outcome in ("timeout", "error", "malformed")]
    return f"{source} ({', '.join(unanswered)} after it)" if unanswered else source


def provider_for(settings: RouterSettings, private: bool) -> str | None:
    """The provider named for this prompt, or None for the gateway's chain."""
    decision = settings.decision
    if private and decision.private_provider:
        return decision.private_provider
    return decision.provider or None


async def ask(decider: Decider, settings: RouterSettings, text: str, client: str, private: bool,
              may_leave: bool, only: str | None = None, priority: int = INTERACTIVE) -> Asked:
    """The four questions about `text` in one decision call, of provider `only` or the one
    `provider_for` names; `may_leave` False keeps it on this machine (the caller has checked
    that provider, or the chain's first)."""
    if not may_leave:
        return Asked(unknown(settings), None, 0.0,
                     "the prompt may not reach a decision engine off this machine (private = \"local_only\")")
    started = time.perf_counter()
    decisions = await decider.decide_many(decision_state(text, settings.decision.chars), questions(settings), client,
                                          priority, threshold=0.0, only=only or provider_for(settings, private))
    latency_ms = (time.perf_counter() - started) * 1000
    signals, error = signals_of(settings, decisions)
    provider = next((d.provider for d in decisions if d.provider), None)
    return Asked(signals, provider, latency_ms, error)
