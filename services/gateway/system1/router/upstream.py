"""Forwarding a chat request to its upstream, and falling through to the next candidate.

- The body goes as the client sent it, with `model` set to the chosen model's upstream name and,
  where the client set no effort, the effort for the request's complexity.
- Keys come from the environment (`api_key_env`) and go only to their upstream; the client's
  own credentials (its gateway key) never leave the gateway.
- A 429, a 5xx, a refused connection or no answer in time, before any byte has reached the
  client, sends the request to the next candidate. In time: for a stream, its status and first
  chunk within `first_byte_timeout_s` (the chunk is read before the client gets the status);
  for a whole answer, within `timeout_s`. After that a stream is passed through as it
  arrives, never buffered; a failure mid-stream ends it with an error event in the client's
  API's shape, so its SDK raises instead of taking a cut answer as whole.
- Usage is read from the answer (a stream's usage events are read on the side) and priced.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import httpx

from ..core.router_config import ModelEntry, RouterSettings, Upstream
from .precheck import CHARS_PER_TOKEN
from .state import UpstreamSlots

PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}
#: Client headers an upstream needs to read the request as sent (Anthropic's version and betas).
PASSED_HEADERS = ("anthropic-version", "anthropic-beta")
ANTHROPIC_VERSION = "2023-06-01"
#: Upstream statuses that send the request on to the next candidate.
RETRIED = frozenset({429, 500, 502, 503, 504, 529})


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    #: Counted by the router (a stream that reported no usage), not reported by the upstream.
    estimated: bool = False

    def cost(self, model: ModelEntry) -> float:
        return (self.input_tokens * model.price.input + self.output_tokens * model.price.output) / 1e6

    def read(self, api: str, payload: Any) -> None:
        """Take the token counts an answer (or one event of a stream) reports."""
        if not isinstance(payload, dict):
            return
        if api == "anthropic" and isinstance(payload.get("message"), dict):  # a stream's message_start
            payload = payload["message"]
        usage = payload.get("usage")
        if not isinstance(usage, dict):
            return
        if api == "openai":
            self.input_tokens = _count(usage.get("prompt_tokens"), self.input_tokens)
            self.output_tokens = _count(usage.get("completion_tokens"), self.output_tokens)
            return
        read_in = sum(_count(usage.get(k), 0) for k in ("input_tokens", "cache_creation_input_tokens",
                                                          "cache_read_input_tokens"))
        self.input_tokens = read_in or self.input_tokens
        self.output_tokens = _count(usage.get("output_tokens"), self.output_tokens)


def _count(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default


class Oversized(Exception):
    """An upstream's answer, or one event of its stream, is larger than `max_answer_bytes`."""


class StreamUsage:
    """Reads usage from server-sent events as they pass, line by line, keeping only the last
    partial line (an event's JSON is never held whole beyond its line), of at most `max_line`
    bytes."""

    def __init__(self, api: str, usage: Usage, max_line: int) -> None:
        self.api = api
        self.usage = usage
        self.max_line = max_line
        self._partial = b""
        self._seen = 0

    def feed(self, chunk: bytes) -> None:
        self._seen += len(chunk)
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        if max(map(len, lines), default=0) > self.max_line or len(self._partial) > self.max_line:
            raise Oversized(f"an event of its stream is over {self.max_line} bytes")
        for line in lines:
            if line.startswith(b"data:") and b'"usage"' in line:
                try:
                    self.usage.read(self.api, json.loads(line[5:]))
                except ValueError:
                    pass

    def close(self) -> None:
        """At the stream's end: a stream that reported no usage (a client that set its own
        `stream_options`) is charged by what it sent, erring high (its framing counts too)."""
        if not (self.usage.input_tokens or self.usage.output_tokens):
            self.usage.output_tokens = math.ceil(self._seen / CHARS_PER_TOKEN)
            self.usage.estimated = True


@dataclass
class Attempted:
    """One candidate that did not answer, and why (for `X-Router-Failed` and the log)."""

    model: str
    why: str


