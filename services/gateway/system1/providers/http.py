"""What every HTTP adapter shares: the loopback guard, proxy policy, and typed errors.

- A non-loopback endpoint is refused unless the provider sets `allow_remote = true`.
- Calls to loopback (and to plain-http engines, such as the stack's internal network) never go
  through a system proxy; only remote https may use one, as a CONNECT tunnel.
- Redirects are never followed, so credentials only reach the configured endpoint.
- httpx exceptions become `ProviderTimeout` / `ProviderError` / `MalformedResponse` here and
  nowhere else, carrying the provider, the engine URL without credentials and the status.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx
from pydantic import field_validator, model_validator

from .base import MalformedResponse, ProviderError, ProviderOptions, ProviderTimeout
from .hosts import is_loopback

_MAX_DETAIL_CHARS = 300
SECRET_HEADERS = frozenset({"authorization", "x-api-key"})


def redact_url(url: str) -> str:
    """`url` without any user name or password, for logs, errors and health."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]).geturl()


def check_endpoint(url: str, allow_remote: bool, *, require_https_remote: bool = False) -> str:
    """Return the endpoint without a trailing slash, or raise ValueError saying what is wrong."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"endpoint {redact_url(url)!r} is not an http(s) URL")
    loopback = is_loopback(parts.hostname)
    if not loopback and not allow_remote:
        raise ValueError(
            f"endpoint {redact_url(url)!r} is not on loopback; set allow_remote = true to use a remote engine"
        )
    if require_https_remote and not loopback and parts.scheme != "https":
        raise ValueError(f"endpoint {redact_url(url)!r} must use https (plain http only on loopback)")
    return url.rstrip("/")


class HttpOptions(ProviderOptions):
    endpoint: str
    allow_remote: bool = False

    @field_validator("endpoint")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()

    @model_validator(mode="after")
    def _guard(self) -> HttpOptions:
        self.endpoint = check_endpoint(self.endpoint, self.allow_remote)
        return self


def make_client(endpoint: str) -> httpx.AsyncClient:
    """A client for one engine: proxies only for remote https, never redirects."""
    parts = urlsplit(endpoint)
    use_proxy = parts.scheme == "https" and not is_loopback(parts.hostname or "")
    return httpx.AsyncClient(trust_env=use_proxy, follow_redirects=False)


def engine_message(response: httpx.Response, secrets: Sequence[str] = ()) -> str:
    """The engine's own error text from the shapes engines use, shortened, with any of the
    `secrets` sent to it blanked (an engine may echo the key it refused)."""
    text = response.text
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        detail = body.get("detail", body.get("error"))
        if isinstance(detail, dict):
            detail = detail.get("message", detail)
        if detail is not None:
            text = detail if isinstance(detail, str) else json.dumps(detail)
    text = " ".join(str(text).split())
    for secret in secrets:
        if len(secret) >= 4:
            text = text.replace(secret, "***")
    return text[:_MAX_DETAIL_CHARS] + ("…" if len(text) > _MAX_DETAIL_CHARS else "")


class HttpEngine:
    """JSON over HTTP to one engine endpoint, with the gateway's error mapping."""

    def __init__(self, client: httpx.AsyncClient, endpoint: str, label: str) -> None:
        self.client = client
        self.endpoint = endpoint
        self.label = label
        self.where = redact_url(endpoint)

    async def request(
        self,
        method: str,
        path: str,
        timeout_s: float,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        url = self.endpoint + path
        context = {"provider": self.label, "url": self.where + path}
        secrets = [v.rsplit(" ", 1)[-1] for k, v in (headers or {}).items() if k.lower() in SECRET_HEADERS]
        secrets += [p for p in (urlsplit(self.endpoint).password,) if p]
        try:
            response = await self.client.request(
                method, url, json=body, headers=headers, timeout=timeout_s
            )
        except httpx.TimeoutException as exc:
            raise ProviderTimeout(f"{self.label}: no answer within {timeout_s:g} s", **context) from exc
        except httpx.HTTPError as exc:
            reason = type(exc).__name__
            raise ProviderError(f"{self.label}: {reason} reaching {self.where}", **context) from exc
        status = response.status_code
        if response.is_redirect:
            raise ProviderError(f"{self.label}: HTTP {status} redirect refused", status=status, **context)
        if status >= 300:
            message = engine_message(response, secrets)
            raise ProviderError(f"{self.label}: HTTP {status}: {message}", status=status, **context)
        try:
            return response.json()
        except ValueError as exc:
            raise MalformedResponse(f"{self.label}: reply is not JSON", status=status, **context) from exc
