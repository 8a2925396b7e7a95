"""`system1 router refit`: each model's skill per topic, fitted from the router's logged outcomes.

The evidence, for every routed request in the decision log, under its main topic (the
decision's `signals.primary`; a turn that kept its conversation's model was not decided, so it
has no topic and is left out):

- each candidate that failed before the answer (a 429, a 5xx, no first byte in time): a failure
  (`upstream`);
- each checked answer: a success when its check passed, a failure when it failed (`check`; a
  check with no verdict says nothing);
- the answer the client got: "good" or "bad" feedback decides it (`feedback`, overriding its
  check); else a retry of its turn is a failure (`retry`); else, unchecked and older than the
  retry window, it is a success: nobody asked again (`accepted`).

The estimator is a Beta prior at the catalogue's skill s₀, worth `prior_strength` outcomes k:
with n outcomes of which w are successes, the skill is (k·s₀ + w) / (k + n). With few outcomes
the guess stands; with many, the measured rate of satisfactory answers.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..router.catalogue import RouterSettings

SOURCES = ("upstream", "check", "feedback", "retry", "accepted")


@dataclass
class Tally:
    successes: int = 0
    failures: int = 0
    sources: Counter = field(default_factory=Counter)

    @property
    def n(self) -> int:
        return self.successes + self.failures

    def add(self, success: bool, source: str) -> None:
        if success:
            self.successes += 1
        else:
            self.failures += 1
        self.sources[source] += 1


@dataclass(frozen=True)
class Fitted:
    model: str
    topic: str
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
             now: float | None = None) -> tuple[dict[tuple[str, str], Tally], Counter]:
    """Outcomes per (model, topic), and why requests gave none."""
    now = time.time() if now is None else now
    feedback, retried = _verdicts(outcomes)
    tallies: dict[tuple[str, str], Tally] = defaultdict(Tally)
    skipped: Counter = Counter()
    for entry in decisions:
        topic = (entry.get("signals") or {}).get("primary")
        if not topic:
            skipped["no topic (a sticky turn, or no decision)"] += 1
            continue
        for attempt in entry.get("failed") or []:
            if isinstance(attempt, dict) and attempt.get("model"):
                tallies[attempt["model"], topic].add(False, "upstream")
        answered = entry.get("model")
        if not answered:
            continue
        request_id = str(entry.get("id"))
        checks = [c for c in entry.get("checks") or [] if isinstance(c, dict) and c.get("p_yes") is not None]
        judged = request_id in feedback or request_id in retried  # the client's word outweighs the check's
        for check in checks:
            if check.get("model") != answered or not judged:
                tallies[check["model"], topic].add(bool(check.get("passed")), "check")
        if request_id in feedback:
            tallies[answered, topic].add(feedback[request_id] == "good", "feedback")
        elif request_id in retried:
            tallies[answered, topic].add(False, "retry")
        elif not any(c.get("model") == answered for c in checks):
            if now - float(entry.get("ts", now)) > retry_window_s:
                tallies[answered, topic].add(True, "accepted")
            else:
                skipped["too recent to count as accepted"] += 1
    return dict(tallies), skipped


def fit(catalogue: RouterSettings, current: RouterSettings, tallies: dict[tuple[str, str], Tally],
        prior_strength: float) -> list[Fitted]:
    """Every (model, topic) of the catalogue with outcomes, refitted from the catalogue's guess
    (never from an earlier refit, which would count the same outcomes twice); in catalogue order."""
    in_use = {m.id: m for m in current.models}
    fitted = []
    for model in catalogue.models:
        for topic in catalogue.topics:
            tally = tallies.get((model.id, topic))
            if tally is None or not tally.n:
                continue
            guess = model.skill(topic)
            new = (prior_strength * guess + tally.successes) / (prior_strength + tally.n)
            now = in_use[model.id].skill(topic) if model.id in in_use else guess
            fitted.append(Fitted(model.id, topic, guess, now, round(new, 3), tally))
    return fitted


def overlay(fitted: list[Fitted], prior_strength: float) -> dict[str, Any]:
    """The skills file for these refitted skills (it replaces any earlier one whole)."""
    skills: dict[str, dict[str, float]] = {}
    evidence: dict[str, dict[str, int]] = {}
    for f in fitted:
        skills.setdefault(f.model, {})[f.topic] = f.new
        evidence.setdefault(f.model, {})[f.topic] = f.tally.n
    return {"fitted_at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "prior_strength": prior_strength,
            "skills": skills, "evidence": evidence}


def render(fitted: list[Fitted], skipped: Counter, requests: int, prior_strength: float) -> str:
    lines = [f"{requests} routed requests read; skills refitted from the catalogue's guesses, each worth "
             f"{prior_strength:g} outcomes.", ""]
    if not fitted:
        lines.append("No outcomes for any model and topic of the catalogue yet.")
    else:
        lines += ["| model | topic | guess | now → refitted | outcomes (good / bad) | from |", "|---|---|---|---|---|---|"]
        for f in fitted:
            sources = ", ".join(f"{s} {f.tally.sources[s]}" for s in SOURCES if f.tally.sources[s])
            lines.append(f"| {f.model} | {f.topic} | {f.guess:.3f} | {f.current:.3f} → {f.new:.3f} | {f.tally.n} "
                         f"({f.tally.successes} / {f.tally.failures}) | {sources} |")
    for why, count in sorted(skipped.items()):
        lines.append(f"{count} requests left out: {why}.")
    return "\n".join(lines)

