"""What a hostile or careless caller gets: a clear 4xx naming the field, never a 500, a crash,
an echo of what broke, or a forged log line; and nothing at all from a web page."""

from __future__ import annotations

import logging

import pytest

from system1.core.logs import SafeFormatter
from system1.client.bridge import ServiceBackend
from system1.client.service_client import ServiceClient

from ..helpers import closed_port_url
from ..service_harness import in_process

pytestmark = pytest.mark.anyio

MOCK = '[gateway]\nprovider = "mock"\n[routing]\nenabled = true\n'
JSON = {"content-type": "application/json"}
LONG = "Please design the storage layer for the new audit trail and compare the two options we discussed"


@pytest.fixture
async def svc(tmp_path):
    async with in_process(tmp_path, MOCK) as running:
        yield running


def message(response) -> str:
    return response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (rb'{"question": "Is this fine \ud800?"}', "question: contains a lone surrogate (U+D800)"),
        (rb'{"question": "q", "options": ["a", "b\udfff"]}', "options.1: contains a lone surrogate"),
        (rb'{"question": "q", "context": {"k\udc00": 1}}', "context.<key>: contains a lone surrogate"),
        (rb'{"question": "q", "context": {"x": [NaN]}}', "context.x.0: nan is not a JSON number"),
        (rb'{"question": "q", "context": {"x": Infinity}}', "context.x: inf is not a JSON number"),
        (b'{"question": "q", "context": ' + b"[" * 40 + b"]" * 40 + b"}", "nested deeper than 32 levels"),
        (b"[" * 100_000, "request: JSON nested deeper than 32 levels"),
        (b'{"question": "q"', "request: body is not valid JSON"),
        (b"\xff\xfe{}", "request: body is not"),
    ],
)
async def test_bodies_that_are_not_usable_json_are_400_naming_the_field(svc, raw, field):
    response = await svc.http.post("/v1/decide", content=raw, headers=JSON)
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_request"
    assert field in message(response)


async def test_a_bad_request_id_is_refused_and_never_echoed(svc):
    response = await svc.http.post("/v1/decide", content=rb'{"question": "q", "request_id": "\ud800"}', headers=JSON)
    assert response.status_code == 400 and "request_id: contains a lone surrogate" in message(response)
    assert len(response.json()["request_id"]) == 32  # a fresh id, not the bad one
    response.content.decode("utf-8")  # the reply itself is valid UTF-8


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (b'{"prompt": "' + LONG.encode() + b'", "cwd": 5}', "cwd: Input should be a valid string"),
        (b'{"prompt": "' + LONG.encode() + b'\\ud800"}', "prompt: contains a lone surrogate"),
        (b'{"hook_event_name": "PreToolUse", "tool_name": "Agent", "tool_input": "x"}', "tool_input:"),
        (b'{"prompt": "p", "skills": [{"description": "no name"}]}', "skills.0.name: required"),
        (b'["not", "an", "object"]', "the hook input must be a JSON object"),
    ],
)
async def test_the_routing_hook_validates_its_input_by_field(svc, raw, field):
    response = await svc.http.post("/v1/route", content=raw, headers=JSON)
    assert response.status_code == 400 and field in message(response)


@pytest.mark.parametrize("path", ["/v1/decide", "/v1/route", "/v1/reload", "/v1/features", "/v1/feedback",
                                  "/v1/outcomes", "/v1/embed", "/v1/routing/labels"])
async def test_posts_must_be_json_so_a_web_form_cannot_send_one(svc, path):
    for headers in ({"content-type": "text/plain"}, {"content-type": "application/x-www-form-urlencoded"}, {}):
        response = await svc.http.post(path, content=b'{"question": "q"}', headers=headers)
        assert response.status_code == 415 and "application/json" in message(response)


@pytest.mark.parametrize(("method", "path"), [("POST", "/v1/decide"), ("GET", "/v1/health"), ("POST", "/mcp"),
                                              ("POST", "/v1/reload"), ("GET", "/metrics")])
async def test_a_browser_origin_is_refused_everywhere(svc, method, path):
    response = await svc.http.request(method, path, json={"question": "q"},
                                      headers={"Origin": "https://evil.example", "Accept": "application/json"})
    assert response.status_code == 403 and "Origin 'https://evil.example' is not allowed" in message(response)
    assert "access-control-allow-origin" not in response.headers


async def test_an_allowed_origin_passes(tmp_path):
    async with in_process(tmp_path, MOCK + '[service]\nallowed_origins = ["http://localhost:3000"]\n') as svc:
        response = await svc.http.get("/v1/health", headers={"Origin": "http://localhost:3000"})
    assert response.status_code == 200


async def test_a_wrong_method_says_which_are_allowed(svc):
    response = await svc.http.get("/v1/decide")
    assert response.status_code == 405 and response.headers["allow"] == "POST"


