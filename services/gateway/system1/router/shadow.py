"""The shadow engine: the same four questions asked of a second provider once a request is
planned, off the request's path.

A bounded queue feeds one worker; when it is full the newest job is dropped (and counted), so
the shadow never slows a request or piles up behind a slow engine. For each job it compares the
shadow's signals with the decision's, per signal (topic, complexity and risk as the levels
scoring uses, private) and on the model the shadow's signals would have routed to, counts the
agreement and writes a line to the shadow log.

With `[router] log_prompts`, and for prompts in which the pre-check found nothing private, the
line also holds the judged text and the shadow's answers as labelled rows (the `system1 learn`
format, one per question): the shadow is then a teacher for the decision engine's heads.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..core.jsonl import RotatingJsonl
from ..core.router_config import RouterSettings
from .scoring import Live, Needs, Signals, levels, route
from .signals import COMPLEXITY_LEVELS, RISK_LEVELS, Asked, decision_state, questions

logger = logging.getLogger(__name__)
SIGNALS = ("topic", "complexity", "risk", "private")


class ShadowObserver(Protocol):
    def shadow_agreement(self, signal: str, model: str, agreed: bool) -> None: ...
    def shadow_skipped(self, why: str) -> None: ...


@dataclass(frozen=True)
class ShadowJob:
    request_id: str
    client: str
    #: The prompt's text, as the decision judged it (before `decision.chars` cuts it).
    text: str
    #: The pre-check found private data: no text or rows reach the log.
    private: bool
    #: Whether the shadow provider may see this prompt (`private = "local_only"`).
    may_ask: bool
    needs: Needs
    live: Live
    signals: Signals
    model: str
    provider: str | None


Asker = Callable[[ShadowJob], Awaitable[Asked]]


def summary(settings: RouterSettings, signals: Signals, model: str | None) -> dict[str, Any]:
    complexity, risk = levels(settings, signals)
    return {"topic": signals.primary or None, "confidence": round(signals.confidence, 4), "complexity": complexity,
            "risk": risk, "private": signals.private, "model": model}


def agreement(settings: RouterSettings, job: ShadowJob, shadow: Signals) -> tuple[dict[str, bool], str | None]:
    """Per signal and on the model, whether the shadow agrees; and the model its signals route to."""
    ours, theirs = summary(settings, job.signals, job.model), summary(settings, shadow, None)
    model = route(settings, shadow, job.needs, job.live).model
    return {**{s: ours[s] == theirs[s] for s in SIGNALS}, "model": model == job.model}, model


def learn_rows(settings: RouterSettings, text: str, shadow: Signals) -> list[dict[str, Any]]:
    """The shadow's answers as labelled rows: question, options, context, label, kind."""
    topic, complexity, risk, private = questions(settings)
    context = decision_state(text, settings.decision.chars)
    labels = [
        (topic, settings.topic_text(shadow.primary) if shadow.primary else None),
        (complexity, COMPLEXITY_LEVELS[min(len(COMPLEXITY_LEVELS) - 1, max(0, round(shadow.complexity)))]),
        (risk, RISK_LEVELS[min(len(RISK_LEVELS) - 1, max(0, round(shadow.risk)))]),
        (private, "yes" if shadow.private else "no"),
    ]
    rows = []
    for query, label in labels:
        if label is None:
            continue
        row = {"question": query.question, "context": context, "label": label, "kind": query.kind}
        if not query.yes_no:
            row["options"] = list(query.choices)
        rows.append(row)
    return rows