@dataclass
class Forwarded:
    """The answer the client gets: from `model`, after the `failed` candidates."""

    model: str
    status: int
    headers: dict[str, str]
    #: The whole body (not streamed), or None when `stream` carries it.
    body: bytes | None
    stream: AsyncIterator[bytes] | None
    usage: Usage
    failed: list[Attempted] = field(default_factory=list)
    #: What cut a stream short after it started, once it has ended; None for a whole answer.
    broken: str | None = None


class AllBusy(Exception):
    """No candidate failed, but every one's upstream was at its connection limit."""


class AllFailed(Exception):
    def __init__(self, failed: list[Attempted]) -> None:
        super().__init__("; ".join(f"{a.model}: {a.why}" for a in failed) or "no candidate")
        self.failed = failed


def request_body(body: dict[str, Any], api: str, model: ModelEntry | None, effort: str, stream: bool) -> dict[str, Any]:
    """The body sent upstream: the client's, with the chosen model (None: passed through as
    sent) and the effort where the client set none."""
    sent = dict(body)
    if model is not None:
        sent["model"] = model.upstream_model
        if api == "openai" and effort and "reasoning_effort" not in body and "reasoning" not in body:
            sent["reasoning_effort"] = effort
    if api == "openai" and stream and "stream_options" not in body:
        sent["stream_options"] = {"include_usage": True}  # the final chunk then reports usage
    return sent


def upstream_key(upstream: Upstream) -> str:
    return os.environ.get(upstream.api_key_env, "") if upstream.api_key_env else ""


def without_key(content: bytes, key: str) -> bytes:
    """An upstream's refusal with its key blanked (an upstream may echo the key it refused)."""
    return content.replace(key.encode(), b"***") if len(key) >= 4 else content


def upstream_headers(upstream: Upstream, api: str, client_headers: Mapping[str, str]) -> dict[str, str]:
    key = upstream_key(upstream)
    headers = {"content-type": "application/json"}
    for name in PASSED_HEADERS:
        if name in client_headers:
            headers[name] = client_headers[name]
    if api == "anthropic":
        headers.setdefault("anthropic-version", ANTHROPIC_VERSION)
        if key:
            headers["x-api-key"] = key
    elif key:
        headers["authorization"] = f"Bearer {key}"
    return headers


def missing_key(settings: RouterSettings) -> dict[str, str]:
    """Model id → why it cannot be used: its upstream's key variable is named but not set."""
    return {m.id: f"{settings.upstreams[m.upstream].api_key_env} is not set" for m in settings.models
            if settings.upstreams[m.upstream].api_key_env and not os.environ.get(settings.upstreams[m.upstream].api_key_env)}


def _why(exc: Exception) -> str:
    if isinstance(exc, Oversized):
        return str(exc)
    return "no answer in time" if isinstance(exc, (TimeoutError, httpx.TimeoutException)) else "unreachable"


