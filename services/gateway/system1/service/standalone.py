"""`system1 mcp --standalone`: the tools answered by a core in the MCP process itself."""

from __future__ import annotations

from typing import Any

from ..core.gateway import Gateway
from .reports import capabilities_report, health_report


class CoreBackend:
    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway

    async def decide(self, arguments: dict[str, Any], client: str) -> dict[str, Any]:
        return (await self.gateway.decide(arguments, client=client)).envelope_json()

    async def health(self) -> dict[str, Any]:
        return await health_report(self.gateway)

    async def capabilities(self) -> dict[str, Any]:
        return capabilities_report(self.gateway)

    async def aclose(self) -> None:
        await self.gateway.aclose()
