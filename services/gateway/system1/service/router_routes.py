"""The router's front doors: OpenAI's `POST /v1/chat/completions` and `GET /v1/models`,
Anthropic's `POST /v1/messages` (and `/v1/messages/count_tokens`, an estimate), and the dry run `POST /v1/router/route` (`?api=anthropic` for an
Anthropic body), which answers the plan without calling any chat model.

Errors come in the client's API's own shape, so its SDK raises its usual exception.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from ..core.schema import RequestError, check_json_value
from ..router.precheck import input_tokens
from ..router.plan import RouterError, header_value
from ..router.router import error_body
from .chat_bodies import ANTHROPIC_COUNT, ANTHROPIC_MESSAGES, OPENAI_CHAT, request_body
from .routes import REFUSALS, ServiceDep, read_json

# Errors in the client API's shape (OpenAI's `{"error": {…}}` or Anthropic's `{"type": "error", …}`).
_API_ERROR = {"content": {"application/json": {"schema": {"type": "object"}}}}
CHAT_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"description": "the body cannot be read (the message names the field), or no model can take it", **_API_ERROR},
    403: {"description": "a private prompt may not reach the models that could take it (private = local_only)",
          **_API_ERROR},
    404: {"description": "the router is off, or the model is neither routed nor configured", **_API_ERROR},
    429: {"description": "every candidate answered 429, or the named model is over its daily budget", **_API_ERROR},
    502: {"description": "every candidate failed; X-Router-Failed names them", **_API_ERROR},
    503: {"description": "every candidate's upstream is at its connection limit, or the API key configuration "
                         "is broken", **_API_ERROR},
    401: {"description": "a valid API key is required", **_API_ERROR},
    413: {"description": "body over [router] max_body_bytes", **_API_ERROR},
    415: {"description": "the body must be application/json", **_API_ERROR},
    500: {"description": "internal error in the gateway", **_API_ERROR},
}
OPENAI_BODY, ANTHROPIC_BODY = request_body(OPENAI_CHAT), request_body(ANTHROPIC_MESSAGES)
router_routes = APIRouter(responses=REFUSALS)


def _error(api: str, error: RouterError | RequestError) -> JSONResponse:
    status = error.status if isinstance(error, RouterError) else 400
    failed = isinstance(error, RouterError) and error.failed
    headers = {"x-router-failed": header_value(", ".join(error.failed))} if failed else None
    return JSONResponse(error_body(api, error), status_code=status, headers=headers)


async def _chat_body(request: Request) -> Any:
    """The chat body as JSON, refused by field when it holds what could not be sent on (lone
    surrogates, NaN, nesting deeper than the schema's limit)."""
    body = await read_json(request)
    check_json_value(body, "body")
    return body


async def _chat(request: Request, service: ServiceDep, api: str) -> Response:
    try:
        body = await _chat_body(request)
        plan = await service.plan_route(api, body, request.state.system1_client)
        reply = await service.answer_route(plan, body, request.headers, request.state.system1_client)
    except (RouterError, RequestError) as exc:
        return _error(api, exc)
    if reply.stream is not None:
        return StreamingResponse(reply.stream, status_code=reply.status, headers=reply.headers)
    return Response(reply.body, status_code=reply.status, headers=reply.headers)


@router_routes.post("/v1/chat/completions", responses=CHAT_ERRORS, openapi_extra=OPENAI_BODY)
async def chat_completions(request: Request, service: ServiceDep) -> Response:
    """OpenAI-compatible: `model: "auto"` (or an alias) is routed; another name is passed through."""
    return await _chat(request, service, "openai")


@router_routes.post("/v1/messages", responses=CHAT_ERRORS, openapi_extra=ANTHROPIC_BODY)
async def messages(request: Request, service: ServiceDep) -> Response:
    """Anthropic-compatible, for clients that set `ANTHROPIC_BASE_URL`."""
    return await _chat(request, service, "anthropic")


@router_routes.post("/v1/messages/count_tokens", responses=CHAT_ERRORS, openapi_extra=request_body(ANTHROPIC_COUNT))
async def count_tokens(request: Request, service: ServiceDep) -> JSONResponse:
    """Anthropic's token count, answered here with the router's own estimate (which errs high)
    for any model: which model will answer is not known before routing."""
    try:
        conversation = service.router.conversation("anthropic", await _chat_body(request))
    except (RouterError, RequestError) as exc:
        return _error("anthropic", exc)
    return JSONResponse({"input_tokens": input_tokens(conversation)})


@router_routes.post("/v1/router/route", responses=CHAT_ERRORS | {422: {"description": "api is not openai or anthropic"}}, openapi_extra=OPENAI_BODY)
async def dry_run(request: Request, service: ServiceDep, api: Literal["openai", "anthropic"] = "openai") -> JSONResponse:
    """The plan for a chat request: model, reason, signals, needs, floor and every candidate
    (a conversation's model is read, never set, by a dry run)."""
    try:
        plan = await service.plan_route(api, await _chat_body(request), request.state.system1_client, remember=False)
    except (RouterError, RequestError) as exc:
        return _error(api, exc)
    return JSONResponse(plan.report(), headers=plan.headers(None))


@router_routes.post("/v1/router/feedback", responses=CHAT_ERRORS, openapi_extra={"requestBody": {"required": True, "content": {
    "application/json": {"schema": {"type": "object", "additionalProperties": False, "required": ["request_id", "verdict"],
                                    "properties": {"request_id": {"type": "string", "pattern": "^[0-9a-f]{32}$"},
                                                   "verdict": {"enum": ["good", "bad"]}}}}}}})
async def feedback(request: Request, service: ServiceDep) -> JSONResponse:
    """A client's verdict on a routed answer, by its `X-Router-Request-Id`: an outcome
    `system1 router refit` learns the answering model's skill from."""
    try:
        service.router.require_on()
        return JSONResponse(service.router.outcomes.feedback(await read_json(request), request.state.system1_client))
    except (RouterError, RequestError) as exc:
        return _error("openai", exc)


@router_routes.get("/v1/models")
async def models(service: ServiceDep) -> dict[str, Any]:
    """The routed aliases and the catalogue's models, in OpenAI's list shape."""
    settings = service.router.settings
    if not settings.enabled:
        return {"object": "list", "data": []}
    data = [{"id": alias, "object": "model", "owned_by": "system1-router"} for alias in settings.aliases]
    data += [{"id": m.id, "object": "model", "owned_by": m.upstream} for m in settings.models]
    return {"object": "list", "data": data}
