"""The decision chain: validate, try the providers in order, check, calibrate, threshold.

- Fallback runs only on a timeout, an error or a malformed answer, never on an abstention.
- Every try is an `Attempt` with outcome, latency and detail.
- Each attempt is bounded by `timeout_s` with asyncio (the adapter also gets it for its I/O).
- Answers are checked here, not in the adapters: a non-object, a confidence outside [0, 1] or a
  decision that is not an option is `malformed`.
- While paused, every decision abstains and says so.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import __version__
from .calibration import LOCAL_FITS_NAME, Calibrator, temper
from .config import LoadedConfig
from .events import Observer
from .lanes import INTERACTIVE, Lane
from .logs import request_id_var
from .providers import REGISTRY
from .providers.base import (
    EngineError,
    MalformedResponse,
    Overloaded,
    Provider,
    ProviderTimeout,
    Query,
)
from .schema import (
    SCHEMA_VERSION,
    SCHEMA_VERSIONS,
    Attempt,
    DecideRequest,
    DecideResponse,
    ErrorCode,
    Outcome,
    RequestError,
    error_response,
    json_schemas,
    new_request_id,
    parse_request,
)

logger = logging.getLogger(__name__)

TOOLS = ("system1_decide", "system1_health", "system1_capabilities")
PAUSE_FILE = "paused"
HEALTH_TIMEOUT_S = 5.0
PAUSED_RATIONALE = "System-1 is paused (`system1 toggle on` resumes it): reason it through yourself."

_FAILURE_CODES: dict[Outcome, ErrorCode] = {
    "timeout": ErrorCode.PROVIDER_TIMEOUT,
    "error": ErrorCode.PROVIDER_ERROR,
    "malformed": ErrorCode.MALFORMED_RESPONSE,
}


@dataclass(frozen=True)
class Answer:
    """A provider answer that passed the gateway's checks."""

    abstain: bool
    rationale: str | None
    decision: str | None = None
    confidence: float | None = None
    probabilities: dict[str, float] | None = None
    model: str = ""


def _unit_number(value: Any) -> bool:
    return (
        not isinstance(value, bool)
        and isinstance(value, (int, float))
        and math.isfinite(value)
        and 0.0 <= value <= 1.0
    )


def check_answer(raw: Any, choices: list[str], default_model: str) -> Answer:
    """Validate an adapter's answer against the question; raise `MalformedResponse`."""
    if not isinstance(raw, Mapping):
        raise MalformedResponse(f"answer is not an object but {type(raw).__name__}")
    rationale = raw.get("rationale")
    rationale = str(rationale) if rationale is not None else None
    model = str(raw.get("model") or default_model)
    if raw.get("abstain") is True:
        return Answer(abstain=True, rationale=rationale, model=model)
    decision = raw.get("decision")
    if not isinstance(decision, str) or decision not in choices:
        raise MalformedResponse(f"decision {decision!r:.80} is not one of the options")
    confidence = raw.get("confidence")
    if not _unit_number(confidence):
        raise MalformedResponse(f"confidence {confidence!r:.40} is not a number in [0, 1]")
    probabilities = raw.get("probabilities")
    if probabilities is not None:
        if not isinstance(probabilities, Mapping) or not all(
            option in choices and _unit_number(p) for option, p in probabilities.items()
        ):
            raise MalformedResponse("probabilities must map options to numbers in [0, 1]")
        probabilities = {option: float(p) for option, p in probabilities.items()}
    return Answer(False, rationale, decision, float(confidence), probabilities, model)


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))