class Shadow:
    def __init__(self, observer: ShadowObserver) -> None:
        self.observer = observer
        self.settings: RouterSettings | None = None
        self.log: RotatingJsonl | None = None
        self._queue: asyncio.Queue[ShadowJob] | None = None
        self._task: asyncio.Task | None = None
        self._asker: Asker | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.settings and self.settings.enabled and self.settings.decision.shadow)

    def configure(self, settings: RouterSettings, install_dir: Path) -> None:
        self.settings = settings
        decision = settings.decision
        path = decision.shadow_log_path(install_dir)
        if self.log is not None and (self.log.path != path or not self.enabled):
            self.log.close()
            self.log = None
        if self.enabled and self.log is None:
            self.log = RotatingJsonl(path, settings.log_max_bytes, settings.log_backups)
        if self._queue is not None and self._queue.maxsize != decision.shadow_queue:
            # A new size: a new queue and worker; the jobs waiting in the old one are let go.
            if self._task is not None:
                self._task.cancel()
                self._task = None
            self._queue = None
        if self.enabled and self._asker is not None:
            self._ensure_worker()

    def start(self, asker: Asker) -> None:
        """Begin serving jobs (inside the event loop), asking through `asker`."""
        self._asker = asker
        if self.enabled:
            self._ensure_worker()

    def offer(self, job: ShadowJob) -> None:
        if not self.enabled or self._task is None:
            return
        if not job.may_ask:
            self.observer.shadow_skipped("private")
            return
        try:
            self._jobs().put_nowait(job)
        except asyncio.QueueFull:
            self.observer.shadow_skipped("queue_full")

    async def drain(self) -> None:
        """Wait until every offered job has been answered (for tests and shutdown)."""
        if self._queue is not None and self._task is not None:
            await self._queue.join()

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self.log is not None:
            self.log.close()
            self.log = None

    def _jobs(self) -> asyncio.Queue[ShadowJob]:
        if self._queue is None:
            self._queue = asyncio.Queue(self.settings.decision.shadow_queue if self.settings else 64)
        return self._queue

    def _ensure_worker(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._work())

    async def _work(self) -> None:
        queue = self._jobs()
        while True:
            job = await queue.get()
            try:
                await self._one(job)
            except Exception:  # one job's failure must not stop the shadow
                logger.exception("router: the shadow decision for %s failed", job.request_id)
            finally:
                queue.task_done()

    async def _one(self, job: ShadowJob) -> None:
        settings = self.settings
        if settings is None or self._asker is None or not self.enabled:
            return
        asked = await self._asker(job)
        entry: dict[str, Any] = {"ts": round(time.time(), 3), "id": job.request_id, "client": job.client,
                                 "primary": {"provider": job.provider, **summary(settings, job.signals, job.model)}}
        if asked.provider is None or asked.error:
            self.observer.shadow_skipped("error")
            entry["shadow"] = {"provider": settings.decision.shadow, "error": asked.error or "no answer"}
        else:
            agreed, model = agreement(settings, job, asked.signals)
            for signal, same in agreed.items():
                self.observer.shadow_agreement(signal, job.model, same)
            entry["shadow"] = {"provider": asked.provider, "ms": round(asked.latency_ms, 1),
                               **summary(settings, asked.signals, model)}
            entry["agree"] = agreed
            if settings.log_prompts and not job.private:
                entry["prompt"] = job.text
                entry["rows"] = learn_rows(settings, job.text, asked.signals)
        if self.log is not None:
            self.log.write(entry)


def shadow_report(entries: list[dict[str, Any]]) -> str:
    """Agreement per signal, overall and per routed model, and where the shadow would have routed
    elsewhere (`system1 router shadow`)."""
    compared = [e for e in entries if isinstance(e.get("agree"), dict)]
    failed = sum(1 for e in entries if isinstance(e.get("shadow"), dict) and e["shadow"].get("error"))
    if not compared:
        return f"No shadow decisions compared yet ({failed} failed)."
    columns = (*SIGNALS, "model")

    def row(name: str, group: list[dict[str, Any]]) -> str:
        shares = [sum(bool(e["agree"].get(c)) for e in group) / len(group) for c in columns]
        return f"| {name} | {len(group)} | " + " | ".join(f"{share:.0%}" for share in shares) + " |"

    by_model: dict[str, list[dict[str, Any]]] = {}
    moved: dict[tuple[str, str], int] = {}
    for e in compared:
        ours, theirs = e["primary"].get("model") or "none", e["shadow"].get("model") or "none"
        by_model.setdefault(ours, []).append(e)
        if ours != theirs:
            moved[ours, theirs] = moved.get((ours, theirs), 0) + 1
    lines = [f"{len(compared)} decisions compared with the shadow ({failed} shadow decisions failed).", "",
             "| routed model | decisions | " + " | ".join(columns) + " agree |", "|---" * (len(columns) + 2) + "|",
             row("all", compared), *(row(model, group) for model, group in sorted(by_model.items()))]
    if moved:
        lines += ["", "Where the shadow's signals would have routed elsewhere:", "", "| routed | shadow's route | decisions |",
                  "|---|---|---|", *(f"| {a} | {b} | {n} |" for (a, b), n in sorted(moved.items(), key=lambda kv: -kv[1]))]
    return "\n".join(lines)
