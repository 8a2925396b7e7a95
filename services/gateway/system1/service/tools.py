"""The three MCP tools, declared once: name, description, input schema, hints and the call.

The stdio server, `/mcp` and the bridge all serve this table (through `mcp.build_server`), and
`system1_capabilities` lists it. A tool talks to a `Backend`: the core in this process, or the
gateway service over HTTP (the bridge).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..core.schema import json_schemas

_EMPTY_INPUT = {"type": "object", "properties": {}, "additionalProperties": False}


class Backend(Protocol):
    """Where the tools get their answers; every method returns a JSON-ready dict."""

    async def decide(self, arguments: dict[str, Any], client: str) -> dict[str, Any]: ...

    async def health(self) -> dict[str, Any]: ...

    async def capabilities(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    call: Callable[[Backend, dict[str, Any], str], Awaitable[dict[str, Any]]]
    takes_arguments: bool = False
    open_world: bool | None = None


TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool(
            "system1_decide",
            "Ask the fast local engine for one decision among `options` (or yes/no without options). "
            "Returns the decision with a calibrated confidence, or `abstained` when it is not sure "
            "enough: then reason it through yourself.",
            # No output schema: it would cost every session ~700 tokens of context; the response
            # schema is one system1_capabilities call away.
            json_schemas()["request.json"],
            lambda backend, arguments, client: backend.decide(arguments, client),
            takes_arguments=True,
            open_world=False,
        ),
        Tool(
            "system1_health",
            "Gateway status (ok, degraded, down, paused) and a probe of each engine.",
            _EMPTY_INPUT,
            lambda backend, arguments, client: backend.health(),
        ),
        Tool(
            "system1_capabilities",
            "Versions, provider chain, thresholds, engine limits, calibration fits and schemas.",
            _EMPTY_INPUT,
            lambda backend, arguments, client: backend.capabilities(),
        ),
    )
}
