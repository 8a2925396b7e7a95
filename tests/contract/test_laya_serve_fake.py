"""The gateway's `laya` adapter against the archived `laya-serve` 0.2.1 with its fake backend
(the real server code, strict Jev shape, uniform answers: probabilities mean nothing)."""

from __future__ import annotations

import pytest

from system1.core.gateway import Gateway
from system1.service.reports import health_report
from system1.providers.base import ProviderError, Query
from system1.providers.laya import LayaOptions, LayaProvider

from ..unit.helpers import config_in
from tests.processes import free_port, server

from .conftest import venv_tool

pytestmark = [pytest.mark.contract, pytest.mark.anyio]
KEY = "laya-serve-contract-key"


@pytest.fixture(scope="module")
def endpoint():
    port = free_port()
    env = {"LAYA_SERVE_BACKEND": "fake", "LAYA_SERVE_API_KEY": KEY,
           "LAYA_SERVE_EXTRA_MODELS": "typed-decisions,english,multilingual"}
    args = [str(venv_tool("laya-serve", "laya-serve")), "--host", "127.0.0.1", "--port", str(port)]
    with server(args, f"http://127.0.0.1:{port}/healthz", env):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("SYSTEM1_LAYA_API_KEY", KEY)


def laya(endpoint: str, **options) -> LayaProvider:
    return LayaProvider(LayaOptions(endpoint=endpoint, **options))


async def test_a_decision_through_the_gateway(endpoint, tmp_path):
    toml = f'[gateway]\nprovider = "laya"\nmin_confidence = 0\n[providers.laya]\nendpoint = "{endpoint}"\n'
    gateway = Gateway(config_in(tmp_path, toml))
    try:
        response = await gateway.decide({"question": "Rerun or block?", "options": ["rerun", "block", "ignore"]})
        yes_no = await gateway.decide({"question": "Is this command destructive?", "context": {"command": "rm -rf /"}})
        health = await health_report(gateway)
    finally:
        await gateway.aclose()
    # The fake backend always picks the first option with uniform probabilities.
    assert (response.status, response.decision) == ("decided", "rerun")
    assert response.confidence == pytest.approx(1 / 3, abs=1e-6)
    assert set(response.probabilities) == {"rerun", "block", "ignore"}
    assert yes_no.decision == "yes" and yes_no.confidence == pytest.approx(0.5)
    assert health["status"] == "ok"  # /health is 404 there; the adapter falls back to /healthz


async def test_several_questions_in_one_pass(endpoint):
    p = laya(endpoint)
    try:
        answers = await p.decide_many("Refactor the parser module", [
            Query("Is it read-only?", ["yes", "no"], yes_no=True), Query("Which tier?", ["haiku", "sonnet", "opus"])], 10)
    finally:
        await p.aclose()
    assert [a.decision for a in answers] == ["yes", "haiku"]
    assert all(a.model == "typed-decisions" for a in answers)


async def test_a_wrong_key_is_refused_with_the_servers_message(endpoint, monkeypatch):
    monkeypatch.setenv("SYSTEM1_LAYA_API_KEY", "wrong")
    p = laya(endpoint)
    try:
        with pytest.raises(ProviderError, match="HTTP 401: Missing or invalid API key"):
            await p.decide(None, Query("q?", ["a", "b"]), 10)
    finally:
        await p.aclose()


async def test_a_model_the_server_does_not_know_is_its_422(endpoint):
    p = laya(endpoint, model="gpt-4")
    try:
        with pytest.raises(ProviderError, match="HTTP 422: unknown model 'gpt-4'"):
            await p.decide(None, Query("q?", ["a", "b"]), 10)
    finally:
        await p.aclose()


async def test_auto_routing_sends_a_jev_model_name(endpoint):
    p = laya(endpoint, model="")
    try:
        answer = await p.decide(None, Query("q?", ["a", "b"]), 10)
    finally:
        await p.aclose()
    assert answer.decision == "a"


async def test_the_option_limit_is_the_adapters(endpoint):
    p = laya(endpoint)
    try:
        assert (await p.decide(None, Query("q?", [f"o{i}" for i in range(20)]), 10)).decision == "o0"
        with pytest.raises(ProviderError, match="at most 20 options"):
            await p.decide(None, Query("q?", [f"o{i}" for i in range(21)]), 10)
    finally:
        await p.aclose()
