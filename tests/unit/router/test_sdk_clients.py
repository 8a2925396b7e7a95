"""The router as clients use it: the official `openai` and `anthropic` SDKs against the gateway
served for real, streaming and not, with the fake hosted chat API as the upstream."""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

from system1.service.auth import hash_key
from tests.fakes.hosted_chat import hosted_chat, reply_text

from ..service_harness import running_service
from .catalogues import router_toml

UPSTREAM_KEY = "sk-fake-upstream-key"
GATEWAY_KEY = "alice-gateway-key-0123456789"
CHEAP = "cloud/cheap"
MESSAGES = [{"role": "user", "content": "Say hi in exactly three words"}]


def config(upstream_url: str, keys_file: str) -> str:
    # The mock engine answers every question with its first option, surely: topic code-gen,
    # complexity and risk 0, private "yes" (so privacy is set to ignore it here).
    cloud = {"base_url": upstream_url, "apis": ["openai", "anthropic"], "api_key_env": "FAKE_CLOUD_KEY", "local": False}
    models = [{"id": CHEAP, "upstream": "cloud", "name": "vendor/cheap-1", "price": {"in": 0.5, "out": 1.5},
               "default_skill": 0.6},
              {"id": "cloud/top", "upstream": "cloud", "price": {"in": 5, "out": 25}, "default_skill": 0.95}]
    return (router_toml({"cloud": cloud}, models, private="ignore", passthrough_upstream="cloud",
                        max_body_bytes=65_536)
            + f'[service]\napi_keys_file = "{keys_file}"\n')


@pytest.fixture
def stack(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_CLOUD_KEY", UPSTREAM_KEY)
    keys = tmp_path / "keys"
    keys.write_text(f"alice {hash_key(GATEWAY_KEY)}\n")
    with hosted_chat(key=UPSTREAM_KEY) as upstream, running_service(tmp_path, config(upstream.url, str(keys))) as gateway:
        yield gateway, upstream


def openai_client(url: str, key: str = GATEWAY_KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0, timeout=30)


def anthropic_client(url: str, key: str = GATEWAY_KEY) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key=key, max_retries=0, timeout=30)


def test_the_openai_sdk_gets_the_routed_models_answer(stack):
    gateway, upstream = stack
    with openai_client(gateway.url) as client:
        raw = client.chat.completions.with_raw_response.create(model="auto", messages=MESSAGES)
    completion = raw.parse()
    assert completion.choices[0].message.content == reply_text("vendor/cheap-1")
    assert raw.headers["x-router-model"] == CHEAP and raw.headers["x-router-topic"] == "code-gen"
    assert upstream.received[0].headers["authorization"] == f"Bearer {UPSTREAM_KEY}"  # never the gateway key


