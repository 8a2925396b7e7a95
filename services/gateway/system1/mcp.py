"""The three MCP tools, `system1_decide`, `system1_health` and `system1_capabilities`.

They are served by the official SDK's low-level `Server`, so the request schema of schema v1 is
the tool's input schema and our own validation answers bad arguments with an `invalid_request`
envelope instead of a protocol error. Tool failures are tool results (`isError`), never
crashes. On stdio, stdout carries only the protocol (logs go to stderr) and the process ends
when stdin closes.

The tools talk to a `Backend`: the in-process core (`--standalone`, and `/mcp` inside the
service) or the gateway service over HTTP (the stdio bridge).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any, Protocol

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from . import __version__
from .schema import json_schemas

logger = logging.getLogger(__name__)

SERVER_NAME = "system1"
INSTRUCTIONS = (
    "system1_decide hands a small multiple-choice judgement call (which tool, is this "
    "destructive, which option fits) to a fast local engine. It answers `abstained` when it is "
    "not sure: then decide yourself. Not for writing, maths, dates or multi-step reasoning."
)
_EMPTY_INPUT = {"type": "object", "properties": {}, "additionalProperties": False}


class Backend(Protocol):
    """Where the tools get their answers; every method returns a JSON-ready dict."""

    async def decide(self, arguments: dict[str, Any], client: str) -> dict[str, Any]: ...

    async def health(self) -> dict[str, Any]: ...

    async def capabilities(self) -> dict[str, Any]: ...


class CoreBackend:
    """The gateway core in this process."""

    def __init__(self, gateway: Any) -> None:
        self.gateway = gateway

    async def decide(self, arguments: dict[str, Any], client: str) -> dict[str, Any]:
        response = await self.gateway.decide(arguments, client=client)
        return response.model_dump(mode="json")

    async def health(self) -> dict[str, Any]:
        return await self.gateway.health()

    async def capabilities(self) -> dict[str, Any]:
        return self.gateway.capabilities()

    async def aclose(self) -> None:
        await self.gateway.aclose()


def tool_list() -> list[types.Tool]:
    schemas = json_schemas()
    return [
        types.Tool(
            name="system1_decide",
            description=(
                "Ask the fast local engine for one decision among `options` (or yes/no without "
                "options). Returns the decision with a calibrated confidence, or `abstained` "
                "when it is not sure enough: then reason it through yourself."
            ),
            # No output schema: it would cost every session ~700 tokens of context; the response
            # schema is one system1_capabilities call away.
            input_schema=schemas["request.json"],
            annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
        ),
        types.Tool(
            name="system1_health",
            description="Gateway status (ok, degraded, down, paused) and a probe of each engine.",
            input_schema=_EMPTY_INPUT,
            annotations=types.ToolAnnotations(read_only_hint=True),
        ),
        types.Tool(
            name="system1_capabilities",
            description="Versions, provider chain, thresholds, engine limits, calibration fits and schemas.",
            input_schema=_EMPTY_INPUT,
            annotations=types.ToolAnnotations(read_only_hint=True),
        ),
    ]


def _result(payload: dict[str, Any], is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(payload, ensure_ascii=False))],
        structured_content=payload,
        is_error=is_error,
    )


def _failure(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


def build_server(backend: Backend, client: str | Callable[[Any], str]) -> Server:
    """The MCP server; `client` names the caller, or derives the name from the request context."""
    tools = tool_list()

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = params.arguments or {}
        try:
            if params.name == "system1_decide":
                caller = client(ctx) if callable(client) else client
                envelope = await backend.decide(arguments, caller)
                return _result(envelope, is_error=envelope.get("status") == "error")
            if arguments:
                return _failure(f"{params.name} takes no arguments; got {sorted(arguments)}")
            if params.name == "system1_health":
                return _result(await backend.health())
            if params.name == "system1_capabilities":
                return _result(await backend.capabilities())
        except Exception as exc:  # a failing tool is a result, never a dead server
            logger.exception("tool %s failed", params.name)
            return _failure(f"{params.name} failed: {type(exc).__name__}: {exc}")
        return _failure(f"unknown tool {params.name!r}; this server has {[t.name for t in tools]}")

    return Server(
        SERVER_NAME,
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_stdio(backend: Backend, client: str) -> None:
    """Serve until stdin closes."""
    server = build_server(backend, client)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def run_stdio(backend_factory: Any, client: str) -> None:
    async def main() -> None:
        backend = await backend_factory()
        try:
            await serve_stdio(backend, client)
        finally:
            close = getattr(backend, "aclose", None)
            if close is not None:
                await close()

    anyio.run(main)
