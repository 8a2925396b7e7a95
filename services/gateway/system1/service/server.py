"""Running the service: uvicorn around the app, a deadline for request headers, and reloads on
SIGHUP from the first moment of start-up.

- A connection that has not sent a whole request head within `[service] header_timeout_s` is
  closed, so half-sent requests cannot pile up (uvicorn's own keep-alive timeout only covers
  the time between requests).
- SIGHUP is caught before anything heavy is imported; one that arrives during start-up is
  honoured once the service runs, instead of killing the process.
- The production stack: uvloop's event loop and the httptools request parser (both installed
  with the package) where they import, else asyncio's loop and h11; `server_stack()` says which.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import signal
from typing import Any

logger = logging.getLogger(__name__)

def catch_early_reloads() -> list[int]:
    """Catch SIGHUP now; the returned list records any that arrive before `serve` runs."""
    received: list[int] = []
    signal.signal(signal.SIGHUP, lambda number, frame: received.append(number))
    return received


def server_stack() -> tuple[str, str]:
    """(event loop, HTTP parser): ("uvloop", "httptools") where both import, else the pure-Python
    fallbacks, one at a time."""
    def importable(name: str) -> bool:
        try:
            importlib.import_module(name)
        except ImportError:
            return False
        return True

    return ("uvloop" if importable("uvloop") else "asyncio"), ("httptools" if importable("httptools") else "h11")


def _protocol(parser: str, header_timeout_s: float) -> type:
    if parser == "httptools":
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as Base
    else:
        from uvicorn.protocols.http.h11_impl import H11Protocol as Base

    class HeaderDeadline(Base):
        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._head_timer = self.loop.call_later(header_timeout_s, self._no_request_in_time)

        def _no_request_in_time(self) -> None:
            if self.cycle is None and not self.transport.is_closing():
                self.transport.close()

        def connection_lost(self, exc: Exception | None) -> None:
            self._head_timer.cancel()
            super().connection_lost(exc)

    return HeaderDeadline


def serve(service: Any, host: str, port: int, early_reloads: list[int]) -> None:
    import uvicorn

    from .app import create_app

    loop, parser = server_stack()
    logger.info("serving on %s:%d with the %s event loop and the %s HTTP parser", host, port, loop, parser)
    server = uvicorn.Server(uvicorn.Config(
        create_app(service), host=host, port=port, http=_protocol(parser, service.config.settings.service.header_timeout_s),
        log_config=None, access_log=False,
        proxy_headers=False,  # no proxy sits in front of it; the client is whoever connected
        timeout_graceful_shutdown=10,
    ))

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGHUP, lambda: asyncio.ensure_future(service.reload()))
        if early_reloads:
            asyncio.ensure_future(service.reload())
        await server.serve()

    with asyncio.Runner(loop_factory=importlib.import_module("uvloop").new_event_loop if loop == "uvloop" else None) as runner:
        runner.run(main())
