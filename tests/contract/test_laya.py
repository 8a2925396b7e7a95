"""The gateway's `laya` adapter against the real `laya[serve]` 0.4 server, running a tiny
random-initialised checkpoint built here (real code paths; the probabilities mean nothing, so
these tests check shapes, limits and errors, not answers)."""

from __future__ import annotations

import json
import subprocess

import pytest

from system1.core.gateway import Gateway
from system1.service.reports import health_report
from system1.providers.base import MalformedResponse, ProviderError, Query
from system1.providers.laya import LayaOptions, LayaProvider

from ..unit.helpers import config_in
from tests.processes import free_port, server

from .conftest import ROOT, router_questions, venv_tool

pytestmark = [pytest.mark.contract, pytest.mark.anyio]
KEY = "laya-contract-key-0123456789"
OPTIONS = ["rerun the pipeline", "block the merge", "ask the author"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny-laya")
    python = venv_tool("laya", "python")
    subprocess.run([str(python), str(ROOT / "tests" / "contract" / "make_tiny_laya.py"), str(out)], check=True, timeout=300)
    return out


@pytest.fixture(scope="module")
def endpoint(checkpoint):
    port = free_port()
    models = json.dumps({name: str(checkpoint) for name in ("english", "multilingual", "typed-decisions")})
    env = {"HF_HUB_OFFLINE": "1", "LAYA_HOST": "127.0.0.1", "LAYA_PORT": str(port), "LAYA_DEVICE": "cpu",
           "LAYA_MODELS": "typed-decisions", "LAYA_DEFAULT_MODEL": "typed-decisions", "LAYA_EXTRA_MODELS": models,
           "LAYA_API_KEY": KEY, "LAYA_LOG_LEVEL": "warning"}
    with server([str(venv_tool("laya", "laya-serve"))], f"http://127.0.0.1:{port}/health", env, timeout_s=300):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("SYSTEM1_LAYA_API_KEY", KEY)


def laya(endpoint: str, **options) -> LayaProvider:
    return LayaProvider(LayaOptions(endpoint=endpoint, **options))


async def test_a_decision_through_the_gateway_has_the_contracts_shape(endpoint, tmp_path):
    toml = f'[gateway]\nprovider = "laya"\nmin_confidence = 0\ntimeout_s = 60\n[providers.laya]\nendpoint = "{endpoint}"\n'
    gateway = Gateway(config_in(tmp_path, toml))
    try:
        response = await gateway.decide({"question": "What now?", "options": OPTIONS, "context": {"ci": "red twice"}})
        yes_no = await gateway.decide({"question": "Is this command destructive?",
                                       "context": {"command": "git push --force"}})
        health = await health_report(gateway)
    finally:
        await gateway.aclose()
    assert response.status == "decided" and response.decision in OPTIONS
    assert set(response.probabilities) == set(OPTIONS) and sum(response.probabilities.values()) == pytest.approx(1, abs=1e-3)
    assert 0 <= response.confidence <= 1 and response.rationale.startswith("laya typed-decisions:")
    assert yes_no.decision in ("yes", "no")
    assert health["status"] == "ok" and "device cpu" in health["providers"][0]["detail"]


async def test_several_questions_in_one_pass_and_the_batch_endpoint(endpoint):
    p = laya(endpoint)
    questions = [Query("Is it read-only?", ["yes", "no"], yes_no=True), Query("Which tier?", ["haiku", "sonnet", "opus"])]
    try:
        many = await p.decide_many("Rename the helper in utils.py", questions, 60)
        batch = await p.decide_batch(["Rename the helper", "Design the storage layer", "Review the PR"], questions, 60)
    finally:
        await p.aclose()
    assert many[0].decision in ("yes", "no") and many[1].decision in ("haiku", "sonnet", "opus")
    assert len(batch) == 3 and all(len(answers) == 2 for answers in batch)
    assert all(a.model == "typed-decisions" for answers in batch for a in answers)


async def test_the_routers_four_questions_with_two_scores_go_in_one_request(endpoint):
    await router_questions(laya(endpoint))


async def test_an_answer_from_another_checkpoint_is_malformed(endpoint):
    # "typed" is Laya's alias: the reply's routing names "typed-decisions", not the pinned name.
    p = laya(endpoint, model="typed")
    try:
        with pytest.raises(MalformedResponse, match="checkpoint 'typed-decisions', not the pinned 'typed'"):
            await p.decide(None, Query("q?", ["a", "b"]), 60)
    finally:
        await p.aclose()


async def test_auth_is_the_servers(endpoint, monkeypatch):
    monkeypatch.setenv("SYSTEM1_LAYA_API_KEY", "wrong")
    p = laya(endpoint)
    try:
        with pytest.raises(ProviderError, match="HTTP 401: invalid or missing bearer token"):
            await p.decide(None, Query("q?", ["a", "b"]), 60)
    finally:
        await p.aclose()


async def test_the_servers_real_error_bodies_reach_the_detail(endpoint):
    p = laya(endpoint)
    headers = p.headers()
    try:
        too_many = {"state": "x", "questions": {"q": {"type": "choice", "instructions": "?", "criteria": {f"o{i}": None for i in range(101)}}}}
        with pytest.raises(ProviderError, match=r"HTTP 413: too many choice options for 'q' \(101 > 100\)"):
            await p.engine.request("POST", "/v1/systemone", 60, too_many, headers)
        bad_type = {"state": "x", "questions": {"q": {"type": "bool", "instructions": "?"}}}
        with pytest.raises(ProviderError, match="HTTP 422: question 'q': unknown type 'bool'"):
            await p.engine.request("POST", "/v1/systemone", 60, bad_type, headers)
        with pytest.raises(ProviderError, match="at most 20 options"):
            await p.decide(None, Query("q?", [f"o{i}" for i in range(21)]), 60)
    finally:
        await p.aclose()


async def test_health_warns_when_the_pinned_checkpoint_is_not_loaded(endpoint):
    p = laya(endpoint, model="english")
    try:
        probe = await p.health(30)
    finally:
        await p.aclose()
    assert probe.ok and "'english' is not preloaded" in probe.detail
