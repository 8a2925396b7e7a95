"""The MCP server of the three tools in `tools.TOOLS`, over stdio or inside `/mcp`.

It is the official SDK's low-level `Server`, so the request schema of schema v1 is the tool's
input schema and our own validation answers bad arguments with an `invalid_request` envelope
instead of a protocol error. Tool failures are tool results (`isError`), never crashes. On
stdio, stdout carries only the protocol (logs go to stderr) and the process ends when stdin
closes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server

from .. import __version__
from .stdio import serve_stdio
from .tools import TOOLS, Backend

logger = logging.getLogger(__name__)

SERVER_NAME = "system1"
INSTRUCTIONS = (
    "system1_decide hands a small multiple-choice judgement call (which tool, is this "
    "destructive, which option fits) to a fast local engine. It answers `abstained` when it is "
    "not sure: then decide yourself. Not for writing, maths, dates or multi-step reasoning."
)


def tool_list() -> list[types.Tool]:
    return [
        types.Tool(
            name=tool.name,
            description=tool.description,
            input_schema=tool.input_schema,
            annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=tool.open_world),
        )
        for tool in TOOLS.values()
    ]


def _result(payload: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(payload, ensure_ascii=False))],
        structured_content=payload,
        is_error=payload.get("status") == "error",
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
        tool = TOOLS.get(params.name)
        if tool is None:
            return _failure(f"unknown tool {params.name!r}; this server has {list(TOOLS)}")
        if arguments and not tool.takes_arguments:
            return _failure(f"{params.name} takes no arguments; got {sorted(arguments)}")
        try:
            caller = client(ctx) if callable(client) else client
            return _result(await tool.call(backend, arguments, caller))
        except Exception as exc:  # a failing tool is a result, never a dead server
            logger.exception("tool %s failed", params.name)
            return _failure(f"{params.name} failed: {type(exc).__name__}: {exc}")

    return Server(
        SERVER_NAME,
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def run_stdio(backend_factory: Callable[[], Awaitable[Any]], client: str) -> None:
    """Serve the tools on stdin/stdout until stdin closes, then close the backend."""

    async def main() -> None:
        backend = await backend_factory()
        try:
            await serve_stdio(build_server(backend, client))
        finally:
            await backend.aclose()

    anyio.run(main)
