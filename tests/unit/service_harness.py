"""The gateway service for tests of its front doors: in process through `httpx.ASGITransport`
(the default), or on a real loopback socket for what only sockets show (MCP over streamable
HTTP, subprocesses, clients that hang up, signals)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import httpx
import uvicorn

from system1.service.app import create_app
from system1.service.service import Service

from .helpers import config_in

BASE_URL = "http://127.0.0.1"
T = TypeVar("T")


@dataclass
class InProcess:
    http: httpx.AsyncClient
    transport: httpx.ASGITransport
    service: Service
    state_dir: Path
    config_path: Path


@contextlib.asynccontextmanager
async def in_process(tmp_path: Path, toml: str, **env: str) -> AsyncIterator[InProcess]:
    """The app with its lifespan running (background probes, bridge token), no socket."""
    service = Service(config_in(tmp_path, toml, **env))
    app = create_app(service)
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app), httpx.AsyncClient(transport=transport, base_url=BASE_URL) as http:
        yield InProcess(http, transport, service, tmp_path / "state", tmp_path / "config.toml")


def app_transport(tmp_path: Path, toml: str, **env: str) -> tuple[httpx.ASGITransport, Service]:
    """A transport into the app for synchronous callers (the CLI's `main(..., transport=)`);
    the lifespan does not run, so there are no background probes."""
    service = Service(config_in(tmp_path, toml, **env))
    return httpx.ASGITransport(app=create_app(service)), service


def call(transport: httpx.ASGITransport, method: str, path: str, json: object = None,
         headers: dict[str, str] | None = None) -> httpx.Response:
    """One request through `transport`, from synchronous code."""

    async def send() -> httpx.Response:
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as http:
            return await http.request(method, path, json=json, headers=headers)

    return asyncio.run(send())


@dataclass
class Running:
    url: str
    service: Service
    state_dir: Path
    config_path: Path
    loop: asyncio.AbstractEventLoop

    def call(self, work: Callable[[], Awaitable[T]], timeout_s: float = 30) -> T:
        """`work()` run in the service's own event loop, from the test's thread; its result."""
        return asyncio.run_coroutine_threadsafe(work(), self.loop).result(timeout_s)


@contextlib.contextmanager
def running_service(tmp_path: Path, toml: str, **env: str) -> Iterator[Running]:
    """A real server on a free loopback port, returned once `/healthz` answers on it."""
    service = Service(config_in(tmp_path, toml, **env))
    server = uvicorn.Server(uvicorn.Config(create_app(service), log_config=None, lifespan="on"))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections wait in the backlog until the server accepts them
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    loop = asyncio.new_event_loop()  # the server's, kept so tests can run work in it (Running.call)

    def serve() -> None:
        loop.run_until_complete(server.serve(sockets=[sock]))
        # What the shutdown scheduled last (a closed socket's release, async generators' cleanup)
        # runs before the loop closes: left pending, its transport is collected unclosed later,
        # and the ResourceWarning lands in whichever test is running then.
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(asyncio.sleep(0))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        assert httpx.get(f"{url}/healthz", timeout=30).status_code == 200, "the service did not start"
        yield Running(url, service, tmp_path / "state", tmp_path / "config.toml", loop)
    finally:
        server.should_exit = True
        thread.join(30)
        loop.close()
        sock.close()
