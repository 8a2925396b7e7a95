"""Small builders the unit tests share: configs in a temp dir and a fake engine on the wire."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from system1.core.config import LoadedConfig, load_config
from tests.processes import free_port


def config_in(tmp_path: Path, toml: str = "", **env: str) -> LoadedConfig:
    """Load a config file written into `tmp_path`, with `SYSTEM1_*` variables from `env`."""
    path = tmp_path / "config.toml"
    path.write_text(toml, encoding="utf-8")
    environ = {"SYSTEM1_CONFIG": str(path), "SYSTEM1_INSTALL_DIR": str(tmp_path / "state"), **env}
    return load_config(environ)


class FakeWire:
    """An engine behind `httpx.MockTransport`: records requests, answers with `handler`."""

    def __init__(self, handler: Callable[[httpx.Request], httpx.Response]) -> None:
        self.requests: list[httpx.Request] = []
        self._handler = handler

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self._handler(request)

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self))

    @property
    def bodies(self) -> list[Any]:
        return [json.loads(r.content) if r.content else None for r in self.requests]


def json_reply(body: Any, status: int = 200, **headers: str) -> Callable[[httpx.Request], httpx.Response]:
    return lambda request: httpx.Response(status, json=body, headers=headers)


def closed_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}"