class Gateway:
    """One core per process: the configured chain, its lanes, calibration and the paused state."""

    def __init__(
        self,
        config: LoadedConfig,
        providers: Mapping[str, Provider] | None = None,
        calibrator: Calibrator | None = None,
        observer: Observer | None = None,
    ) -> None:
        self.config = config
        self.errors = list(config.errors)
        self.observer = observer or Observer()
        self.providers: dict[str, Provider] = dict(providers or {})
        if not self.errors and providers is None:
            self._build_providers()
        self.lanes = {name: Lane(p, self.observer) for name, p in self.providers.items()}
        self.calibrator = calibrator or Calibrator.load(config.install_dir / LOCAL_FITS_NAME)
        self._probes: dict[str, tuple[float, dict[str, Any]]] = {}
        self._probing: dict[str, asyncio.Task] = {}

    def _build_providers(self) -> None:
        settings = self.config.settings
        for name in settings.chain:
            try:
                self.providers[name] = REGISTRY[name](settings.options_for(name))
            except ValueError as exc:
                self.errors.append(f"[providers.{name}]: {exc}")

    @property
    def chain(self) -> list[str]:
        return self.config.settings.chain

    @property
    def pause_file(self) -> Path:
        return self.config.install_dir / PAUSE_FILE

    @property
    def paused(self) -> bool:
        return self.pause_file.exists()

    async def aclose(self) -> None:
        await asyncio.gather(*(lane.aclose() for lane in self.lanes.values()), return_exceptions=True)
        await asyncio.gather(*(p.aclose() for p in self.providers.values()), return_exceptions=True)

    # -- decide ------------------------------------------------------------------------------
    async def decide(
        self, payload: Any, client: str = "local", priority: int = INTERACTIVE, calibrate: bool = True
    ) -> DecideResponse:
        """Answer one raw `system1_decide` request; never raises. `calibrate=False` leaves the
        engine's probabilities as they are (for fitting new temperatures)."""
        started = time.perf_counter()
        try:
            request = parse_request(payload)
        except RequestError as exc:
            response = error_response(ErrorCode.INVALID_REQUEST, exc.message, exc.request_id)
        else:
            token = request_id_var.set(request.request_id or new_request_id())
            try:
                response = await self._decide(request, request_id_var.get(), started, client, priority, calibrate)
            finally:
                request_id_var.reset(token)
        self._log(response, client)
        for attempt in response.attempts:
            self.observer.attempt(attempt.provider, attempt.outcome)
        self.observer.decision(response, client, time.perf_counter() - started, response._abstain_reason)
        return response

    async def _decide(
        self, request: DecideRequest, request_id: str, started: float, client: str, priority: int, calibrate: bool
    ) -> DecideResponse:
        logger.debug("question %r options %r", request.question, request.options)
        if self.paused:
            response = DecideResponse(request_id=request_id, status="abstained", rationale=PAUSED_RATIONALE)
            response._abstain_reason = "paused"
            return response
        if self.errors:
            return error_response(ErrorCode.CONFIG_ERROR, "; ".join(self.errors), request_id)

        query = Query(request.question, request.choices, request.options is None, request.context)
        threshold = (
            request.min_confidence
            if request.min_confidence is not None
            else self.config.settings.gateway.min_confidence
        )
        attempts: list[Attempt] = []
        retry_hints: list[int] = []
        for name in self.chain:
            answer, attempt, retry_after_s = await self._attempt(name, query, client, priority)
            attempts.append(attempt)
            if retry_after_s is not None:
                retry_hints.append(retry_after_s)
            if answer is None:
                continue
            response = self._respond(request_id, name, query, answer, threshold, attempts, started, calibrate)
            response._model = answer.model
            return response
        last = attempts[-1]
        summary = "; ".join(f"{a.provider}: {a.outcome} ({a.detail})" for a in attempts)
        response = error_response(
            _FAILURE_CODES[last.outcome],
            f"no provider answered: {summary}",
            request_id,
            attempts,
            _ms(time.perf_counter() - started),
        )
        if len(retry_hints) == len(attempts):  # every provider turned it away at the door
            response._retry_after_s = min(retry_hints)
        return response

    async def _ask(
        self, name: str, state: Any, queries: list[Query], client: str, priority: int, timeout_s: float
    ) -> tuple[list[Answer] | None, Outcome, str | None, int | None]:
        """One try of one provider through its lane, bounded by `timeout_s`: checked answers, or
        None with the failure's outcome, detail and (when turned away) retry hint."""
        provider = self.providers[name]
        try:
            raws = await asyncio.wait_for(self.lanes[name].run(state, queries, client, priority, timeout_s), timeout_s)
            answers = [check_answer(raw, q.choices, provider.model_id) for raw, q in zip(raws, queries)]
        except Overloaded as exc:
            return None, "error", str(exc), exc.retry_after_s
        except (TimeoutError, ProviderTimeout) as exc:
            return None, "timeout", str(exc) or f"no answer within {timeout_s:g} s", None
        except MalformedResponse as exc:
            return None, "malformed", str(exc), None
        except EngineError as exc:
            return None, "error", str(exc), None
        except Exception as exc:  # an adapter bug must not take the chain down
            logger.exception("provider %s raised unexpectedly", name)
            return None, "error", f"internal error in the {name} adapter ({type(exc).__name__})", None
        return answers, "ok", None, None

    async def _attempt(
        self, name: str, query: Query, client: str, priority: int
    ) -> tuple[Answer | None, Attempt, int | None]:
        started = time.perf_counter()
        timeout_s = self.config.settings.gateway.timeout_s
        answers, outcome, detail, retry_after_s = await self._ask(name, query.context, [query], client, priority, timeout_s)
        latency = _ms(time.perf_counter() - started)
        if answers is None:
            return None, Attempt(provider=name, outcome=outcome, latency_ms=latency, detail=detail), retry_after_s
        answer = answers[0]
        outcome = "abstained" if answer.abstain else "ok"
        detail = answer.rationale if answer.abstain else None
        return answer, Attempt(provider=name, outcome=outcome, latency_ms=latency, detail=detail), None

    def _respond(
        self,
        request_id: str,
        name: str,
        query: Query,
        answer: Answer,
        threshold: float,
        attempts: list[Attempt],
        started: float,
        calibrate: bool = True,
    ) -> DecideResponse:
        common = {"request_id": request_id, "provider": name, "attempts": attempts}
        if answer.abstain:
            response = DecideResponse(
                status="abstained",
                rationale=answer.rationale or f"{name} abstained",
                latency_ms=_ms(time.perf_counter() - started),
                **common,
            )
            response._abstain_reason = "engine"
            return response
        probabilities, confidence, calibrated = (
            self._calibrated(name, answer, query) if calibrate else (answer.probabilities, answer.confidence, False)
        )
        if confidence < threshold:
            attempts[-1] = attempts[-1].model_copy(
                update={"outcome": "abstained", "detail": f"confidence {confidence:.2f} below {threshold:.2f}"}
            )
            response = DecideResponse(
                status="abstained",
                confidence=confidence,
                probabilities=probabilities,
                calibrated=calibrated,
                rationale=(
                    f"not sure enough: confidence {confidence:.2f} is below the threshold "
                    f"{threshold:.2f}, so decide this yourself. {answer.rationale or ''}"
                ).strip(),
                latency_ms=_ms(time.perf_counter() - started),
                **common,
            )
            response._abstain_reason = "threshold"
            return response
        return DecideResponse(
            status="decided",
            decision=answer.decision,
            confidence=confidence,
            probabilities=probabilities,
            calibrated=calibrated,
            rationale=answer.rationale,
            latency_ms=_ms(time.perf_counter() - started),
            **common,
        )

    def _calibrated(self, name: str, answer: Answer, query: Query) -> tuple[dict[str, float] | None, float, bool]:
        """Probabilities, confidence and whether a fit was applied."""
        probabilities, confidence = answer.probabilities, answer.confidence
        assert confidence is not None
        if not probabilities or answer.decision not in probabilities:
            return probabilities, confidence, False
        fit = self.calibrator.lookup(name, answer.model, query.question, len(query.choices))
        if fit is None:
            return probabilities, confidence, False
        probabilities = temper(probabilities, fit.temperature)
        return probabilities, probabilities[answer.decision], True

    async def decide_many(
        self, state: Any, queries: list[Query], client: str, priority: int, timeout_s: float
    ) -> list[dict[str, Any]] | None:
        """Several questions about one text in one engine pass where the engine can, through the
        chain; each answer checked and calibrated. None when no provider answered in time."""
        if self.errors or self.paused:
            return None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        for name in self.chain:
            remaining = min(deadline - loop.time(), self.config.settings.gateway.timeout_s)
            if remaining <= 0:
                return None
            answers, outcome, detail, _ = await self._ask(name, state, queries, client, priority, remaining)
            if answers is None:
                logger.info("%s did not answer %d questions: %s (%s)", name, len(queries), outcome, detail)
                continue
            result = []
            for answer, query in zip(answers, queries):
                if answer.abstain:
                    result.append({"answer": None, "confidence": 0.0, "abstain": True, "provider": name})
                    continue
                probabilities, confidence, calibrated = self._calibrated(name, answer, query)
                result.append({"answer": answer.decision, "confidence": confidence, "abstain": False,
                               "calibrated": calibrated, "provider": name})
            return result
        return None

    def max_options(self) -> int | None:
        """The primary engine's option limit, with the schema's own."""
        provider = self.providers.get(self.config.settings.gateway.provider)
        limit = provider.capabilities().max_options if provider else None
        return min(limit, 256) if limit is not None else 256

    def _log(self, response: DecideResponse, client: str) -> None:
        token = request_id_var.set(response.request_id)
        try:
            logger.info(
                "decision client=%s provider=%s status=%s confidence=%s latency_ms=%d attempts=%s%s",
                client,
                response.provider or "-",
                response.status,
                "-" if response.confidence is None else f"{response.confidence:.3f}",
                response.latency_ms,
                ",".join(f"{a.provider}:{a.outcome}" for a in response.attempts) or "-",
                f" error={response.error.code.value}" if response.error else "",
            )
        finally:
            request_id_var.reset(token)

    # -- health and capabilities -------------------------------------------------------------
    async def _probe(self, name: str) -> dict[str, Any]:
        provider = self.providers[name]
        timeout_s = min(self.config.settings.gateway.timeout_s, HEALTH_TIMEOUT_S)
        started = time.perf_counter()
        try:
            result = await asyncio.wait_for(provider.health(timeout_s), timeout_s)
            ok, detail = result.ok, result.detail
        except TimeoutError:
            ok, detail = False, f"no health answer within {timeout_s:g} s"
        except Exception as exc:
            ok, detail = False, f"health probe failed ({type(exc).__name__})"
        self.observer.engine_up(name, ok)
        result = {"ok": ok, "latency_ms": _ms(time.perf_counter() - started), "detail": detail}
        self._probes[name] = (time.monotonic(), result)
        return result

    async def probe(self, name: str, max_age_s: float = 0.0) -> dict[str, Any]:
        """A cached probe no older than `max_age_s`; callers at the same moment share one."""
        cached = self._probes.get(name)
        if cached is not None and max_age_s > 0 and time.monotonic() - cached[0] <= max_age_s:
            return cached[1]
        task = self._probing.get(name)
        if task is None:
            task = asyncio.ensure_future(self._probe(name))
            self._probing[name] = task
            task.add_done_callback(lambda _t, n=name: self._probing.pop(n, None))
        return await asyncio.shield(task)

    async def health(self, max_age_s: float = 0.0) -> dict[str, Any]:
        names = [n for n in self.chain if n in self.providers]
        probes = await asyncio.gather(*(self.probe(n, max_age_s) for n in names))
        providers = [
            {"name": name, "role": "primary" if i == 0 else "fallback", **probe}
            for i, (name, probe) in enumerate(zip(names, probes))
        ]
        return self.health_report(providers)

    def health_report(self, providers: list[dict[str, Any]]) -> dict[str, Any]:
        if self.paused:
            status = "paused"
        elif self.errors or not providers:
            status = "down"
        elif providers[0]["ok"]:
            status = "ok"
        elif any(p["ok"] for p in providers[1:]):
            status = "degraded"
        else:
            status = "down"
        return {
            "status": status,
            "gateway_version": __version__,
            "schema_version": SCHEMA_VERSION,
            "config_file": str(self.config.path) if self.config.path else None,
            "config_errors": list(self.errors),
            "calibration_errors": list(self.calibrator.errors),
            "providers": providers,
        }

    def capabilities(self) -> dict[str, Any]:
        gateway = self.config.settings.gateway
        schemas = json_schemas()
        return {
            "gateway_version": __version__,
            "schema_version": SCHEMA_VERSION,
            "schema_versions": list(SCHEMA_VERSIONS),
            "tools": list(TOOLS),
            "provider": gateway.provider,
            "fallback": list(gateway.fallback),
            "timeout_s": gateway.timeout_s,
            "min_confidence": gateway.min_confidence,
            "providers": {name: p.capabilities().as_dict() for name, p in self.providers.items()},
            "available_providers": list(REGISTRY),
            "calibration": self.calibrator.summary(),
            "config_errors": list(self.errors),
            "request_schema": schemas["request.json"],
            "response_schema": schemas["response.json"],
        }