async def _read_at_most(response: httpx.Response, limit: int) -> bytes:
    """The whole answer, or `Oversized` as soon as it passes `limit` bytes."""
    chunks, size = [], 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise Oversized(f"its answer is over {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def _first_chunk(response: httpx.Response) -> tuple[bytes, AsyncIterator[bytes]]:
    chunks = response.aiter_raw()
    try:
        return await chunks.__anext__(), chunks
    except StopAsyncIteration:
        return b"", chunks


def stream_error(api: str, message: str) -> bytes:
    """An error event in the client's API's stream shape, which its SDK raises as an error (after
    a blank line, which ends any event the break cut short)."""
    if api == "anthropic":
        event = {"type": "error", "error": {"type": "api_error", "message": message}}
        return f"\n\nevent: error\ndata: {json.dumps(event)}\n\n".encode()
    return f"\n\ndata: {json.dumps({'error': {'message': message, 'type': 'api_error', 'code': None}})}\n\n".encode()


async def _relay(first: bytes, rest: AsyncIterator[bytes], response: httpx.Response, tap: StreamUsage,
                 forwarded: Forwarded, api: str, release: Callable[[], None]) -> AsyncIterator[bytes]:
    """The stream as it arrives; a failure ends it with an error event, noted in `forwarded.broken`."""
    try:
        if first:
            tap.feed(first)
            yield first
        async for chunk in rest:
            tap.feed(chunk)
            yield chunk
    except (httpx.HTTPError, TimeoutError) as exc:
        forwarded.broken = f"the stream broke after it started ({type(exc).__name__})"
        yield stream_error(api, f"{forwarded.model}: {forwarded.broken}")
    except Oversized as exc:
        forwarded.broken = str(exc)
        yield stream_error(api, f"{forwarded.model}: {forwarded.broken}")
    finally:
        tap.close()
        await response.aclose()
        release()


async def forward(client: httpx.AsyncClient, settings: RouterSettings, api: str, body: dict[str, Any],
                  client_headers: Mapping[str, str], order: list[tuple[ModelEntry | None, str, str]],
                  stream: bool, slots: UpstreamSlots) -> Forwarded:
    """Try each (model or None for a pass-through, upstream name, effort) in turn, within each
    upstream's connection limit; `AllFailed` when none answers, `AllBusy` when every one was
    skipped at its limit."""
    failed: list[Attempted] = []
    busy: list[str] = []
    for model, upstream_name, effort in order:
        upstream = settings.upstreams[upstream_name]
        label = model.id if model is not None else str(body.get("model"))
        if not slots.take(upstream_name, upstream.max_connections):
            busy.append(f"{label} ({upstream_name}: {upstream.max_connections} requests in flight)")
            continue
        give = partial(slots.release, upstream_name)
        try:
            forwarded = await _ask(client, settings, upstream, api, body, client_headers, model, label, effort,
                                   stream, failed, give)
        except BaseException:
            give()
            raise
        if forwarded is None or forwarded.stream is None:  # nothing more to read from it
            give()
        if forwarded is not None:
            return forwarded
    if busy and not failed:
        raise AllBusy("; ".join(busy))
    raise AllFailed(failed)


async def _ask(client: httpx.AsyncClient, settings: RouterSettings, upstream: Upstream, api: str, body: dict[str, Any],
               client_headers: Mapping[str, str], model: ModelEntry | None, label: str, effort: str, stream: bool,
               failed: list[Attempted], release: Callable[[], None]) -> Forwarded | None:
    """One candidate's answer, or None (noted in `failed`) to try the next; a stream calls
    `release` when it ends."""
    request = client.build_request(
        "POST", upstream.base_url + PATHS[api], json=request_body(body, api, model, effort, stream),
        headers=upstream_headers(upstream, api, client_headers),
        timeout=httpx.Timeout(upstream.timeout_s, connect=min(10.0, upstream.first_byte_timeout_s)))
    response = None
    # A stream's first bytes come early; a whole answer only when it is written.
    wait_s = upstream.first_byte_timeout_s if stream else upstream.timeout_s
    try:
        async with asyncio.timeout(wait_s):
            response = await client.send(request, stream=True)
            if response.status_code in RETRIED:
                failed.append(Attempted(label, f"HTTP {response.status_code}"))
                await response.aclose()
                return None
            if stream and response.status_code < 300:
                first, rest = await _first_chunk(response)
            else:
                content = await _read_at_most(response, settings.max_answer_bytes)
    except (httpx.HTTPError, TimeoutError, Oversized) as exc:
        if response is not None:
            await response.aclose()
        failed.append(Attempted(label, _why(exc)))
        return None
    usage = Usage()
    headers = {"content-type": response.headers.get("content-type", "application/json")}
    if stream and response.status_code < 300:
        forwarded = Forwarded(label, response.status_code, headers, None, None, usage, failed)
        forwarded.stream = _relay(first, rest, response, StreamUsage(api, usage, settings.max_answer_bytes),
                                  forwarded, api, release)
        return forwarded
    try:
        usage.read(api, json.loads(content))
    except ValueError:
        if response.status_code < 300:  # a success the client's SDK could not read: the next candidate
            failed.append(Attempted(label, "its answer is not JSON"))
            return None
    if response.status_code >= 400:
        content = without_key(content, upstream_key(upstream))
    return Forwarded(label, response.status_code, headers, content, None, usage, failed)