@pytest.mark.parametrize(("method", "path", "broken_call"), [
    ("GET", "/v1/capabilities", "capabilities"),  # a route of the framework's router
    ("POST", "/v1/decide", "decide"),             # the route `Hygiene` answers directly
])
async def test_an_internal_error_is_a_500_envelope_and_the_service_goes_on(svc, monkeypatch, caplog, method, path, broken_call):
    async def broken(*args: object) -> dict:
        raise KeyError("bug")

    monkeypatch.setattr(svc.service, broken_call, broken)
    response = await svc.http.request(method, path, json={"question": "Is this fine?"} if method == "POST" else None)
    assert response.status_code == 500 and "internal error in the gateway (KeyError)" in message(response)
    assert (await svc.http.get("/v1/health")).status_code == 200
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR] == [
        f"internal error answering {method} {path}"]


async def test_the_bridge_refuses_what_it_cannot_send_without_the_service():
    backend = ServiceBackend(ServiceClient(closed_port_url()))
    deep: object = "x"
    for _ in range(40):
        deep = [deep]
    for arguments, field in [({"question": "\ud800"}, "question: contains a lone surrogate"),
                             ({"question": "q", "context": {"x": float("nan")}}, "context.x: nan"),
                             ({"question": "q", "context": {"x": deep}}, "nested deeper than 32 levels")]:
        envelope = await backend.decide(arguments, "tester")
        assert envelope["error"]["code"] == "invalid_request" and field in envelope["error"]["message"]
    await backend.aclose()


def test_control_characters_in_logged_values_are_escaped():
    record = logging.makeLogRecord({"msg": "decision id=%s", "args": ("evil\n2026-01-01 INFO forged\x1b[31m",),
                                    "levelno": logging.INFO, "levelname": "INFO", "name": "system1"})
    record.request_id = "rid\r\nx"
    line = SafeFormatter("[%(request_id)s] %(message)s").format(record)
    assert "\n" not in line and "\r" not in line and "\x1b" not in line
    assert line == "[rid\\x0d\\x0ax] decision id=evil\\x0a2026-01-01 INFO forged\\x1b[31m"


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "flood", "version": "0"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


async def test_mcp_sessions_are_capped_per_client_and_in_total(tmp_path):
    toml = MOCK + "[service]\nmcp_sessions_per_client = 2\nmcp_sessions_total = 3\n"
    async with in_process(tmp_path, toml) as svc:
        async def open_session(client: str):
            return await svc.http.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "X-System1-Client": client})

        mallory = [await open_session("mallory") for _ in range(3)]
        alice = [await open_session("alice") for _ in range(2)]
        metrics = (await svc.http.get("/metrics")).text
    assert [r.status_code for r in mallory] == [200, 200, 429]
    assert "mallory already holds 2 MCP sessions" in mallory[2].json()["error"]["message"]
    assert [r.status_code for r in alice] == [200, 429]
    assert "limit of 3 MCP sessions" in alice[1].json()["error"]["message"]
    assert "system1_mcp_sessions 3.0" in metrics


async def test_a_password_in_an_engine_url_is_never_shown(tmp_path):
    toml = '[gateway]\nprovider = "systemone"\n[providers.systemone]\nendpoint = "http://ana:s3cret@engine.example:8790"\n'
    async with in_process(tmp_path, toml) as svc:
        ready = await svc.http.get("/readyz")
        health = await svc.http.get("/v1/health")
    assert ready.status_code == 503 and "engine.example:8790" in ready.text
    assert "s3cret" not in ready.text and "s3cret" not in health.text


@pytest.mark.parametrize(("path", "shape"), [("/v1/chat/completions", "openai"), ("/v1/messages", "anthropic"),
                                             ("/v1/router/route", "openai")])
@pytest.mark.parametrize(("raw", "field"), [
    (rb'{"model": "auto", "messages": [{"role": "user", "content": "hi \ud800"}]}',
     "body.messages.0.content: contains a lone surrogate (U+D800)"),
    (rb'{"model": "auto", "max_tokens": NaN, "messages": [{"role": "user", "content": "hi"}]}',
     "body.max_tokens: nan is not a JSON number"),
])
async def test_chat_bodies_that_cannot_be_sent_on_are_400_in_the_clients_own_error_shape(tmp_path, path, shape, raw,
                                                                                          field):
    async with in_process(tmp_path, '[gateway]\nprovider = "mock"\n[router]\nenabled = true\n') as routing:
        response = await routing.http.post(path, content=raw, headers=JSON)
    assert response.status_code == 400
    error = response.json()["error"]
    assert field in error["message"] and error["type"] == "invalid_request_error"
    assert shape == "openai" or response.json()["type"] == "error"
