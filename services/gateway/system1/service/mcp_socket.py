"""MCP sessions on the service's local socket (`<state>/run/mcp.sock`), for `system1 mcp`
started beside the service (`client/relay.py`).

Each connection is one session of the same SDK server as `/mcp`, on a line-delimited wire like
stdio: a first line names the caller (`{"system1_client": "<name>"}`; a name that is not a
valid client name is `anonymous`), then one JSON-RPC
message per line each way. Sessions count against the `/mcp` caps (`McpSessions`). A bad or
missing hello, a refused session or a line over `[service] max_body_bytes` gets a JSON-RPC
error (id null) before the service closes the connection. When the client closes its side,
calls in flight are answered first (`serve_wire`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from anyio.abc import ObjectReceiveStream, ObjectSendStream, SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp.server.lowlevel import Server
from mcp.shared.message import SessionMessage

from ..core.paths import mcp_socket_path
from .auth import valid_name
from .hygiene import ANONYMOUS
from .mcp_http import McpSessions
from .stdio import LineTooLong, error_message, serve_wire

logger = logging.getLogger(__name__)

HELLO_TIMEOUT_S = 5.0
HELLO_MAX_BYTES = 1024
FLUSH_TIMEOUT_S = 30.0  # for the last answers to reach a client that stopped reading


class Refused(Exception):
    """A connection that may not become a session; the message says why."""


async def _read_hello(reader: BufferedByteReceiveStream) -> str:
    try:
        with anyio.fail_after(HELLO_TIMEOUT_S):
            line = await reader.receive_until(b"\n", HELLO_MAX_BYTES)
    except TimeoutError:
        raise Refused(f"no hello line within {HELLO_TIMEOUT_S:g} s") from None
    except anyio.DelimiterNotFound:
        raise Refused(f"the hello line is longer than {HELLO_MAX_BYTES} bytes") from None
    except anyio.IncompleteRead:
        raise Refused("the connection closed before its hello line") from None
    try:
        client = json.loads(line)["system1_client"]
    except (ValueError, TypeError, KeyError):
        raise Refused('the first line must be {"system1_client": "<name>"}') from None
    # A name that is not a valid client name is anonymous, as the header is over HTTP.
    return client if isinstance(client, str) and valid_name(client) else ANONYMOUS


@contextlib.asynccontextmanager
async def socket_wire(
    reader: BufferedByteReceiveStream, stream: SocketStream, max_line_bytes: int
) -> AsyncIterator[tuple[ObjectReceiveStream[SessionMessage | Exception], ObjectSendStream[SessionMessage]]]:
    """The socket as the (input, output) message streams `serve_wire` takes, parsed and written
    as the SDK's stdio transport does."""
    to_input, wire_in = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    wire_out, from_output = anyio.create_memory_object_stream[SessionMessage](0)
    written = anyio.Event()
    too_long = LineTooLong(f"a line is longer than {max_line_bytes} bytes ([service] max_body_bytes)")

    async def read_lines() -> None:
        async with to_input:
            while True:
                try:
                    line = await reader.receive_until(b"\n", max_line_bytes)
                except anyio.IncompleteRead:  # the input ended; a last line may lack its newline
                    line = reader.buffer
                    if line.strip():
                        await to_input.send(_parse(line))
                    return
                except anyio.DelimiterNotFound:  # no way to find the next message after this
                    await to_input.send(too_long)
                    return
                except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return
                if len(line) > max_line_bytes:  # it arrived whole, with its newline, in one read
                    await to_input.send(too_long)
                elif line.strip():
                    await to_input.send(_parse(line))

    async def write_lines() -> None:
        try:
            async with from_output:
                async for item in from_output:
                    await stream.send(_line(item))
        finally:
            written.set()

    async with wire_in, anyio.create_task_group() as tasks:
        tasks.start_soon(read_lines)
        tasks.start_soon(write_lines)
        yield wire_in, wire_out
        with anyio.move_on_after(FLUSH_TIMEOUT_S):
            await written.wait()
        tasks.cancel_scope.cancel()  # the reader may still wait on a client that never closes


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except Exception as exc:  # answered as a JSON-RPC error by `serve_wire`
        return exc


class LocalMcp:
    """Serves sessions on the socket; `build` makes the MCP server for one named client."""

    def __init__(self, build: Callable[[str], Server], sessions: McpSessions, max_line_bytes: Callable[[], int]) -> None:
        self.build = build
        self.sessions = sessions
        self.max_line_bytes = max_line_bytes

    @contextlib.asynccontextmanager
    async def serving(self, state_dir: Path) -> AsyncIterator[Path | None]:
        """Listen on the socket while the context lasts; yields its path, or None when it cannot
        be made (then `system1 mcp` uses the HTTP bridge)."""
        path = mcp_socket_path(state_dir)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            os.chmod(path.parent, 0o700)  # the guard: a socket's own mode is set only after bind
            listener = await anyio.create_unix_listener(path, mode=0o600)
        except OSError as exc:
            logger.warning("no local MCP socket at %s (%s); `system1 mcp` will use HTTP", path, exc)
            yield None
            return
        try:
            async with listener, anyio.create_task_group() as tasks:
                tasks.start_soon(listener.serve, self._session)
                yield path
                tasks.cancel_scope.cancel()  # sessions still open end with the service
        finally:
            with contextlib.suppress(OSError):
                path.unlink()

    async def _session(self, stream: SocketStream) -> None:
        try:
            async with stream:
                await self._serve(stream)
        except Exception as exc:  # one broken session must not stop the listener
            if hung_up(exc):
                logger.info("a local MCP client hung up before its answer")
            else:
                logger.exception("local MCP session failed")

    async def _serve(self, stream: SocketStream) -> None:
        reader = BufferedByteReceiveStream(stream)
        try:
            client = await _read_hello(reader)
            refusal = self.sessions.refusal(client)
            if refusal is not None:
                raise Refused(refusal)
        except Refused as exc:
            await _send_error(stream, str(exc))
            return
        with self.sessions.local_session(client):
            async with socket_wire(reader, stream, self.max_line_bytes()) as (wire_in, wire_out):
                await serve_wire(self.build(client), wire_in, wire_out)


def hung_up(exc: BaseException) -> bool:
    """Whether `exc` says only that the client went away (alone, or every error of a group)."""
    gone = (anyio.BrokenResourceError, anyio.ClosedResourceError, BrokenPipeError, ConnectionResetError)
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(gone)[1] is None
    return isinstance(exc, gone)


def _line(item: SessionMessage) -> bytes:
    """One message as the wire carries it, as the SDK's stdio transport writes it."""
    return item.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"


async def _send_error(stream: SocketStream, reason: Any) -> None:
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        await stream.send(_line(error_message(types.INVALID_REQUEST, f"session refused: {reason}")))
