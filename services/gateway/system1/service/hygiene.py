"""What every HTTP request passes before a route, for REST and `/mcp` alike: the Host and Origin
allow-lists, JSON-only request bodies, the body size limit and API keys (closed while their
configuration is broken); it names the caller, and answers any unexpected exception with a 500
envelope without dropping the connection."""

from __future__ import annotations

import logging

from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..core.schema import ErrorCode, error_response
from ..client import headers as h
from ..client.token import BRIDGE
from ..router.plan import RouterError
from ..router.router import error_body
from .auth import host_allowed, valid_name
from .service import Service

logger = logging.getLogger(__name__)

# Reachable without a key: liveness, readiness and metrics carry no decisions and no secrets.
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
# Liveness stays open even while the key configuration is broken.
ALWAYS_OPEN = "/healthz"
ANONYMOUS = "anonymous"
JSON_TYPE = "application/json"
# The chat router's paths, whose body limit is `[router] max_body_bytes`.
CHAT_PATHS = frozenset({"/v1/chat/completions", "/v1/messages", "/v1/messages/count_tokens", "/v1/router/route"})
# The router's paths, whose refusals come in the client API's error shape.
ROUTER_PATHS = CHAT_PATHS | {"/v1/router/feedback"}
# The REST routes that take a body; a POST elsewhere is the router's 404 or 405.
JSON_POSTS = frozenset({"/v1/decide", "/v1/route", "/v1/features", "/v1/reload", "/v1/feedback", "/v1/outcomes",
                        "/v1/embed", "/v1/routing/labels", "/v1/router/feedback", *CHAT_PATHS})


#: On the chat routes, the error type each refusal has in the client API's shape.
CHAT_ERROR_TYPES = {401: "authentication_error", 403: "permission_error", 413: "request_too_large",
                    415: "invalid_request_error", 500: "api_error", 503: "api_error"}


def envelope(code: ErrorCode, message: str, status: int, headers: dict[str, str] | None = None) -> JSONResponse:
    """An HTTP-level failure as the schema v1 envelope."""
    body = error_response(code, message).model_dump(mode="json")
    return JSONResponse(body, status_code=status, headers=headers)


def refusal(path: str, status: int, message: str, code: ErrorCode = ErrorCode.INVALID_REQUEST,
            headers: dict[str, str] | None = None) -> JSONResponse:
    """An HTTP-level failure: on the chat routes in the client API's own error shape (so its SDK
    raises its usual exception), elsewhere as the schema v1 envelope."""
    if path not in ROUTER_PATHS:
        return envelope(code, message, status, headers)
    api = "anthropic" if path.startswith("/v1/messages") else "openai"
    error = RouterError(status, CHAT_ERROR_TYPES.get(status, "invalid_request_error"), message)
    return JSONResponse(error_body(api, error), status_code=status, headers=headers)


class _BodyTooLarge(Exception):
    pass


class Hygiene:
    """The checks, in order: Host, Origin (browsers send one; only `[service] allowed_origins`
    pass), a JSON content type on REST posts (no form or text/plain posts from a web page),
    declared body size, broken key configuration (everything but `/healthz` closed), API key.

    It names the caller in `scope["state"]`: the key's name, or for the bridge token (and when
    no keys are configured) the `X-System1-Client` header. Requests that pass go to the app, or
    to the `direct` app for their (method, path), which handles them without the router.
    """

    def __init__(self, app: ASGIApp, service: Service,
                 direct: dict[tuple[str, str], ASGIApp] | None = None) -> None:
        self.app = app
        self.service = service
        self.direct = direct or {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refused = self._refusal(scope, headers)
        if refused is not None:
            await refused(scope, receive, send)
            return
        limit = self._body_limit(scope["path"])
        identity = None
        # A bearer key, or Anthropic's x-api-key header (what its SDK and Claude Code send).
        authorization = headers.get("authorization", "")
        presented = authorization[7:].strip() if authorization.lower().startswith("bearer ") else headers.get("x-api-key", "")
        if presented:
            identity = self.service.keys.identify(presented)
        if scope["path"] not in OPEN_PATHS and self.service.keys.required and identity is None:
            reason = "a valid API key is required" if not presented else "the API key is not valid"
            await refusal(scope["path"], 401, f"unauthorized: {reason}", headers={"WWW-Authenticate": "Bearer"})(
                scope, receive, send)
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

        app = self.direct.get((scope["method"], scope["path"]), self.app)
        try:
            await app(scope, counted, watched)
        except _BodyTooLarge:
            if not started:
                await self._too_large(scope["path"], limit)(scope, receive, send)
        except Exception as exc:  # a bug must cost one request, not the connection or the process
            logger.exception("internal error answering %s %s", scope.get("method"), scope.get("path"))
            if not started:
                message = f"internal error in the gateway ({type(exc).__name__}); its log has the details"
                await refusal(scope["path"], 500, message, ErrorCode.PROVIDER_ERROR)(scope, receive, send)

    def _refusal(self, scope: Scope, headers: Headers) -> JSONResponse | None:
        """The answer for a request that may not go further, or None."""
        settings = self.service.config.settings.service
        path, method = scope["path"], scope.get("method", "GET")
        host = headers.get("host")
        if not host_allowed(host, settings.allowed_hosts):
            return refusal(path, 403, f"Host {host!r} is not allowed")
        origin = headers.get("origin")
        if origin is not None and origin not in settings.allowed_origins:
            return refusal(path, 403, f"Origin {origin!r} is not allowed (browser pages may not call the gateway)")
        if method == "POST" and path in JSON_POSTS:
            kind = headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if kind != JSON_TYPE:
                return refusal(path, 415, f"request: the body must be {JSON_TYPE}, not {kind or 'untyped'}")
        length, limit = headers.get("content-length"), self._body_limit(path)
        if length is not None and (not length.isdigit() or int(length) > limit):
            return self._too_large(path, limit)
        if self.service.key_errors and path != ALWAYS_OPEN:
            problems = "; ".join(self.service.key_errors)
            return refusal(path, 503, f"the API key configuration is broken, so the gateway is closed until it is "
                           f"fixed: {problems}", ErrorCode.CONFIG_ERROR)
        return None

    def _body_limit(self, path: str) -> int:
        settings = self.service.config.settings
        return settings.router.max_body_bytes if path in CHAT_PATHS else settings.service.max_body_bytes

    @staticmethod
    def _too_large(path: str, limit: int) -> JSONResponse:
        return refusal(path, 413, f"request body is larger than {limit} bytes")
