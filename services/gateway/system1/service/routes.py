"""The REST routes, thin: parse, call the service, translate its `Decision` once.

HTTP status follows the envelope: 200 for decided and abstained answers and for provider-side
errors (the envelope says which), 400 for an invalid request, 429 with `Retry-After` when
every lane is full, 503 for a broken config. (401/403/413 come from `Hygiene`.)
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from ..core.feedback import LabelsOff
from ..core.learned import EmbedderUnavailable
from ..core.result import Decision
from ..core.schema import MAX_JSON_DEPTH, DecideResponse, ErrorCode, RequestError, json_schemas
from ..hook.answer import RouteEvent, parse_event
from ..client import headers
from ..client.token import BRIDGE
from .hygiene import envelope
from .metrics import CONTENT_TYPE
from .service import Service


logger = logging.getLogger(__name__)


async def _service(request: Request) -> Service:  # async: FastAPI would run a plain def in a thread
    return request.app.state.service


ServiceDep = Annotated[Service, Depends(_service)]


def _described(description: str) -> dict[str, Any]:
    return {"model": DecideResponse, "description": description}


# What `Hygiene` may answer on any route, before the route itself runs.
REFUSALS: dict[int | str, dict[str, Any]] = {
    401: _described("a valid API key is required"),
    403: _described("Host or Origin not allowed"),
    413: _described("body over [service] max_body_bytes"),
    500: _described("internal error in the gateway"),
    503: _described("config_error: the config, or the API key configuration, is broken"),
}
BAD_REQUEST = {400: _described("invalid_request: the envelope names the field and the reason")}
NOT_JSON = {415: _described("the body must be application/json")}


router = APIRouter(responses=REFUSALS)


# How long a decision runs before anyone watches for its client hanging up.
WATCH_AFTER_S = 0.005


def status_of(decision: Decision) -> tuple[int, dict[str, str]]:
    if decision.error_code is None:
        return 200, {}
    if decision.error_code == ErrorCode.INVALID_REQUEST:
        return 400, {}
    if decision.error_code == ErrorCode.CONFIG_ERROR:
        return 503, {}
    if decision.retry_after_s is not None:
        return 429, {"Retry-After": str(decision.retry_after_s)}
    return 200, {}


async def read_json(request: Request) -> Any:
    """The body as JSON; `RequestError` (a 400) for anything else. (What JSON allows but the
    gateway refuses, such as NaN or lone surrogates, is refused by field where it is validated.)"""
    try:
        return json.loads(await request.body())
    except RecursionError:
        raise RequestError(f"request: JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    except UnicodeDecodeError:
        raise RequestError("request: body is not UTF-8 JSON") from None
    except ValueError as exc:
        raise RequestError(f"request: body is not valid JSON ({exc})") from None


async def _unless_disconnected(request: Request, work: Awaitable[Decision]) -> Decision | None:
    """Await `work`, but cancel it (leaving its lane queue) if the client hangs up first; None
    then. The work runs in this task, which the watcher cancels: no second task per request.
    The watcher starts only for work still running after `WATCH_AFTER_S`: most decisions are
    done by then, and a hang-up costs a queued or running one at most that much longer."""
    this = asyncio.current_task()
    hung_up = False
    watcher: asyncio.Future | None = None

    async def watch() -> None:
        nonlocal hung_up
        while (await request.receive())["type"] != "http.disconnect":
            pass
        hung_up = True
        this.cancel()

    def start() -> None:
        nonlocal watcher
        watcher = asyncio.ensure_future(watch())

    timer = asyncio.get_running_loop().call_later(WATCH_AFTER_S, start)
    try:
        return await work
    except asyncio.CancelledError:
        if not hung_up:
            raise
        this.uncancel()
        return None
    finally:
        timer.cancel()
        if watcher is not None:
            watcher.cancel()


REQUEST_BODY = {"required": True, "content": {"application/json": {"schema": json_schemas()["request.json"]}}}


@router.post("/v1/decide", response_model=DecideResponse,
             responses=BAD_REQUEST | NOT_JSON | {429: _described("every provider's queue is full; see Retry-After")},
             openapi_extra={"requestBody": REQUEST_BODY})
async def decide(request: Request, service: ServiceDep) -> Response:
    """Schema v1 request in, schema v1 envelope out (also on errors)."""
    payload = await read_json(request)
    client = request.state.system1_client
    priority = service.priority_of(client, request.headers.get(headers.PRIORITY))
    calibrate = request.headers.get(headers.CALIBRATION, "on").lower() != "off"
    only = request.headers.get(headers.PROVIDER) or None
    decision = await _unless_disconnected(request, service.decide(payload, client, priority, calibrate, only))
    if decision is None:
        logger.info("client %s hung up before its decision was ready (499)", client)
        return JSONResponse({}, status_code=499)
    status, extra = status_of(decision)
    if decision.model:
        extra[headers.MODEL] = decision.model
    return Response(decision.envelope_bytes(), status_code=status, headers=extra, media_type="application/json")


def direct_decide(service: Service) -> ASGIApp:
    """`POST /v1/decide` as a plain ASGI app, for `Hygiene` to call straight after its checks:
    the busiest route skips the router, dependency solving and the exception middleware,
    whose only work on it is turning `RequestError` into the 400 envelope, done here. (The
    router's route still describes it in the OpenAPI document and answers other methods.)"""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        try:
            response = await decide(Request(scope, receive), service)
        except RequestError as exc:
            response = invalid_request(exc)
        await response(scope, receive, send)

    return app


def invalid_request(exc: RequestError) -> JSONResponse:
    return envelope(ErrorCode.INVALID_REQUEST, exc.message, 400)


@router.post("/v1/embed", responses=BAD_REQUEST | NOT_JSON, openapi_extra={"requestBody": REQUEST_BODY})
async def embed(request: Request, service: ServiceDep) -> JSONResponse:
    """A decide request in; the `[learning]` embedder's vector of its judged text and its kind out
    (what `system1 learn` fits heads on). An embedder that fails or is not configured is, as for
    decisions, a 200 with the `provider_error` envelope."""
    payload = await read_json(request)
    try:
        return JSONResponse(await service.embed(payload, request.state.system1_client))
    except EmbedderUnavailable as exc:
        return JSONResponse(Decision.failed(ErrorCode.PROVIDER_ERROR, str(exc)).envelope_json())


@router.post("/v1/feedback", responses=BAD_REQUEST | NOT_JSON | {409: _described("no decisions are remembered")},
             openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": {
                 "type": "object", "additionalProperties": False, "required": ["request_id", "label"],
                 "properties": {"request_id": {"type": "string", "minLength": 1},
                                "label": {"type": "string", "minLength": 1}}}}}}})
