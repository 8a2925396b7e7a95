"""A real gateway service on a free loopback port, for tests of the HTTP front doors."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from system1.api import create_app
from system1.service import Service


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets=None) -> None:
        await super().startup(sockets)
        self.ready.set()


@dataclass
class Running:
    url: str
    service: Service
    state_dir: Path
    config_path: Path


@contextlib.contextmanager
def running_service(tmp_path: Path, toml: str, **env: str) -> Iterator[Running]:
    config_path = tmp_path / "config.toml"
    config_path.write_text(toml, encoding="utf-8")
    state = tmp_path / "state"
    service = Service({"SYSTEM1_CONFIG": str(config_path), "SYSTEM1_INSTALL_DIR": str(state), **env})
    server = _Server(uvicorn.Config(create_app(service), host="127.0.0.1", port=0, log_config=None, lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        assert server.ready.wait(30), "the service did not start"
        port = server.servers[0].sockets[0].getsockname()[1]
        yield Running(f"http://127.0.0.1:{port}", service, state, config_path)
    finally:
        server.should_exit = True
        thread.join(30)
