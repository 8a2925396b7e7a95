"""The stdio MCP entry as a thin bridge to the gateway service over HTTP.

`docker exec -i system1-gateway system1 mcp` starts this: it forwards each tool call to the
running service through `ServiceClient`, naming the caller from `SYSTEM1_CLIENT`, so every
user's session shares one core (engine connections, queues, batching, probes, metrics). It
imports no web framework, so it starts fast, and it answers `system1_health` with `down` and
decisions with an error envelope when the service is unreachable.
"""

from __future__ import annotations

from typing import Any

from ..core.schema import ErrorCode, RequestError, check_json_value, error_response
from .service_client import GatewayError, ServiceClient


class ServiceBackend:
    def __init__(self, client: ServiceClient) -> None:
        self.client = client

    async def decide(self, arguments: dict[str, Any], client: str) -> dict[str, Any]:
        try:
            check_json_value(arguments)  # what could not even be sent is refused here, by field
        except RequestError as exc:
            return error_response(ErrorCode.INVALID_REQUEST, exc.message.removeprefix("request.")).model_dump(mode="json")
        try:
            return (await self.client.decide(arguments, client=client)).envelope
        except GatewayError as exc:
            code = ErrorCode.PROVIDER_TIMEOUT if exc.timeout else ErrorCode.PROVIDER_ERROR
            return error_response(code, str(exc)).model_dump(mode="json")

    async def health(self) -> dict[str, Any]:
        try:
            return await self.client.health()
        except GatewayError as exc:
            return {"status": "down", "detail": str(exc), "providers": [], "config_errors": []}

    async def capabilities(self) -> dict[str, Any]:
        return await self.client.capabilities()

    async def aclose(self) -> None:
        await self.client.aclose()