async def feedback(request: Request, service: ServiceDep) -> JSONResponse:
    """Label a decision this gateway remembered (`[learning] collect`), for `system1 learn --from-store`."""
    payload = await read_json(request)
    try:
        return JSONResponse(await service.feedback(payload, request.state.system1_client))
    except LabelsOff as exc:
        return JSONResponse(Decision.failed(ErrorCode.CONFIG_ERROR, str(exc)).envelope_json(), status_code=409)


@router.get("/v1/labels")
async def labelled(service: ServiceDep, unlabelled: bool = False) -> list[dict[str, Any]]:
    """The labelled decisions, as `learn` rows (question, options, context, label, kind); with
    `unlabelled=true`, the remembered decisions no one labelled, without a label (a teacher's
    pool)."""
    return await service.labelled(not unlabelled)


@router.get("/v1/routing/entries")
async def routing_entries(service: ServiceDep) -> dict[str, Any]:
    """The routing log's entries with a prompt and teacher labels or an outcome (what
    `system1 evaluate` judges an engine on), and how many of its lines were not JSON."""
    return await service.hook.entries()


@router.get("/v1/routing/waiting")
async def waiting_prompts(service: ServiceDep, limit: Annotated[int, Query(ge=1, le=1000)] = 50) -> list[dict[str, Any]]:
    """The newest logged prompts with no teacher labels yet: `id`, `prompt` and the engine's features."""
    return await service.hook.waiting_prompts(limit)


@router.post("/v1/routing/labels", responses=BAD_REQUEST | NOT_JSON,
             openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": {
                 "type": "object", "required": ["labels"], "properties": {"labels": {"type": "array", "items": {
                     "type": "object", "required": ["id", "labels"], "additionalProperties": False,
                     "properties": {"id": {"type": "string", "minLength": 1},
                                    "labels": {"type": "object", "minProperties": 1,
                                               "additionalProperties": {"enum": ["yes", "no"]}}}}}}}}}}})