def test_the_openai_sdk_streams_through_the_router(stack):
    gateway, _ = stack
    with openai_client(gateway.url) as client:
        chunks = list(client.chat.completions.create(model="auto", messages=MESSAGES, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == reply_text("vendor/cheap-1")
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 7


def test_the_anthropic_sdk_gets_the_routed_models_answer_streaming_and_not(stack):
    gateway, upstream = stack
    with anthropic_client(gateway.url) as client:
        message = client.messages.create(model="auto", max_tokens=64, messages=MESSAGES)
        with client.messages.stream(model="auto", max_tokens=64, messages=MESSAGES) as stream:
            streamed = "".join(stream.text_stream)
    assert message.content[0].text == reply_text("vendor/cheap-1")
    assert streamed == reply_text("vendor/cheap-1")
    assert all(r.path == "/v1/messages" and r.headers["x-api-key"] == UPSTREAM_KEY for r in upstream.received)


def test_when_every_candidate_fails_each_sdk_raises_its_own_error_naming_them(stack):
    gateway, upstream = stack
    upstream.fail("vendor/cheap-1", "503", "503")
    upstream.fail("cloud/top", "500", "500")
    with openai_client(gateway.url) as client, pytest.raises(openai.APIStatusError) as from_openai:
        client.chat.completions.create(model="auto", messages=MESSAGES)
    assert from_openai.value.status_code == 502 and "every candidate failed" in from_openai.value.message
    assert from_openai.value.response.headers["x-router-failed"] == "cloud/cheap (HTTP 503), cloud/top (HTTP 500)"
    with anthropic_client(gateway.url) as client, pytest.raises(anthropic.APIStatusError) as from_anthropic:
        client.messages.create(model="auto", max_tokens=64, messages=MESSAGES)
    assert from_anthropic.value.status_code == 502 and "every candidate failed" in str(from_anthropic.value)


def test_a_catalogue_model_named_by_the_client_is_passed_through(stack):
    gateway, upstream = stack
    with openai_client(gateway.url) as client:
        raw = client.chat.completions.with_raw_response.create(model="cloud/top", messages=MESSAGES)
    assert raw.parse().choices[0].message.content == reply_text("cloud/top")
    assert raw.headers["x-router-reason"].startswith("passed through")


def test_models_lists_the_aliases_and_the_catalogue(stack):
    gateway, _ = stack
    with openai_client(gateway.url) as client:
        assert [m.id for m in client.models.list()] == ["auto", CHEAP, "cloud/top"]


def test_gateway_keys_are_required_as_a_bearer_or_as_x_api_key(stack):
    gateway, upstream = stack
    with openai_client(gateway.url, key="wrong") as client, pytest.raises(openai.AuthenticationError):
        client.chat.completions.create(model="auto", messages=MESSAGES)
    with anthropic_client(gateway.url, key="wrong") as client, pytest.raises(anthropic.AuthenticationError):
        client.messages.create(model="auto", max_tokens=64, messages=MESSAGES)
    assert upstream.received == []


def test_the_dry_run_answers_without_calling_any_chat_model(stack):
    gateway, upstream = stack
    response = httpx.post(f"{gateway.url}/v1/router/route", json={"model": "auto", "messages": MESSAGES},
                          headers={"Authorization": f"Bearer {GATEWAY_KEY}"}, timeout=30)
    report = response.json()
    assert response.status_code == 200 and report["model"] == CHEAP and response.headers["x-router-model"] == CHEAP
    assert report["decision_provider"] == "mock" and report["signals"]["primary"] == "code-gen"
    assert [c["id"] for c in report["candidates"]] == [CHEAP, "cloud/top"]
    assert upstream.received == []


def test_router_metrics_count_requests_costs_and_fall_throughs(stack):
    gateway, upstream = stack
    upstream.fail("vendor/cheap-1", "429")
    with openai_client(gateway.url) as client:
        client.chat.completions.create(model="auto", messages=MESSAGES)
    text = httpx.get(f"{gateway.url}/metrics", timeout=10).text
    assert 'system1_router_fall_throughs_total{model="cloud/cheap"} 1.0' in text
    assert 'system1_router_requests_total{model="cloud/top",reason="fell through: an earlier candidate failed"} 1.0' in text
    assert 'system1_router_cost_usd_total{model="cloud/top"}' in text
    assert 'system1_router_decision_seconds_count{provider="mock"}' in text


def test_anthropics_token_count_is_the_routers_estimate(stack):
    gateway, upstream = stack
    with anthropic_client(gateway.url) as client:
        counted = client.messages.count_tokens(model="auto", messages=MESSAGES)
    assert 8 <= counted.input_tokens <= 20 and upstream.received == []


def test_a_stream_broken_after_it_started_is_an_error_in_each_sdk_not_a_cut_answer(stack):
    gateway, upstream = stack
    upstream.fail("vendor/cheap-1", "break", "break")
    with openai_client(gateway.url) as client, pytest.raises(openai.APIError, match="the stream broke"):
        list(client.chat.completions.create(model="auto", messages=MESSAGES, stream=True))
    with anthropic_client(gateway.url) as client, pytest.raises(anthropic.APIStatusError, match="the stream broke"):
        with client.messages.stream(model="auto", max_tokens=64, messages=MESSAGES) as stream:
            "".join(stream.text_stream)


@pytest.mark.parametrize("name", ["vendor/model\r\nX-Injected: 1", "modèle-ü", "模型-7b"])
def test_a_passed_through_model_name_that_is_no_header_text_still_gets_its_error_when_the_upstream_fails(stack, name):
    gateway, upstream = stack
    upstream.fail(name, "503")
    with openai_client(gateway.url) as client, pytest.raises(openai.APIStatusError) as caught:
        client.chat.completions.create(model=name, messages=MESSAGES)
    failed = caught.value.response.headers["x-router-failed"]
    assert caught.value.status_code == 502 and "every candidate failed" in caught.value.message
    assert failed.isascii() and "\r" not in failed and "\n" not in failed and "x-injected" not in caught.value.response.headers


def test_the_gateways_own_refusals_on_the_chat_routes_raise_each_sdks_own_errors(stack):
    gateway, _ = stack
    with openai_client(gateway.url, key="not-a-key") as client, pytest.raises(openai.AuthenticationError) as caught:
        client.chat.completions.create(model="auto", messages=MESSAGES)
    assert caught.value.body["type"] == "authentication_error" and "unauthorized" in caught.value.message
    with anthropic_client(gateway.url, key="not-a-key") as client, pytest.raises(anthropic.AuthenticationError) as caught:
        client.messages.create(model="auto", max_tokens=64, messages=MESSAGES)
    assert "unauthorized" in str(caught.value)
    huge = [{"role": "user", "content": "x" * 70_000}]
    with openai_client(gateway.url) as client, pytest.raises(openai.APIStatusError) as too_large:
        client.chat.completions.create(model="auto", messages=huge)
    assert too_large.value.status_code == 413 and "larger than 65536 bytes" in too_large.value.message
    with anthropic_client(gateway.url) as client, pytest.raises(anthropic.APIStatusError) as too_large:
        client.messages.create(model="auto", max_tokens=64, messages=huge)
    assert too_large.value.status_code == 413 and too_large.value.body["error"]["type"] == "request_too_large"
    headers = {"authorization": f"Bearer {GATEWAY_KEY}"}
    untyped = httpx.post(f"{gateway.url}/v1/messages", content=b"{}", headers={**headers, "content-type": "text/plain"})
    from_page = httpx.post(f"{gateway.url}/v1/chat/completions", json={}, headers={**headers, "origin": "https://evil.test"})
    assert untyped.status_code == 415 and untyped.json()["type"] == "error" and untyped.json()["error"]["message"]
    assert from_page.status_code == 403 and from_page.json()["error"]["type"] == "permission_error"
