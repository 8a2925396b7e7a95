"""`system1 router refit`: each model's skill per topic, fitted from the router's logged outcomes.

The evidence, for every routed request in the decision log (a turn that kept its
conversation's model was not decided, so it has no topic and is left out):

- each candidate that failed before the answer (a 429, a 5xx, no first byte in time): a failure
  (`upstream`);
- each checked answer: a success when its check passed, a failure when it failed (`check`; a
  check with no verdict says nothing);
- the answer the client got: "good" or "bad" feedback decides it (`feedback`, overriding its
  check); else a retry of its turn is a failure (`retry`); else, unchecked and older than the
  retry window, it is a success: nobody asked again (`accepted`).

Which topic an outcome tells about is not known, only the decision's probability of each
(`signals.topics`). So an outcome is shared among the request's topics in proportion to that
probability times how likely the topic's skill makes the outcome (a failure goes mostly to the
topic the model is weaker at), and the skills are estimated from those shares, again and again
until they settle: expectation-maximisation for a mixture with known weights. A request the
decision was sure about counts whole under its topic.

The estimator is a Beta prior at the catalogue's skill s₀, worth `prior_strength` outcomes k:
with n outcomes (the shares, added up) of which w are successes, the skill is
(k·s₀ + w) / (k + n). With few outcomes the guess stands; with many, the measured rate of
satisfactory answers.

The same fit runs a second time per topic and complexity level, the outcome shared by
P(topic) × P(level) (`signals.complexity_p`): the chance of a good answer the expected-value
rule reads (`RouterSettings.success`), its prior the catalogue's σ((skill − min_skill[level]) /
skill_width). A model good at easy debugging and poor at hard debugging is then told apart from
one middling at both, which one skill per topic cannot say.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..core.router_config import COMPLEXITY_LEVELS, ModelEntry, RouterSettings

SOURCES = ("upstream", "check", "feedback", "retry", "accepted")


@dataclass
class Tally:
    """Outcomes of one model on one topic, each counted by its share in the topic."""

    successes: float = 0.0
    failures: float = 0.0
    sources: Counter = field(default_factory=Counter)

    @property
    def n(self) -> float:
        return self.successes + self.failures

    def add(self, success: bool, source: str, share: float = 1.0) -> None:
        if success:
            self.successes += share
        else:
            self.failures += share
        self.sources[source] += share


@dataclass(frozen=True)
class Outcome:
    """One outcome of one model's answer, and the decision's topic probabilities for its request."""

    model: str
    topics: dict[str, float]
    success: bool
    source: str
    #: The decision's probability of each complexity level (empty: the log gave none).
    levels: dict[int, float] = field(default_factory=dict)


#: What a skill is fitted for: a topic, and a complexity level or None (the topic as a whole).
Key = tuple[str, int | None]


def count(value: float) -> str:
    """An outcome count as people read it: whole when it is, else to one decimal."""
    return f"{value:.0f}" if abs(value - round(value)) < 1e-9 else f"{value:.1f}"


#: A topic with less of a request's probability than this gets none of its outcomes.
MIN_SHARE = 0.05


def _normalised(probabilities: dict[Any, Any]) -> dict[Any, float]:
    """The probabilities of at least MIN_SHARE (numbers only), normalised; empty when none is."""
    kept = {k: float(p) for k, p in probabilities.items() if isinstance(p, int | float) and p >= MIN_SHARE}
    total = sum(kept.values())
    return {k: p / total for k, p in kept.items()} if total > 0 else {}


def topic_weights(signals: dict[str, Any]) -> dict[str, float]:
    """How a request's outcomes are shared among topics: the decision's probabilities of those
    with at least MIN_SHARE, normalised (its main topic alone when it logged none)."""
    primary = signals.get("primary")
    return _normalised(signals.get("topics") or {}) or ({primary: 1.0} if primary else {})


def level_weights(signals: dict[str, Any]) -> dict[int, float]:
    """How a request's outcomes are shared among complexity levels: the decision's
    probabilities of those with at least MIN_SHARE, normalised (the logged level alone when it
    logged none)."""
    logged, level = signals.get("complexity_p"), signals.get("complexity")
    return (_normalised(dict(enumerate(logged if isinstance(logged, list) else [])))
            or ({level: 1.0} if isinstance(level, int) and not isinstance(level, bool) else {}))


@dataclass(frozen=True)
class Fitted:
    model: str
    topic: str
    #: The complexity level fitted, or None for the topic's skill.
    level: int | None
    #: The catalogue's guess (the prior), the skill the router uses now, and the refitted one.
    guess: float
    current: float
    new: float
    tally: Tally


@dataclass
class Read:
    """Entries of JSONL files, and how many lines were not JSON objects."""

    entries: list[dict[str, Any]] = field(default_factory=list)
    unreadable: int = 0


def rotated(path: Path) -> list[Path]:
    """A log and its rotated backups (`path.1` is the newest backup), oldest first."""
    backups = sorted((p for p in path.parent.glob(path.name + ".*") if p.suffix[1:].isdigit()),
                     key=lambda p: int(p.suffix[1:]), reverse=True)
    return [*backups, *([path] if path.exists() else [])]


def read_logs(path: Path) -> Read:
    read = Read()
    for part in rotated(path):
        for line in part.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                entry = None
            if isinstance(entry, dict):
                read.entries.append(entry)
            elif line.strip():
                read.unreadable += 1
    return read


def _verdicts(outcomes: Iterable[dict[str, Any]]) -> tuple[dict[str, str], set[str]]:
    """The latest feedback per request id, and the ids whose answer was retried."""
    feedback: dict[str, str] = {}
    retried: set[str] = set()
    for entry in sorted(outcomes, key=lambda e: e.get("ts", 0)):
        if entry.get("source") == "feedback" and entry.get("outcome") in ("good", "bad"):
            feedback[str(entry.get("id"))] = entry["outcome"]
        elif entry.get("source") == "retry":
            retried.add(str(entry.get("id")))
    return feedback, retried


def evidence(decisions: Iterable[dict[str, Any]], outcomes: Iterable[dict[str, Any]], retry_window_s: float,
             now: float | None = None) -> tuple[list[Outcome], Counter]:
    """Every outcome the logs tell of, and why requests gave none."""
    now = time.time() if now is None else now
    feedback, retried = _verdicts(outcomes)
    found: list[Outcome] = []
    skipped: Counter = Counter()
    for entry in decisions:
        topics = topic_weights(entry.get("signals") or {})
        if not topics:
            skipped["no topic (a sticky turn, or no decision)"] += 1
            continue
        levels = level_weights(entry.get("signals") or {})

        def add(model: str, success: bool, source: str) -> None:
            found.append(Outcome(model, topics, success, source, levels))

        for attempt in entry.get("failed") or []:
            if isinstance(attempt, dict) and attempt.get("model"):
                add(attempt["model"], False, "upstream")
        answered = entry.get("model")
        if not answered:
            continue
        request_id = str(entry.get("id"))
        checks = [c for c in entry.get("checks") or [] if isinstance(c, dict) and c.get("p_yes") is not None]
        judged = request_id in feedback or request_id in retried  # the client's word outweighs the check's
        for check in checks:
            if check.get("model") != answered or not judged:
                add(check["model"], bool(check.get("passed")), "check")
        if request_id in feedback:
            add(answered, feedback[request_id] == "good", "feedback")
        elif request_id in retried:
            add(answered, False, "retry")
        elif not any(c.get("model") == answered for c in checks):
            if now - float(entry.get("ts", now)) > retry_window_s:
                add(answered, True, "accepted")
            else:
                skipped["too recent to count as accepted"] += 1
    return found, skipped


#: At most this many rounds of sharing outcomes and re-estimating skills, stopping once no skill
#: moves more than SETTLED.
ROUNDS = 50
SETTLED = 1e-4


def cells(outcome: Outcome, by_level: bool) -> dict[Key, float]:
    """What an outcome's request was, by the decision: its topics (by_level: topics and levels),
    each with its probability."""
    if not by_level:
        return {(t, None): p for t, p in outcome.topics.items()}
    return {(t, c): pt * pc for t, pt in outcome.topics.items() for c, pc in outcome.levels.items()}


def _shares(outcome: Outcome, by_level: bool, skill: Callable[[str, Key], float]) -> dict[Key, float]:
    """How much of `outcome` each of its request's cells takes: their probability times the
    likelihood of the outcome under `skill(model, key)`, normalised."""
    probabilities = cells(outcome, by_level)
    weights = {k: p * (skill(outcome.model, k) if outcome.success else 1 - skill(outcome.model, k))
               for k, p in probabilities.items()}
    total = sum(weights.values())
    return {k: (w / total if total > 0 else probabilities[k]) for k, w in weights.items()}


def tallies_for(outcomes: Iterable[Outcome], skill: Callable[[str, Key], float],
                by_level: bool = False) -> dict[tuple[str, Key], Tally]:
    """Outcomes per (model, key), each shared among its request's cells (`_shares`)."""
    tallies: dict[tuple[str, Key], Tally] = defaultdict(Tally)
    for outcome in outcomes:
        for key, share in _shares(outcome, by_level, skill).items():
            tallies[outcome.model, key].add(outcome.success, outcome.source, share)
    return dict(tallies)