async def label_prompts(request: Request, service: ServiceDep) -> dict[str, int]:
    """Teacher labels for logged prompts, by their `id` (`{"labels": [{"id", "labels": {feature:
    "yes" | "no"}}]}`), written into the service's routing log: `{"labelled": n}`."""
    return await service.hook.label_prompts(await read_json(request))


@router.post("/v1/outcomes", responses=BAD_REQUEST | NOT_JSON,
             openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": {
                 "type": "object", "required": ["verdicts"], "properties": {"verdicts": {"type": "array", "items": {
                     "type": "object", "required": ["tool_use_id", "outcome"],
                     "properties": {"tool_use_id": {"type": "string", "minLength": 1},
                                    "outcome": {"enum": ["failed", "succeeded"]},
                                    "reason": {"type": "string"}, "tier": {"type": ["string", "null"]},
                                    "doubtful": {"type": "boolean"}}}}}}}}}})
async def apply_outcomes(request: Request, service: ServiceDep) -> dict[str, int]:
    """Agent spawn outcomes (`system1 outcomes --apply`) written into this service's routing log."""
    return await service.hook.apply_outcomes(await read_json(request))


@router.post("/v1/route", responses=BAD_REQUEST | NOT_JSON,
             openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                 "schema": RouteEvent.model_json_schema(by_alias=True)}}}})
async def route(request: Request, service: ServiceDep) -> JSONResponse:
    """The routing hook: a Claude Code hook event in, the context to add (or none) out."""
    event = parse_event(await read_json(request))
    outcome = await service.hook.route(event, request.state.system1_client)
    return JSONResponse(outcome.as_dict())


@router.post("/v1/features", responses=BAD_REQUEST | NOT_JSON, openapi_extra={"requestBody": {"required": True, "content": {
    "application/json": {"schema": {"type": "object", "additionalProperties": False, "required": ["prompt"], "properties": {
        "prompt": {"type": "string", "minLength": 1}, "provider": {"type": "string", "minLength": 1}}}}}}})
async def features(request: Request, service: ServiceDep) -> dict[str, Any]:
    """The four routing features of a prompt with their probabilities, from the chain or from
    `provider` (any configured one): what `system1 evaluate` asks. Nothing is logged; an engine
    failure is `{"features": null, "error": {...}}`."""
    client = request.state.system1_client
    priority = service.priority_of(client, request.headers.get(headers.PRIORITY))
    return await service.hook.features(await read_json(request), client, priority)


@router.get("/v1/health")
async def health(service: ServiceDep) -> dict[str, Any]:
    """Gateway status and a cached probe of each engine in the chain."""
    return await service.health()


@router.get("/v1/capabilities")
async def capabilities(service: ServiceDep) -> dict[str, Any]:
    return await service.capabilities()


@router.get("/v1/schema/{name}", responses={404: _described("no such schema")})
async def schema(name: str) -> JSONResponse:
    schemas = json_schemas()
    if name not in schemas:
        return envelope(ErrorCode.INVALID_REQUEST, f"no schema {name!r}; there are {sorted(schemas)}", 404)
    return JSONResponse(schemas[name])


@router.post("/v1/reload", responses=NOT_JSON | {409: {"description": "the new config is broken; the old one stays"}})
async def reload(request: Request, service: ServiceDep) -> JSONResponse:
    """Re-read the config and calibration fits (the bridge token, or no keys configured)."""
    if service.keys.required and request.state.system1_identity != BRIDGE:
        return envelope(ErrorCode.INVALID_REQUEST, "reload needs the service's bridge token", 403)
    result = await service.reload()
    return JSONResponse(result, status_code=200 if result["reloaded"] else 409)


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is alive; no engine is called."""
    return {"status": "alive"}


@router.get("/readyz", responses={503: {"description": "the config is broken"}})
async def readyz(service: ServiceDep) -> JSONResponse:
    """The config is loaded and the core is ready to decide."""
    body = {"ready": service.ready, "config_errors": list(service.gateway.errors)}
    return JSONResponse(body, status_code=200 if service.ready else 503)


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(service: ServiceDep) -> Response:
    return Response(service.metrics.render(), media_type=CONTENT_TYPE)
