"""MCP over streamable HTTP at `/mcp`, with sessions capped per client and in total.

The SDK's session manager serves the protocol and closes sessions idle for
`[service] mcp_session_idle_s`; in front of it, a request that would open a new session is
refused (429, the envelope saying why) when its client already holds
`mcp_sessions_per_client` sessions or the gateway holds `mcp_sessions_total`. A session's owner
is the client named for the request that opened it. Sessions on the local socket
(`mcp_socket.py`) count against the same caps: they register here while they last.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator, Iterator
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.types import Message, Receive, Scope, Send

from ..core.config import ServiceSettings
from ..core.schema import ErrorCode
from .hygiene import ANONYMOUS, envelope

SESSION_HEADER = "mcp-session-id"


class McpSessions:
    """The ASGI app at `/mcp`."""

    def __init__(self, server: Any, settings: ServiceSettings) -> None:
        self.server = server
        self.settings = settings
        self.manager = self._new_manager()
        self._owners: dict[str, str] = {}  # session id -> client
        self._local: dict[str, str] = {}  # local socket session -> client
        self._local_ids = itertools.count(1)

    def _new_manager(self) -> StreamableHTTPSessionManager:
        return StreamableHTTPSessionManager(
            app=self.server,
            # Host and Origin are checked in `Hygiene` for every route, with the configured lists.
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            session_idle_timeout=self.settings.mcp_session_idle_s,
            max_sessions=self.settings.mcp_sessions_total,
        )

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Serve sessions for one run of the app (a manager runs only once, so each run of the
        app's lifespan gets a new one)."""
        self.manager, self._owners = self._new_manager(), {}
        async with self.manager.run():
            yield

    def open_sessions(self) -> dict[str, str]:
        """Live sessions, over HTTP and on the local socket, and their clients. The SDK keeps no
        public table of open sessions, so this reads its private one."""
        live = getattr(self.manager, "_server_instances", {})
        self._owners = {sid: client for sid, client in self._owners.items() if sid in live}
        return {**self._owners, **self._local}

    @contextlib.contextmanager
    def local_session(self, client: str) -> Iterator[None]:
        """Count a local socket session of `client` while it lasts."""
        key = f"local-{next(self._local_ids)}"
        self._local[key] = client
        try:
            yield
        finally:
            del self._local[key]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = scope.get("state", {}).get("system1_client", ANONYMOUS)
        opening = scope.get("method") == "POST" and SESSION_HEADER not in Headers(scope=scope)
        if opening:
            refusal = self.refusal(client)
            if refusal is not None:
                await envelope(ErrorCode.PROVIDER_ERROR, refusal, 429, {"Retry-After": "60"})(scope, receive, send)
                return

        async def record(message: Message) -> None:
            if opening and message["type"] == "http.response.start":
                session = Headers(raw=message.get("headers", [])).get(SESSION_HEADER)
                if session:
                    self._owners[session] = client
            await send(message)

        await self.manager.handle_request(scope, receive, record)

    def refusal(self, client: str) -> str | None:
        """Why `client` may not open another session now, or None."""
        owners = self.open_sessions()
        held = sum(1 for owner in owners.values() if owner == client)
        if held >= self.settings.mcp_sessions_per_client:
            return (f"{client} already holds {held} MCP sessions ([service] mcp_sessions_per_client); close one, "
                    f"or wait: idle ones close after {self.settings.mcp_session_idle_s:g} s")
        if len(getattr(self.manager, "_server_instances", {})) + len(self._local) >= self.settings.mcp_sessions_total:
            return f"the gateway holds its limit of {self.settings.mcp_sessions_total} MCP sessions ([service] mcp_sessions_total)"
        return None
