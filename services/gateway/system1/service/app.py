"""The HTTP front door: REST, MCP over streamable HTTP at `/mcp`, health and metrics.

`create_app(service)` builds the app around an injected `Service`; routes stay thin and every
error body, the framework's own included, is the schema v1 envelope. HTTP status follows the
envelope: 200 for decided and abstained answers and for provider-side errors (the envelope
says which), 400 for an invalid request, 401/403 for auth and Host, 413 for an oversized body,
429 with `Retry-After` when every lane is full, 503 for a broken config.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route

from .. import __version__
from ..core.result import Decision
from ..core.schema import DecideResponse, ErrorCode, json_schemas
from . import headers
from .auth import BRIDGE
from .hygiene import ANONYMOUS, Hygiene, envelope
from .mcp import build_server
from .metrics import CONTENT_TYPE
from .service import Service


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


class _ServiceBackend:
    """The MCP tools inside the service call the shared core."""

    def __init__(self, service: Service) -> None:
        self.service = service

    async def decide(self, arguments: dict[str, Any], client: str) -> dict[str, Any]:
        return (await self.service.decide(arguments, client)).envelope_json()

    async def health(self) -> dict[str, Any]:
        return await self.service.health()

    async def capabilities(self) -> dict[str, Any]:
        return await self.service.capabilities()


async def _unless_disconnected(request: Request, work: Any) -> Any:
    """Run `work`, but cancel it (leaving its lane queue) if the client hangs up first."""

    async def hung_up() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    task, watcher = asyncio.ensure_future(work), asyncio.ensure_future(hung_up())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await watcher
    if task.cancelled():
        return None
    return task.result()


def _mcp_client(ctx: Any) -> str:
    request = getattr(ctx, "request", None)
    scope = getattr(request, "scope", None) or {}
    return scope.get("state", {}).get("system1_client", ANONYMOUS)


def create_app(service: Service) -> FastAPI:
    mcp_server = build_server(_ServiceBackend(service), _mcp_client)
    sessions = StreamableHTTPSessionManager(
        app=mcp_server,
        # Host checks happen in `Hygiene` for every route, with the configured allow-list.
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    # The SDK keeps no public count of open sessions; read its table for the gauge.
    service.metrics.mcp_sessions.set_function(lambda: len(getattr(sessions, "_server_instances", {})))

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await service.start()
        try:
            async with sessions.run():
                yield
        finally:
            await service.stop()

    app = FastAPI(
        title="System-1 Gateway",
        version=__version__,
        summary="Fast multiple-choice decisions with calibrated confidence and abstention.",
        lifespan=lifespan,
    )
    app.state.service = service

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return envelope(ErrorCode.INVALID_REQUEST, f"{request.method} {request.url.path}: {exc.detail}", exc.status_code)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> JSONResponse:
        return envelope(ErrorCode.PROVIDER_ERROR, f"internal error ({type(exc).__name__})", 500)

    @app.post("/v1/decide", response_model=DecideResponse, responses={400: {"model": DecideResponse}})
    async def decide(request: Request) -> JSONResponse:
        """Schema v1 request in, schema v1 envelope out (also on errors)."""
        try:
            payload = json.loads(await request.body())
        except (ValueError, UnicodeDecodeError):
            return envelope(ErrorCode.INVALID_REQUEST, "request: body is not valid JSON", 400)
        client = request.state.system1_client
        priority = service.priority_of(client, request.headers.get(headers.PRIORITY))
        calibrate = request.headers.get(headers.CALIBRATION, "on").lower() != "off"
        decision = await _unless_disconnected(request, service.decide(payload, client, priority, calibrate))
        if decision is None:  # nobody is waiting for this answer any more
            return JSONResponse({}, status_code=499)
        status, extra = status_of(decision)
        if decision.model:
            extra[headers.MODEL] = decision.model
        return JSONResponse(decision.envelope_json(), status_code=status, headers=extra)

    @app.post("/v1/route")
    async def route(request: Request) -> JSONResponse:
        """The routing hook: a Claude Code hook event in, the context to add (or none) out."""
        try:
            event = json.loads(await request.body())
        except (ValueError, UnicodeDecodeError):
            return envelope(ErrorCode.INVALID_REQUEST, "request: body is not valid JSON", 400)
        if not isinstance(event, dict):
            return envelope(ErrorCode.INVALID_REQUEST, "request: the hook input must be a JSON object", 400)
        outcome = await service.route(event, request.state.system1_client)
        return JSONResponse(outcome.as_dict())

    @app.get("/v1/health")
    async def health() -> dict[str, Any]:
        """Gateway status and a cached probe of each engine in the chain."""
        return await service.health()

    @app.get("/v1/capabilities")
    async def capabilities() -> dict[str, Any]:
        return await service.capabilities()

    @app.get("/v1/schema/{name}")
    async def schema(name: str) -> JSONResponse:
        schemas = json_schemas()
        if name not in schemas:
            return envelope(ErrorCode.INVALID_REQUEST, f"no schema {name!r}; there are {sorted(schemas)}", 404)
        return JSONResponse(schemas[name])

    @app.post("/v1/reload")
    async def reload(request: Request) -> JSONResponse:
        """Re-read the config and calibration fits (the bridge token, or no keys configured)."""
        if service.keys.required and request.state.system1_identity != BRIDGE:
            return envelope(ErrorCode.INVALID_REQUEST, "reload needs the service's bridge token", 403)
        result = await service.reload()
        return JSONResponse(result, status_code=200 if result["reloaded"] else 409)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        """The process is alive; no engine is called."""
        return {"status": "alive"}

    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        """The config is loaded and the core is ready to decide."""
        body = {"ready": service.ready, "config_errors": list(service.gateway.errors)}
        return JSONResponse(body, status_code=200 if service.ready else 503)

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(service.metrics.render(), media_type=CONTENT_TYPE)

    app.router.routes.append(Route("/mcp", endpoint=StreamableHTTPASGIApp(sessions)))
    app.add_middleware(Hygiene, service=service)
    return app
