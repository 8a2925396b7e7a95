"""The core: validate a request, ask the chain, calibrate, apply the threshold, and say so.

- Every answer leaves as a `Decision`; nothing here raises to the caller.
- An engine's abstention is an answer (no fallback); a confidence under the threshold
  abstains with the reason.
- While paused, every decision abstains and says so.
- One log line per decision, with the request id.

The steps live beside it: `stages` (the chain, then the cascade), `chain` (attempts and
fallback), `learned` (heads), `calibrating` (fits and content-free answers), `conclude` (one
answer to one decision), `feedback` (labels), `health` (probes).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..providers import REGISTRY
from ..providers.base import Provider, Query
from .calibrating import AnswerCalibration
from .calibration import LOCAL_FITS_NAME, Calibrator
from .chain import Chain, ms
from .config import LoadedConfig
from .events import Observer
from .feedback import Feedback
from .heads import LOCAL_HEADS_NAME, Heads
from .health import HealthMonitor
from .labels import STORE_NAME, LabelStore
from .lanes import INTERACTIVE, Lane
from .learned import LearnedHeads
from .logs import log_decision, request_id_var
from .result import Decision
from .rewording import Rewording
from .schema import MAX_OPTIONS, ErrorCode, RequestError, new_request_id, parse_request
from .stages import Asking, Stages
from .work import over_budget, work_of

logger = logging.getLogger(__name__)
PAUSE_FILE = "paused"
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
        self.monitor = HealthMonitor(config.settings.chain, gateway.cascade, self.providers, self.lanes,
                                     self.chain.breakers, gateway.timeout_s, self.observer)
        self.calibration = AnswerCalibration(calibrator or Calibrator.load(config.learned_dir / LOCAL_FITS_NAME),
                                             self.chain)
        learning = config.settings.learning
        self.learned = LearnedHeads(heads or Heads.load(config.learned_dir / LOCAL_HEADS_NAME),
                                    self.lanes.get(learning.embedder) if learning.enabled else None,
                                    gateway.timeout_s, learning.models)
        self.stages = Stages(self.providers, self.chain, self.learned, self.calibration, gateway)
        # A question with a head or a fit of its own is asked as worded; the first cascade stage reads wordings.
        self.rewording = Rewording(lambda query: bool(self.learned.candidates(query))
                                   or self.calibrator.has_own_fit(query.question),
                                   self.chain, [n for n in gateway.cascade if n in self.providers][:1])
        collecting = learning.collect or bool(learning.collect_kinds)
        self.feedback = Feedback(learning, LabelStore(config.install_dir / STORE_NAME, learning.store_max_decisions)
                                 if collecting else None)

    @property
    def calibrator(self) -> Calibrator:
        return self.calibration.calibrator

    @property
    def heads(self) -> Heads:
        return self.learned.heads

    @property
    def embedder(self) -> Provider | None:
        return self.learned.embedder.provider if self.learned.embedder else None

    def _build_providers(self) -> None:
        """Every configured provider (the config validated them all): the chain's, the
        embedder, and any other, which can be asked by name (`system1 evaluate --provider`)."""
        settings = self.config.settings
        for name in dict.fromkeys([*settings.engines, *settings.providers]):
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

    def stays_local(self, name: str | None) -> bool:
        """Whether asking provider `name` (None: the chain, and the cascade's stages after it)
        keeps a prompt on this machine."""
        names = [name] if name else self.config.settings.engines
        return all(self.providers[n].local for n in names if n in self.providers)

    def max_options(self) -> int:
        """The primary engine's option limit, within the schema's own."""
        provider = self.providers.get(self.config.settings.gateway.provider)
        limit = provider.capabilities().max_options if provider else None
        return MAX_OPTIONS if limit is None else min(limit, MAX_OPTIONS)

    async def aclose(self) -> None:
        self.feedback.close()
        await asyncio.gather(*(lane.aclose() for lane in self.lanes.values()), return_exceptions=True)
        await asyncio.gather(*(p.aclose() for p in self.providers.values()), return_exceptions=True)

    # -- answering ---------------------------------------------------------------------------
    async def decide(
        self, payload: Any, client: str = "local", priority: int = INTERACTIVE, calibrate: bool = True,
        only: str | None = None,
    ) -> Decision:
        """Answer one raw `system1_decide` request. `calibrate=False` leaves the engine's
        probabilities as they are (for fitting new temperatures); `only` asks that configured
        provider alone, for its own answer: no fallback, no cascade, and no learned head, which
        would answer in its place (a teacher's labels must be the teacher's, not the heads')."""
        started = time.perf_counter()
        try:
            if only is not None:
                self.check_askable(only)
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
                                                    calibrate=calibrate, request_id=request_id_var.get(), only=only,
                                                    heads=only is None)
                await self.feedback.remember(request, query, decision)
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
        heads: bool = True,
    ) -> list[Decision]:
        """Every question about one text, in one engine pass where the engine can, each
        checked, calibrated (or answered by a learned head, unless `heads` is False) and held to
        `threshold`; asked of the chain, then of the cascade's stages where it is unsure
        (`core.cascade`), or of provider `only` alone."""
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
        asked = Asking(state, client, priority, threshold, calibrate, request_id, deadline)
        readings = await self.rewording.readings(asked, queries) if heads and calibrate and only is None else []
        if any(readings):
            queries = [r.query(q) if r else q for q, r in zip(queries, readings)]
        decisions = await self.stages.ask(asked, queries, [only] if only else self.chain.names,
                                          [[] for _ in queries], heads=heads)
        if calibrate and only is None:
            decisions = await self.stages.cascade(asked, queries, decisions)
        if any(readings):
            decisions = [r.answer(d) if r else d for d, r in zip(decisions, readings)]
        return decisions