def guessed(settings: RouterSettings, model: ModelEntry, key: Key) -> float:
    """What `settings` says of the model on a key: its skill on the topic, or its chance of
    success on the topic at the level."""
    topic, level = key
    return model.skill(topic) if level is None else settings.success(model, topic, level)


def fit(catalogue: RouterSettings, current: RouterSettings, outcomes: list[Outcome],
        prior_strength: float, by_level: bool = False) -> list[Fitted]:
    """Every (model, topic) of the catalogue with outcomes (by_level: every (model, topic,
    complexity level)), refitted from the catalogue's guess (never from an earlier refit, which
    would count the same outcomes twice); in catalogue order."""
    models = {m.id: m for m in catalogue.models}
    outcomes = [o for o in outcomes if o.model in models and (o.levels or not by_level)]
    skills: dict[tuple[str, Key], float] = {}

    def skill(model: str, key: Key) -> float:
        return skills.get((model, key), guessed(catalogue, models[model], key))

    tallies: dict[tuple[str, Key], Tally] = {}
    for _ in range(ROUNDS):  # the shares and the skills, in turn, until the skills settle
        tallies = tallies_for(outcomes, skill, by_level)
        before = skills
        skills = {(m, k): (prior_strength * guessed(catalogue, models[m], k) + tally.successes) / (prior_strength + tally.n)
                  for (m, k), tally in tallies.items() if prior_strength + tally.n > 0}
        if before and max(abs(v - before.get(k, v)) for k, v in skills.items()) < SETTLED:
            break
    in_use = {m.id: m for m in current.models}
    fitted = []
    for model in catalogue.models:
        for key in ([(t, c) for t in catalogue.topics for c in range(COMPLEXITY_LEVELS)] if by_level
                    else [(t, None) for t in catalogue.topics]):
            tally = tallies.get((model.id, key))
            if tally is None or not tally.n:
                continue
            now = guessed(current, in_use.get(model.id, model), key)
            fitted.append(Fitted(model.id, key[0], key[1], guessed(catalogue, model, key), now,
                                 round(skills[model.id, key], 3), tally))
    return fitted


