"""The app factory: the REST routes, MCP over streamable HTTP at `/mcp` and on the local socket,
and the error envelope for every failure, the framework's own included.

`create_app(service)` builds the app around an injected `Service`; `Hygiene` checks Host, body
size and keys on every request before any route or `/mcp` sees it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route

from .. import __version__
from ..core.schema import ErrorCode, RequestError
from .hygiene import ANONYMOUS, Hygiene, envelope
from .mcp import build_server
from .mcp_http import McpSessions
from .mcp_socket import LocalMcp
from .router_routes import router_routes
from .routes import direct_decide, invalid_request, router
from .service import Service


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


def _mcp_client(ctx: Any) -> str:
    request = getattr(ctx, "request", None)
    scope = getattr(request, "scope", None) or {}
    return scope.get("state", {}).get("system1_client", ANONYMOUS)


def create_app(service: Service) -> FastAPI:
    backend = _ServiceBackend(service)
    mcp = McpSessions(build_server(backend, _mcp_client), service.config.settings.service)
    local_mcp = LocalMcp(lambda client: build_server(backend, client), mcp,
                         lambda: service.config.settings.service.max_body_bytes)
    service.metrics.mcp_sessions.set_function(lambda: len(mcp.open_sessions()))

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await service.start()
        try:
            async with mcp.running(), local_mcp.serving(service.config.install_dir):
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
        message = f"{request.method} {request.url.path}: {exc.detail}"
        return envelope(ErrorCode.INVALID_REQUEST, message, exc.status_code, exc.headers)  # 405 keeps its Allow

    @app.exception_handler(RequestError)
    async def bad_request(request: Request, exc: RequestError) -> JSONResponse:
        return invalid_request(exc)

    # Any other exception is answered by `Hygiene`, without closing the connection.

    app.include_router(router)
    app.include_router(router_routes)
    app.router.routes.append(Route("/mcp", endpoint=mcp))
    app.add_middleware(Hygiene, service=service, direct={("POST", "/v1/decide"): direct_decide(service)})
    return app
