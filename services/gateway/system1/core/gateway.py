"""The core: validate a request, ask the chain, calibrate, apply the threshold, and say so.

- Every answer leaves as a `Decision`; nothing here raises to the caller.
- An engine's abstention is an answer (no fallback); a confidence under the threshold
  abstains with the reason.
- While paused, every decision abstains and says so.
- One log line per decision, with the request id.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..providers import REGISTRY
from ..providers.base import EngineAnswer, EngineError, Provider, Query, context_text
from .calibration import LOCAL_FITS_NAME, Baselines, Calibrator, Fit, content_free, correct, temper
from .chain import Chain, ChainAnswer, ms
from .config import LoadedConfig
from .events import Observer
from .heads import LOCAL_HEADS_NAME, Head, Heads, kind_of
from .labels import STORE_NAME, LabelStore, UnknownDecision
from .health import HealthMonitor
from .lanes import INTERACTIVE, Lane
from .logs import log_decision, request_id_var
from .result import Decision
from .schema import MAX_OPTIONS, Attempt, ErrorCode, RequestError, new_request_id, parse_request
from .work import over_budget, work_of

logger = logging.getLogger(__name__)


class EmbedderUnavailable(Exception):
    """No embedder is configured, or it failed or did not answer in time."""


class LabelsOff(Exception):
    """Feedback came, but this gateway remembers no decisions to label."""

PAUSE_FILE = "paused"
# What the rationale says about calibration, by the kind of fit that applied.
CALIBRATION_NOTES = {
    "question": "confidence calibrated by this question's fit",
    "options": "confidence calibrated by the fit for this many options",
    "unseen": "confidence calibrated by the engine's fit for questions it has no fit for",
    "none": "confidence uncalibrated: no fit for this engine and question",
    "no_baseline": "confidence uncalibrated: the engine's answer to an empty context, which this engine's fits "
                   "need, could not be had",
}
CONTENT_FREE_NOTE = ", after dividing out the engine's answer to an empty context"
PAUSED_RATIONALE = "System-1 is paused (`system1 toggle on` resumes it): reason it through yourself."


class Gateway:
    """One core per configuration: the providers, their lanes, the chain, calibration, health."""

    def __init__(
        self,
        config: LoadedConfig,
        providers: Mapping[str, Provider] | None = None,
        calibrator: Calibrator | None = None,
        observer: Observer | None = None,
        heads: Heads | None = None,
    ) -> None:
        self.config = config
        self._pause_path = str(self.pause_file)
        self.errors = list(config.errors)
        self.observer = observer or Observer()
        self.providers: dict[str, Provider] = dict(providers or {})
        if not self.errors and providers is None:
            self._build_providers()
        gateway = config.settings.gateway
        self.lanes = {name: Lane(p, self.observer, gateway.max_work) for name, p in self.providers.items()}
        names = [n for n in config.settings.chain if n in self.providers]
        self.chain = Chain(names, self.providers, self.lanes, gateway.timeout_s, self.observer)
        self.monitor = HealthMonitor(config.settings.chain, self.providers, self.lanes, self.chain.breakers,
                                     gateway.timeout_s, self.observer)
        self.calibrator = calibrator or Calibrator.load(config.learned_dir / LOCAL_FITS_NAME)
        self.baselines = Baselines()
        self.heads = heads or Heads.load(config.learned_dir / LOCAL_HEADS_NAME)
        learning = config.settings.learning
        self.embedder = self.providers.get(learning.embedder) if learning.enabled else None
        collecting = learning.collect or bool(learning.collect_kinds)
        self.labels = LabelStore(config.install_dir / STORE_NAME, learning.store_max_decisions) if collecting else None

    def _build_providers(self) -> None:
        """Every configured provider (the config validated them all): the chain's, the
        embedder, and any other, which can be asked by name (`system1 evaluate --provider`)."""
        settings = self.config.settings
        for name in dict.fromkeys([*settings.chain, *settings.providers]):
            try:
                self.providers[name] = REGISTRY[name](settings.options_for(name))
            except ValueError as exc:
                self.errors.append(f"[providers.{name}]: {exc}")

    def check_askable(self, name: str) -> None:
        """`RequestError` unless `name` is a provider this gateway can ask by name."""
        if name in self.providers:
            return
        reason = (f"no [providers.{name}] in the config" if name in REGISTRY
                  else f"unknown provider; available: {', '.join(REGISTRY)}")
        raise RequestError(f"provider: {name!r} cannot be asked: {reason}")

    @property
    def pause_file(self) -> Path:
        return self.config.install_dir / PAUSE_FILE

    @property
    def paused(self) -> bool:
        return os.path.exists(self._pause_path)  # asked on every decision: no pathlib on this path

    def max_options(self) -> int:
        """The primary engine's option limit, within the schema's own."""
        provider = self.providers.get(self.config.settings.gateway.provider)
        limit = provider.capabilities().max_options if provider else None
        return MAX_OPTIONS if limit is None else min(limit, MAX_OPTIONS)

    def _collects(self, query: Query) -> bool:
        learning = self.config.settings.learning
        kinds = {query.kind, kind_of(query.question, query.choices, None, query.yes_no)}
        return learning.collect or bool(kinds & set(learning.collect_kinds))

    async def aclose(self) -> None:
        if self.labels is not None:
            self.labels.close()
        await asyncio.gather(*(lane.aclose() for lane in self.lanes.values()), return_exceptions=True)
        await asyncio.gather(*(p.aclose() for p in self.providers.values()), return_exceptions=True)

    # -- answering ---------------------------------------------------------------------------
    async def decide(
        self, payload: Any, client: str = "local", priority: int = INTERACTIVE, calibrate: bool = True
    ) -> Decision:
        """Answer one raw `system1_decide` request. `calibrate=False` leaves the engine's
        probabilities as they are (for fitting new temperatures)."""
        started = time.perf_counter()
        try:
            request = parse_request(payload)
        except RequestError as exc:
            decision = Decision.failed(ErrorCode.INVALID_REQUEST, exc.message, exc.request_id)
        else:
            token = request_id_var.set(request.request_id or new_request_id())
            try:
                logger.debug("question %r options %r", request.question, request.options)
                query = Query(request.question, request.choices, request.options is None, request.kind)
                threshold = request.min_confidence
                if threshold is None:
                    threshold = self.config.settings.gateway.min_confidence
                [decision] = await self.decide_many(request.context, [query], client, priority, threshold=threshold,
                                                    calibrate=calibrate, request_id=request_id_var.get())
                if decision.provider is not None and self.labels is not None and self._collects(query):
                    await asyncio.to_thread(self.labels.remember, decision.request_id, request.kind, request.question,
                                            request.options, request.context, decision.decision)
            finally:
                request_id_var.reset(token)
        decision.latency_ms = ms(time.perf_counter() - started)
        log_decision(decision, client)
        for attempt in decision.attempts:
            self.observer.attempt(attempt.provider, attempt.outcome)
        self.observer.decision(decision, client, time.perf_counter() - started)
        return decision

    async def decide_many(
        self,
        state: Any,
        queries: list[Query],
        client: str,
        priority: int = INTERACTIVE,
        budget_s: float | None = None,
        threshold: float = 0.0,
        calibrate: bool = True,
        request_id: str | None = None,
        only: str | None = None,
    ) -> list[Decision]:
        """Every question about one text, in one engine pass where the engine can, each
        checked, calibrated and held to `threshold`; asked of the chain, or of provider `only`."""
        request_id = request_id or new_request_id()
        if self.paused:
            return [Decision(request_id, "abstained", rationale=PAUSED_RATIONALE, abstain_reason="paused")
                    for _ in queries]
        if self.errors:
            return [Decision.failed(ErrorCode.CONFIG_ERROR, "; ".join(self.errors), request_id) for _ in queries]
        work = work_of(state, queries)
        refusal = over_budget(work, self.config.settings.gateway.max_work)
        if refusal:
            return [Decision.failed(ErrorCode.INVALID_REQUEST, refusal, request_id) for _ in queries]
        loop = asyncio.get_running_loop()
        deadline = None if budget_s is None else loop.time() + budget_s
        heads = [self._heads_for(q) if calibrate else [] for q in queries]
        if self.embedder is not None and self.embedder.name in self.chain.names:
            # Where the embedder may be the one answering, one pass can carry the embedding too.
            queries = [replace(q, embed=True) if found else q for q, found in zip(queries, heads)]
        answer = await self.chain.ask(state, queries, client, priority, budget_s, work, only=only)
        if answer.answers is None or answer.provider is None:
            return [self._failed(request_id, answer) for _ in queries]
        learned = await self._learned(state, queries, heads, answer.provider, answer.answers,
                                      None if deadline is None else deadline - loop.time())
        fits = [self._fit(answer.provider, reply, query, state) if calibrate and not head else None
                for reply, query, head in zip(answer.answers, queries, learned)]
        baselines = await self._baselines(state, queries, answer.provider, answer.answers, fits, client, priority,
                                          None if deadline is None else deadline - loop.time())
        return [self._conclude(request_id, answer.attempts, answer.provider, reply, threshold, calibrate, fit, baseline,
                               head)
                for reply, fit, baseline, head in zip(answer.answers, fits, baselines, learned)]

    def feedback(self, payload: Any, source: str) -> dict[str, Any]:
        """Label a remembered decision: `RequestError` for a bad body, an unknown request id or a
        label that is not among its options; `LabelsOff` when nothing is collected."""
        if self.labels is None:
            raise LabelsOff("no decisions are remembered: set [learning] collect or collect_kinds")
        if not isinstance(payload, dict) or set(payload) - {"request_id", "label"}:
            raise RequestError("feedback: the body must be {\"request_id\", \"label\"}")
        request_id, label = payload.get("request_id"), payload.get("label")
        if not isinstance(request_id, str) or not request_id.strip():
            raise RequestError("request_id: must be a non-empty string")
        if not isinstance(label, str) or not label.strip():
            raise RequestError("label: must be a non-empty string")
        try:
            return self.labels.label(request_id, label, source)
        except UnknownDecision:
            raise RequestError(f"request_id: no remembered decision {request_id!r} (not collected, or forgotten)") from None
        except ValueError as exc:
            raise RequestError(f"label: {exc}") from None

    def labelled(self) -> list[dict[str, Any]]:
        """The labelled decisions, as `learn` rows."""
        return self.labels.labelled() if self.labels is not None else []

    async def embed(self, payload: Any) -> dict[str, Any]:
        """For `system1 learn`: the embedder's vector of a decide request's judged text, with its
        kind. `RequestError` for a bad request; `EmbedderUnavailable` when none answers."""
        request = parse_request(payload)
        if self.embedder is None:
            raise EmbedderUnavailable("learning is off or [learning] embedder is not configured")
        query = Query(request.question, request.choices, request.options is None, request.kind)
        model, vector = await self._embed(self.embedder, request.context, query, self.config.settings.gateway.timeout_s)
        return {"embedder": self.embedder.name, "model": model, "embedding": vector,
                "kind": kind_of(query.question, query.choices, query.kind, query.yes_no)}

    @staticmethod
    async def _embed(embedder: Provider, state: Any, query: Query, timeout_s: float) -> tuple[str, list[float]]:
        """The embedder's model and vector, bounded by `timeout_s`; any failure (an adapter bug
        included, as in the chain) is `EmbedderUnavailable` naming it."""
        try:
            return await asyncio.wait_for(embedder.embed(state, query, timeout_s), timeout_s)
        except TimeoutError:
            raise EmbedderUnavailable(f"the embedder {embedder.name} did not answer within {timeout_s:g} s") from None
        except EngineError as exc:
            raise EmbedderUnavailable(str(exc)) from None
        except Exception as exc:
            logger.exception("embedder %s failed", embedder.name)
            raise EmbedderUnavailable(f"the embedder {embedder.name} failed ({type(exc).__name__})") from None

    def _heads_for(self, query: Query) -> list[Head]:
        if self.embedder is None:
            return []
        return self.heads.candidates(kind_of(query.question, query.choices, query.kind, query.yes_no),
                                     self.embedder.name, query.choices)

    async def _learned(
        self, state: Any, queries: list[Query], candidates: list[list[Head]], name: str, replies: list[EngineAnswer],
        budget_s: float | None,
    ) -> list[tuple[Head, dict[str, float]] | None]:
        """For each query with `candidates` (the heads for its kind): the head and its
        probabilities, when the embedding came with the answer (the embedder answered) or the
        embedder gives it in time, for the head's model; else None (the engine's answer stands,
        never worse than without)."""
        found: list[tuple[Head, dict[str, float]] | None] = [None] * len(queries)
        if self.embedder is None:
            return found
        timeout_s = self.config.settings.gateway.timeout_s
        if budget_s is not None:
            timeout_s = min(timeout_s, budget_s)
        for index, (query, reply, heads) in enumerate(zip(queries, replies, candidates)):
            if not heads or reply.abstain:
                continue
            if name == self.embedder.name and reply.embedding is not None:
                model, vector = reply.model, reply.embedding
            elif timeout_s <= 0:
                continue
            else:
                try:
                    model, vector = await self._embed(self.embedder, state, query, timeout_s)
                except EmbedderUnavailable as exc:
                    logger.warning("the engine's answer stands: %s", exc)
                    continue
            head = next((h for h in heads if h.model == model), None)
            probabilities = head.probabilities(vector) if head else None
            if head is not None and probabilities is not None:
                found[index] = (head, probabilities)
        return found

    @staticmethod
    def _failed(request_id: str, found: ChainAnswer) -> Decision:
        code, message = found.failure
        decision = Decision.failed(code, message, request_id, list(found.attempts))
        decision.retry_after_s = found.retry_after_s
        return decision

    async def _baselines(
        self, state: Any, queries: list[Query], name: str, replies: list[EngineAnswer], fits: list[Fit | None],
        client: str, priority: int, budget_s: float | None,
    ) -> list[dict[str, float] | None]:
        """The content-free answers that the applying fits need: remembered, or asked of the
        provider that answered (`name`), in one pass for all the questions not asked yet."""
        if not any(fit is not None and fit.content_free for fit in fits):
            return [None] * len(queries)
        blank = content_free(state)
        shape = json.dumps(blank, sort_keys=True)
        keys = [(name, reply.model, query.question, tuple(query.choices), shape)
                if fit is not None and fit.content_free else None
                for fit, reply, query in zip(fits, replies, queries)]
        missing = [(i, key) for i, key in enumerate(keys) if key is not None and self.baselines.get(key) is None]
        if missing and (budget_s is None or budget_s > 0):
            asked = [queries[i] for i, _ in missing]
            probe = await self.chain.ask(blank, asked, client, priority, budget_s, work_of(blank, asked),
                                         only=name)
            for (i, key), reply in zip(missing, probe.answers or []):
                if reply.model == replies[i].model and reply.probabilities and not reply.abstain:
                    self.baselines.put(key, reply.probabilities)
        return [self.baselines.get(key) if key is not None else None for key in keys]

    def _conclude(
        self, request_id: str, tried: list[Attempt], name: str, answer: EngineAnswer, threshold: float,
        calibrate: bool, fit: Fit | None, baseline: dict[str, float] | None,
        learned: tuple[Head, dict[str, float]] | None = None,
    ) -> Decision:
        attempts = list(tried)
        common: dict[str, Any] = {"request_id": request_id, "provider": name, "model": answer.model,
                                  "attempts": attempts}
        if answer.abstain:
            return Decision(status="abstained", rationale=answer.rationale or f"{name} abstained",
                            abstain_reason="engine", **common)
        probabilities, choice = answer.probabilities, answer.decision
        confidence = float(answer.confidence)
        note = "none"
        if fit is not None and fit.content_free and baseline is None:
            fit, note = None, "no_baseline"
        if fit is not None:
            probabilities = temper(correct(probabilities, baseline) if baseline else probabilities, fit.temperature)
            choice = max(probabilities, key=probabilities.__getitem__)  # the correction may change the winner
            confidence, note = probabilities[choice], fit.kind
        common["calibration"] = fit.kind if fit else "none"
        if learned is not None:
            head, probabilities = learned
            choice = max(probabilities, key=probabilities.__getitem__)
            confidence, note = probabilities[choice], "head"
            common["calibration"], common["head"] = "head", head.kind
            attempts[-1] = attempts[-1].model_copy(update={"detail": f"answered by {head.describe()}"})
        if calibrate and fit is None and learned is None and self.config.settings.gateway.uncalibrated == "abstain":
            rationale = (f"no calibration fit applies to {name} {answer.model} here, and [gateway] uncalibrated = "
                         f'"abstain": decide this yourself. {answer.rationale or ""}').strip()
            return Decision(status="abstained", confidence=confidence, probabilities=probabilities,
                            rationale=rationale, abstain_reason="uncalibrated", **common)
        rationale_tail = ""
        if calibrate:
            noted = f"decided by {learned[0].describe()}" if learned else CALIBRATION_NOTES[note]
            rationale_tail = f" ({noted}{CONTENT_FREE_NOTE if baseline and fit else ''}"
            rationale_tail += f"; the engine's own first choice was {answer.decision!r})" if choice != answer.decision else ")"
        if confidence < threshold:
            attempts[-1] = attempts[-1].model_copy(
                update={"outcome": "abstained", "detail": f"confidence {confidence:.2f} below {threshold:.2f}"}
            )
            rationale = (f"not sure enough: confidence {confidence:.2f} is below the threshold {threshold:.2f}, "
                         f"so decide this yourself. {answer.rationale or ''}").strip() + rationale_tail
            return Decision(status="abstained", confidence=confidence, probabilities=probabilities,
                            rationale=rationale, abstain_reason="threshold", **common)
        return Decision(status="decided", decision=choice, confidence=confidence, probabilities=probabilities,
                        rationale=(answer.rationale or "") + rationale_tail, **common)

    def _fit(self, name: str, answer: EngineAnswer, query: Query, state: Any) -> Fit | None:
        """The calibration fit for this answer, or None (also for engines without probabilities)."""
        if not answer.probabilities or answer.decision not in answer.probabilities:
            return None
        return self.calibrator.lookup(name, answer.model, query.question, len(query.choices),
                                      has_context=context_text(state) is not None)