def overlay(fitted: list[Fitted], prior_strength: float, by_level: list[Fitted] = ()) -> dict[str, Any]:
    """The skills file for these refitted skills and chances of success per level (it replaces
    any earlier one whole)."""
    skills: dict[str, dict[str, float]] = {}
    evidence: dict[str, dict[str, float]] = {}
    for f in fitted:
        skills.setdefault(f.model, {})[f.topic] = f.new
        evidence.setdefault(f.model, {})[f.topic] = round(f.tally.n, 2)
    success: dict[str, dict[str, dict[str, float]]] = {}
    success_evidence: dict[str, dict[str, dict[str, float]]] = {}
    for f in by_level:
        success.setdefault(f.model, {}).setdefault(f.topic, {})[str(f.level)] = f.new
        success_evidence.setdefault(f.model, {}).setdefault(f.topic, {})[str(f.level)] = round(f.tally.n, 2)
    return {"fitted_at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "prior_strength": prior_strength,
            "skills": skills, "evidence": evidence, "success": success, "success_evidence": success_evidence}


def _table(fitted: list[Fitted], by_level: bool) -> list[str]:
    level = " complexity |" if by_level else ""
    lines = [f"| model | topic |{level} guess | now → refitted | outcomes (good / bad) | from |",
             "|---|---|" + ("---|" if by_level else "") + "---|---|---|---|"]
    for f in fitted:
        sources = ", ".join(f"{s} {count(f.tally.sources[s])}" for s in SOURCES if f.tally.sources[s])
        lines.append(f"| {f.model} | {f.topic} |{f' {f.level} |' if by_level else ''} {f.guess:.3f} | {f.current:.3f} → "
                     f"{f.new:.3f} | {count(f.tally.n)} ({count(f.tally.successes)} / {count(f.tally.failures)}) | {sources} |")
    return lines


def render(fitted: list[Fitted], skipped: Counter, requests: int, prior_strength: float,
           by_level: list[Fitted] = ()) -> str:
    lines = [f"{requests} routed requests read; skills refitted from the catalogue's guesses, each worth "
             f"{prior_strength:g} outcomes.", ""]
    if not fitted:
        lines.append("No outcomes for any model and topic of the catalogue yet.")
    else:
        lines += _table(fitted, False)
    if by_level:
        lines += ["", "Chance of a good answer per topic and complexity level (what the expected-value rule reads):",
                  "", *_table(list(by_level), True)]
    for why, left_out in sorted(skipped.items()):
        lines.append(f"{left_out} requests left out: {why}.")
    return "\n".join(lines)

