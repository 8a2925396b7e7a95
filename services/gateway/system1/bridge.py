"""The stdio MCP entry as a thin bridge to the gateway service over HTTP.

`docker exec -i system1-gateway system1 mcp` starts this: it forwards each tool call to the
service at `SYSTEM1_GATEWAY_URL` (default `http://127.0.0.1:8080`), naming the caller from
`SYSTEM1_CLIENT`, so every user's session shares one core (engine connections, queues,
batching, probes, metrics). It authenticates with the service's bridge token when it can read
it (inside the container), else with `SYSTEM1_API_KEY`. It imports no web framework, so it
starts fast, and it answers `system1_health` with `down` when the service is unreachable.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import httpx

from .auth import read_bridge_token
from .config import install_dir
from .schema import ErrorCode, error_response

DEFAULT_URL = "http://127.0.0.1:8080"
DEFAULT_TIMEOUT_S = 330.0  # the longest per-attempt timeout (300 s) plus room for the queue


class ServiceBackend:
    def __init__(self, url: str, token: str | None, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.AsyncClient(base_url=self.url, headers=headers, trust_env=False, timeout=timeout_s)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ServiceBackend:
        env = os.environ if env is None else env
        token = read_bridge_token(install_dir(env)) or env.get("SYSTEM1_API_KEY") or None
        timeout_s = float(env.get("SYSTEM1_BRIDGE_TIMEOUT_S") or DEFAULT_TIMEOUT_S)
        return cls(env.get("SYSTEM1_GATEWAY_URL") or DEFAULT_URL, token, timeout_s)

    def _unreachable(self, exc: Exception) -> str:
        if isinstance(exc, httpx.TimeoutException):
            return f"the gateway service at {self.url} did not answer within {self.timeout_s:g} s"
        return f"the gateway service at {self.url} is unreachable ({type(exc).__name__}); is the stack up?"

    async def decide(self, arguments: dict[str, Any], client: str) -> dict[str, Any]:
        try:
            response = await self.http.post("/v1/decide", json=arguments, headers={"X-System1-Client": client})
            body = response.json()
        except httpx.TimeoutException as exc:
            return error_response(ErrorCode.PROVIDER_TIMEOUT, self._unreachable(exc)).model_dump(mode="json")
        except (httpx.HTTPError, ValueError) as exc:
            return error_response(ErrorCode.PROVIDER_ERROR, self._unreachable(exc)).model_dump(mode="json")
        return body

    async def health(self) -> dict[str, Any]:
        try:
            response = await self.http.get("/v1/health")
            response.raise_for_status()
            return response.json()
        except (httpx.HTTPError, ValueError) as exc:
            return {"status": "down", "detail": self._unreachable(exc), "providers": [], "config_errors": []}

    async def capabilities(self) -> dict[str, Any]:
        response = await self.http.get("/v1/capabilities")
        response.raise_for_status()
        return response.json()

    async def aclose(self) -> None:
        await self.http.aclose()
