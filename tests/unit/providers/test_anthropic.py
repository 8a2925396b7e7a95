"""The anthropic adapter against the Messages API wire: forced tool, cached options, the key."""

from __future__ import annotations

import json
import logging

import httpx
import pytest

from system1.core.gateway import Gateway
from system1.service.reports import health_report
from system1.providers.anthropic import AnthropicOptions, AnthropicProvider
from system1.providers.base import EngineAnswer, MalformedResponse, ProviderError, ProviderTimeout, Query

from ..helpers import FakeWire, config_in, json_reply

pytestmark = pytest.mark.anyio

KEY = "sk-ant-test-0123456789"
QUERY = Query("Rerun the flaky pipeline or block the merge?", ["rerun the pipeline", "block the merge"])


def tool_reply(choices=("block the merge", "rerun the pipeline"), confidence=0.85):
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-haiku-5-5",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "choose",
                         "input": {"choices": list(choices), "confidence": confidence}}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 50, "output_tokens": 20}}


def anthropic(wire, **options) -> AnthropicProvider:
    return AnthropicProvider(AnthropicOptions(**options), client=wire.client())


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


async def test_the_decision_is_a_forced_choose_call_with_options_in_a_cached_system_block(key):
    wire = FakeWire(json_reply(tool_reply()))
    answer = await anthropic(wire).decide(None, QUERY, 5)
    request, body = wire.requests[0], wire.bodies[0]
    assert str(request.url) == "https://api.anthropic.com/v1/messages"
    assert request.headers["x-api-key"] == KEY and request.headers["anthropic-version"] == "2023-06-01"
    assert body["model"] == "claude-haiku-5-5"
    assert body["tool_choice"] == {"type": "tool", "name": "choose"}
    system = body["system"][0]
    assert system["cache_control"] == {"type": "ephemeral"}
    assert "- rerun the pipeline\n- block the merge" in system["text"]
    schema = body["tools"][0]["input_schema"]["properties"]
    assert schema["choices"]["items"]["enum"] == QUERY.choices and schema["choices"]["maxItems"] == 3
    assert body["messages"] == [{"role": "user", "content": QUERY.question}]
    assert answer == EngineAnswer(**{
        "decision": "block the merge", "confidence": 0.85, "probabilities": None,
        "rationale": "anthropic claude-haiku-5-5: best first: block the merge > rerun the pipeline",
        "model": "claude-haiku-5-5",
    })


async def test_the_key_is_read_on_every_call(monkeypatch):
    wire = FakeWire(json_reply(tool_reply()))
    provider = anthropic(wire)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "first")
    await provider.decide(None, QUERY, 5)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "second")
    await provider.decide(None, QUERY, 5)
    assert [r.headers["x-api-key"] for r in wire.requests] == ["first", "second"]


async def test_without_a_key_the_call_is_a_provider_error_and_nothing_is_sent(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    wire = FakeWire(json_reply(tool_reply()))
    with pytest.raises(ProviderError, match="ANTHROPIC_API_KEY is not set"):
        await anthropic(wire).decide(None, QUERY, 5)
    assert wire.requests == []


async def test_the_key_never_reaches_responses_errors_or_logs(key, tmp_path, caplog):
    def echo_key(request):  # an error body that repeats what it was sent
        return httpx.Response(401, json={"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}})

    config = config_in(tmp_path, '[gateway]\nprovider = "anthropic"\n', SYSTEM1_LOG_LEVEL="DEBUG")
    gateway = Gateway(config, providers={"anthropic": anthropic(FakeWire(echo_key))})
    with caplog.at_level(logging.DEBUG):
        response = await gateway.decide({"question": "q?", "options": ["a", "b"]})
        health = await health_report(gateway)
    assert response.error.code.value == "provider_error" and "HTTP 401" in response.error.message
    assert KEY not in json.dumps(response.envelope_json())
    assert KEY not in str(health) and KEY not in caplog.text


async def test_a_redirect_is_refused_so_the_key_goes_nowhere_else(key):
    wire = FakeWire(lambda request: httpx.Response(307, headers={"location": "https://elsewhere.example/v1/messages"}))
    with pytest.raises(ProviderError, match="redirect refused"):
        await anthropic(wire).decide(None, QUERY, 5)
    assert len(wire.requests) == 1


@pytest.mark.parametrize(
    "reply",
    [
        {"content": [{"type": "text", "text": "block the merge"}]},
        {"content": [{"type": "tool_use", "name": "choose", "input": {"choices": [], "confidence": 0.5}}]},
        {"content": "nope"},
    ],
)
async def test_a_reply_without_a_usable_choose_call_is_malformed(key, reply):
    with pytest.raises(MalformedResponse):
        await anthropic(FakeWire(json_reply(reply))).decide(None, QUERY, 5)


async def test_an_invented_option_is_caught_by_the_gateway_check(key, tmp_path):
    config = config_in(tmp_path, '[gateway]\nprovider = "anthropic"\n')
    gateway = Gateway(config, providers={"anthropic": anthropic(FakeWire(json_reply(tool_reply(("merge anyway",)))))})
    response = await gateway.decide({"question": "q?", "options": QUERY.choices})
    assert response.error.code.value == "malformed_response"


async def test_timeouts_are_typed(key):
    def stall(request):
        raise httpx.ReadTimeout("slow", request=request)

    with pytest.raises(ProviderTimeout):
        await anthropic(FakeWire(stall)).decide(None, QUERY, 0.5)


def test_the_endpoint_must_be_https_except_on_loopback():
    with pytest.raises(ValueError, match="must use https"):
        AnthropicOptions(endpoint="http://api.anthropic.com")
    assert AnthropicOptions(endpoint="http://127.0.0.1:8111").endpoint == "http://127.0.0.1:8111"


async def test_health_gets_the_model_without_a_billed_call(key):
    wire = FakeWire(json_reply({"id": "claude-haiku-5-5", "type": "model"}))
    probe = await anthropic(wire).health(2)
    assert probe.ok and wire.requests[0].method == "GET"
    assert wire.requests[0].url.path == "/v1/models/claude-haiku-5-5"


def test_capabilities_say_there_are_no_probabilities():
    caps = AnthropicProvider(AnthropicOptions()).capabilities()
    assert caps.probabilities is False and caps.max_options == 256
