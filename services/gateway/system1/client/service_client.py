"""The one client of a running gateway service, for the stdio bridge and every command.

`ServiceClient.from_env()` finds the service at `--url`, else `SYSTEM1_GATEWAY_URL`, else
`http://127.0.0.1:8080`, and authenticates with the service's bridge token when it can read
it (inside the container), else with `SYSTEM1_API_KEY`. Every failure to get an answer is a
`GatewayError` naming the URL and the reason. `transport=` lets tests talk to the app in
process (`httpx.ASGITransport`). It imports no web framework, so the bridge starts fast.
"""

from __future__ import annotations

import json as _json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from ..core.paths import install_dir
from . import headers
from .token import read_bridge_token

DEFAULT_URL = "http://127.0.0.1:8080"
DEFAULT_TIMEOUT_S = 330.0  # the longest per-attempt timeout (300 s) plus room for the queue
URL_ENV = "SYSTEM1_GATEWAY_URL"


class GatewayError(Exception):
    """The gateway service at `url` gave no usable answer; the message says which and why."""

    def __init__(self, url: str, reason: str, *, timeout: bool = False, status: int | None = None) -> None:
        super().__init__(f"the gateway service at {url} {reason}")
        self.url = url
        self.timeout = timeout
        self.status = status


@dataclass(frozen=True)
class DecideReply:
    envelope: dict[str, Any]
    #: The model that answered (`X-System1-Model`), when one did.
    model: str | None
    status: int


