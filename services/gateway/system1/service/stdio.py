"""MCP over a line-delimited wire (stdin/stdout, or the service's local socket), with two
things the SDK's stdio transport leaves out.

- A line that is not JSON, or not a JSON-RPC message, gets a JSON-RPC error (id null) instead
  of silence, so a client learns what went wrong.
- When the input closes, calls already in flight are finished and answered (within
  `DRAIN_TIMEOUT_S`) before the server stops, instead of being dropped.

It sits between the wire's streams (the SDK's `stdio_server`, or `mcp_socket.socket_wire`) and
the server: the wire keeps one writer, this loop only watches the messages going by.
"""

from __future__ import annotations

import anyio
import mcp_types as types
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

DRAIN_TIMEOUT_S = 330.0  # as long as the bridge waits for one answer


class LineTooLong(Exception):
    """A line longer than the wire allows; the wire stops reading after it."""


def error_message(code: int, reason: str) -> SessionMessage:
    """A JSON-RPC error for no request in particular (id null)."""
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(code=code, message=reason[:200])))


def refusal(exc: Exception) -> SessionMessage:
    """The JSON-RPC error for a line that is not JSON (-32700) or not a JSON-RPC message (-32600)."""
    code, reason = types.INVALID_REQUEST, f"not a JSON-RPC message ({type(exc).__name__})"
    if isinstance(exc, LineTooLong):
        reason = str(exc)
    elif isinstance(exc, ValidationError) and exc.errors():
        first = exc.errors()[0]
        if first["type"] == "json_invalid":
            code, reason = types.PARSE_ERROR, first["msg"]
        else:
            reason = f"not a JSON-RPC message: {first['msg']}"
    return error_message(code, reason)


async def serve_stdio(server: Server, drain_timeout_s: float = DRAIN_TIMEOUT_S) -> None:
    """Serve `server` on this process's stdin and stdout until stdin closes and calls in flight
    are answered."""
    async with stdio_server() as (wire_in, wire_out):
        await serve_wire(server, wire_in, wire_out, drain_timeout_s)


async def serve_wire(
    server: Server,
    wire_in: ObjectReceiveStream[SessionMessage | Exception],
    wire_out: ObjectSendStream[SessionMessage],
    drain_timeout_s: float = DRAIN_TIMEOUT_S,
) -> None:
    """Serve one session on a wire until its input ends and calls in flight are answered; an
    item of `wire_in` that is an exception is a line that did not parse."""
    to_server, server_in = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    server_out, from_server = anyio.create_memory_object_stream[SessionMessage](0)
    pending: set[types.RequestId] = set()
    closing, drained = False, anyio.Event()

    async def inbound() -> None:
        nonlocal closing
        async with to_server:
            async for item in wire_in:
                if isinstance(item, Exception):
                    await wire_out.send(refusal(item))
                    continue
                if isinstance(item.message, types.JSONRPCRequest):
                    pending.add(item.message.id)
                await to_server.send(item)
            closing = True
            if not pending:
                drained.set()
            with anyio.move_on_after(drain_timeout_s):
                await drained.wait()

    async def outbound() -> None:
        async with from_server:
            async for item in from_server:
                await wire_out.send(item)
                if isinstance(item.message, (types.JSONRPCResponse, types.JSONRPCError)):
                    pending.discard(item.message.id)
                    if closing and not pending:
                        drained.set()

    async with wire_out, anyio.create_task_group() as tasks:  # closing wire_out ends the wire's writer
        tasks.start_soon(inbound)
        tasks.start_soon(outbound)
        async with server_out:
            await server.run(server_in, server_out, server.create_initialization_options())
        tasks.cancel_scope.cancel()
