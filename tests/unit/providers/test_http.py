"""The HTTP helper: loopback guard, proxy policy and error text, against a real local server."""

from __future__ import annotations

import http.server
import json
import threading

import httpx
import pytest

from system1.providers.base import ProviderError, Query
from system1.providers.hosts import is_loopback, stays_local
from system1.providers.http import check_endpoint, engine_message, make_client, redact_url
from system1.providers.systemone import SystemOneOptions, SystemOneProvider

from ..helpers import FakeWire, json_reply

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.0.1", "localhost", "::1", "[::1]", "api.localhost"])
def test_loopback_hosts(host):
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["10.0.0.1", "192.168.1.1", "example.com", "0.0.0.0", "systemone"])
def test_other_hosts_are_not_loopback(host):
    assert not is_loopback(host)


def test_a_remote_endpoint_needs_allow_remote():
    with pytest.raises(ValueError, match="allow_remote"):
        check_endpoint("http://example.com:80", allow_remote=False)
    assert check_endpoint("http://example.com:80/", allow_remote=True) == "http://example.com:80"


def test_only_remote_https_may_use_a_proxy():
    assert make_client("http://127.0.0.1:1")._trust_env is False
    assert make_client("http://systemone:8790")._trust_env is False
    assert make_client("https://api.anthropic.com")._trust_env is True


class _Engine(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - the stdlib's name
        length = int(self.headers["content-length"])
        body = json.loads(self.rfile.read(length))
        answer = {"type": "choice", "choice": "a", "probabilities": {"a": 0.9, "b": 0.1}}
        payload = json.dumps({"model": "real", "answers": {"q0": answer}, "seen_state": body["state"]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def engine_port():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Engine)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


async def test_local_calls_ignore_a_system_proxy(engine_port, monkeypatch):
    # A proxy that does not exist: any call routed through it would fail.
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:9")
    provider = SystemOneProvider(SystemOneOptions(endpoint=f"http://127.0.0.1:{engine_port}"))
    try:
        answer = await provider.decide(None, Query("q", ["a", "b"]), 5)
    finally:
        await provider.aclose()
    assert answer.decision == "a" and answer.model == "real"


def test_engine_messages_are_read_from_the_common_shapes_and_shortened():
    import httpx

    assert engine_message(httpx.Response(400, json={"detail": "bad"})) == "bad"
    assert engine_message(httpx.Response(422, json={"error": {"message": "nope", "field": "model"}})) == "nope"
    assert engine_message(httpx.Response(400, json={"error": "plain"})) == "plain"
    assert engine_message(httpx.Response(500, text="Internal   Server\nError")) == "Internal Server Error"
    assert len(engine_message(httpx.Response(500, text="x" * 1000))) == 301


async def test_engine_errors_carry_the_provider_the_url_without_credentials_and_the_status():

    options = SystemOneOptions(endpoint="http://ana:s3cret@127.0.0.1:8790")
    provider = SystemOneProvider(options, client=FakeWire(json_reply({"detail": "no such route"}, 404)).client())
    with pytest.raises(ProviderError) as caught:
        await provider.decide(None, Query("q?", ["a", "b"]), 5)
    error = caught.value
    assert (error.provider, error.url, error.status) == ("systemone", "http://127.0.0.1:8790/v1/systemone", 404)
    assert "s3cret" not in str(error) and "HTTP 404: no such route" in str(error)
    health = await provider.health(5)
    assert not health.ok and "s3cret" not in health.detail


def test_a_url_loses_its_user_and_password_and_nothing_else():
    assert redact_url("http://ana:s3cret@engine:8790/v1?x=1") == "http://engine:8790/v1?x=1"
    assert redact_url("https://engine/path") == "https://engine/path"
    with pytest.raises(ValueError) as caught:
        check_endpoint("ftp://ana:s3cret@engine", allow_remote=True)
    assert "s3cret" not in str(caught.value)


async def test_a_key_the_engine_echoes_back_never_reaches_the_attempt_detail(monkeypatch):
    monkeypatch.setenv("SYSTEM1_SYSTEMONE_API_KEY", "sk-live-0123456789")
    wire = FakeWire(lambda request: httpx.Response(401, json={"error": f"bad key {request.headers['authorization']}"}))
    with pytest.raises(ProviderError) as caught:
        await SystemOneProvider(SystemOneOptions(), client=wire.client()).decide(None, Query("q?", ["a", "b"]), 5)
    assert "sk-live" not in str(caught.value) and "bad key Bearer ***" in str(caught.value)


@pytest.mark.parametrize(("url", "local"), [
    ("http://127.0.0.1:8790", True), ("http://localhost:11434", True), ("http://[::1]:80", True),
    ("http://llama:8080", True),  # the stack's internal service names
    ("http://10.0.0.5:8790", False), ("https://api.anthropic.com", False), ("http://engine.lan:80", False),
])
def test_an_endpoint_stays_local_on_loopback_or_behind_a_one_label_name(url, local):
    assert stays_local(url) is local