def default_url(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    return env.get(URL_ENV) or DEFAULT_URL


class ServiceClient:
    def __init__(
        self,
        url: str = DEFAULT_URL,
        token: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        auth = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.AsyncClient(base_url=self.url, headers=auth, trust_env=False, timeout=timeout_s,
                                      transport=transport)

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None = None,
        url: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> ServiceClient:
        env = os.environ if env is None else env
        token = read_bridge_token(install_dir(env)) or env.get("SYSTEM1_API_KEY") or None
        timeout_s = float(env.get("SYSTEM1_BRIDGE_TIMEOUT_S") or DEFAULT_TIMEOUT_S)
        return cls(url or default_url(env), token, timeout_s, transport)

    async def __aenter__(self) -> ServiceClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.http.aclose()

    # -- calls -------------------------------------------------------------------------------
    async def decide(
        self, request: dict[str, Any], *, client: str | None = None, batch: bool = False, calibrate: bool = True,
        provider: str | None = None,
    ) -> DecideReply:
        """One decision (of configured `provider` alone, when named); the envelope comes back
        whatever its status (errors are envelopes too)."""
        sent = {headers.CLIENT: client} if client else {}
        if provider:
            sent[headers.PROVIDER] = provider
        if batch:
            sent[headers.PRIORITY] = "batch"
        if not calibrate:
            sent[headers.CALIBRATION] = "off"
        response = await self._send("POST", "/v1/decide", json=request, headers=sent)
        return DecideReply(self._body(response), response.headers.get(headers.MODEL), response.status_code)

    async def feedback(self, request_id: str, label: str) -> dict[str, Any]:
        """Label a decision the gateway remembered."""
        return self._ok(await self._send("POST", "/v1/feedback", json={"request_id": request_id, "label": label}))

    async def labelled(self, unlabelled: bool = False) -> list[dict[str, Any]]:
        """The labelled decisions the gateway remembers (or the unlabelled ones), as `learn` rows."""
        path = "/v1/labels?unlabelled=true" if unlabelled else "/v1/labels"
        return self._list(await self._send("GET", path), "rows")

    async def routing_entries(self) -> dict[str, Any]:
        """`{"entries", "unreadable_lines"}`: the service's routing log entries worth evaluating."""
        return self._ok(await self._send("GET", "/v1/routing/entries"))

    async def waiting_prompts(self, limit: int) -> list[dict[str, Any]]:
        """The newest logged prompts waiting for teacher labels."""
        return self._list(await self._send("GET", "/v1/routing/waiting", params={"limit": limit}), "prompts")

    async def label_prompts(self, labels: dict[str, Any]) -> dict[str, Any]:
        """Write teacher labels into the service's routing log: `{"labelled": n}`."""
        return self._ok(await self._send("POST", "/v1/routing/labels", json=labels))

    async def apply_outcomes(self, verdicts: dict[str, Any]) -> dict[str, Any]:
        """Write spawn outcomes into the service's routing log: `{"applied": n}`."""
        return self._ok(await self._send("POST", "/v1/outcomes", json=verdicts))

    async def embed(self, request: dict[str, Any], client: str | None = None) -> dict[str, Any]:
        """`{"embedder", "model", "embedding", "kind"}` for a decide request's judged text, asked
        as `client`'s batch work; `GatewayError` when the embedder failed (the service's envelope
        says why)."""
        sent = {headers.CLIENT: client} if client else {}
        body = self._ok(await self._send("POST", "/v1/embed", json=request, headers=sent))
        if isinstance(body.get("error"), dict):
            raise GatewayError(self.url, f"could not embed: {body['error'].get('message')}")
        return body

    async def route(self, event: dict[str, Any], client: str | None = None) -> dict[str, Any]:
        """What the routing hook would print for one Claude Code hook event."""
        sent = {headers.CLIENT: client} if client else {}
        return self._ok(await self._send("POST", "/v1/route", json=event, headers=sent))

    async def features(self, prompt: str, provider: str | None = None, *, client: str | None = None,
                       batch: bool = False) -> dict[str, Any]:
        """`{"features": {name: {answer, confidence, probabilities, ...}} | None, "error"}` for one
        prompt, from the chain or the named provider."""
        sent = {headers.CLIENT: client} if client else {}
        if batch:
            sent[headers.PRIORITY] = "batch"
        body = {"prompt": prompt, **({"provider": provider} if provider else {})}
        return self._ok(await self._send("POST", "/v1/features", json=body, headers=sent))

    async def health(self) -> dict[str, Any]:
        return self._ok(await self._send("GET", "/v1/health"))

    async def capabilities(self) -> dict[str, Any]:
        return self._ok(await self._send("GET", "/v1/capabilities"))

    async def reload(self) -> dict[str, Any]:
        """`{"reloaded": bool, "errors": [...], "skipped": [...]}` (skipped: learned files that could
        not be used); a refused reload (409) is an answer, not an error."""
        return self._ok(await self._send("POST", "/v1/reload", json={}, timeout=30), also=(409,))

    # -- plumbing ----------------------------------------------------------------------------
    async def _send(self, method: str, path: str, json: Any = None, **kwargs: Any) -> httpx.Response:
        if json is not None:
            # ASCII escapes: a lone surrogate or NaN reaches the service, which names the field,
            # instead of failing to encode here.
            kwargs["content"] = _json.dumps(json).encode("ascii")
            kwargs["headers"] = {**kwargs.get("headers", {}), "Content-Type": "application/json"}
        try:
            return await self.http.request(method, path, **kwargs)
        except httpx.TimeoutException as exc:
            timeout = kwargs.get("timeout", self.timeout_s)
            raise GatewayError(self.url, f"did not answer within {timeout:g} s", timeout=True) from exc
        except httpx.HTTPError as exc:
            raise GatewayError(self.url, f"is unreachable ({type(exc).__name__}); is the stack up?") from exc

    def _body(self, response: httpx.Response) -> dict[str, Any]:
        try:
            body = response.json()
        except ValueError as exc:
            raise GatewayError(self.url, f"answered HTTP {response.status_code} without JSON",
                               status=response.status_code) from exc
        if not isinstance(body, dict):
            raise GatewayError(self.url, "answered with JSON that is not an object", status=response.status_code)
        return body

    def _list(self, response: httpx.Response, what: str) -> list[dict[str, Any]]:
        try:
            body = response.json() if response.status_code == 200 else None
        except ValueError:
            body = None
        if not isinstance(body, list):
            raise GatewayError(self.url, f"answered HTTP {response.status_code} without a list of {what}",
                               status=response.status_code)
        return body

    def _ok(self, response: httpx.Response, also: tuple[int, ...] = ()) -> dict[str, Any]:
        body = self._body(response)
        if response.status_code != 200 and response.status_code not in also:
            error = body.get("error") if isinstance(body.get("error"), dict) else {}
            reason = error.get("message") or f"HTTP {response.status_code}"
            raise GatewayError(self.url, f"refused the request: {reason}", status=response.status_code)
        return body
