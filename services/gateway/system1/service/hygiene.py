"""What every HTTP request passes before a route: the Host allow-list, the body size limit and
API keys, for REST and `/mcp` alike; it also names the caller."""

from __future__ import annotations

from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..core.schema import ErrorCode, error_response
from . import headers as h
from .auth import BRIDGE, host_allowed, valid_name
from .service import Service

# Reachable without a key: liveness, readiness and metrics carry no decisions and no secrets.
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
ANONYMOUS = "anonymous"


def envelope(code: ErrorCode, message: str, status: int, headers: dict[str, str] | None = None) -> JSONResponse:
    """An HTTP-level failure as the schema v1 envelope."""
    body = error_response(code, message).model_dump(mode="json")
    return JSONResponse(body, status_code=status, headers=headers)


class _BodyTooLarge(Exception):
    pass


class Hygiene:
    """Host allow-list, body size limit and API keys, for every HTTP route including `/mcp`.

    It also names the caller in `scope["state"]`: the key's name, or for the bridge token (and
    when no keys are configured) the `X-System1-Client` header.
    """

    def __init__(self, app: ASGIApp, service: Service) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        settings = self.service.config.settings.service
        headers = Headers(scope=scope)
        if not host_allowed(headers.get("host"), settings.allowed_hosts):
            await envelope(ErrorCode.INVALID_REQUEST, f"Host {headers.get('host')!r} is not allowed", 403)(scope, receive, send)
            return
        limit = settings.max_body_bytes
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            await self._too_large(limit)(scope, receive, send)
            return
        identity = None
        authorization = headers.get("authorization", "")
        if authorization.lower().startswith("bearer "):
            identity = self.service.keys.identify(authorization[7:].strip())
        if scope["path"] not in OPEN_PATHS and self.service.keys.required and identity is None:
            reason = "a valid API key is required" if not authorization else "the API key is not valid"
            response = envelope(ErrorCode.INVALID_REQUEST, f"unauthorized: {reason}", 401, {"WWW-Authenticate": "Bearer"})
            await response(scope, receive, send)
            return
        named = headers.get(h.CLIENT, "")
        trusted_header = identity == BRIDGE or not self.service.keys.required
        if identity is not None and identity != BRIDGE:
            client = identity
        else:
            client = named if trusted_header and valid_name(named) else ANONYMOUS
        state = scope.setdefault("state", {})
        state["system1_client"] = client
        state["system1_identity"] = identity

        received = 0
        started = False

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise _BodyTooLarge
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except _BodyTooLarge:
            if not started:
                await self._too_large(limit)(scope, receive, send)

    @staticmethod
    def _too_large(limit: int) -> JSONResponse:
        return envelope(ErrorCode.INVALID_REQUEST, f"request body is larger than {limit} bytes", 413)
