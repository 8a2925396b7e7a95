"""The gateway's `systemone` adapter against our own `serve.py`, running the real MiniLM."""

from __future__ import annotations

import sys

import pytest

from system1.core.gateway import Gateway
from system1.service.reports import health_report
from system1.providers.base import ProviderError, Query
from system1.providers.systemone import SystemOneOptions, SystemOneProvider

from ..unit.helpers import config_in
from tests.processes import free_port, server

from .conftest import ROOT, router_questions

pytestmark = [pytest.mark.contract, pytest.mark.anyio]
KEY = "contract-engine-key-0123"
TEAMS = ["billing: charges, refunds, payouts", "technical: bugs and outages", "sales: pricing and plans"]


@pytest.fixture(scope="module")
def endpoint():
    port = free_port()
    # With the e5 embedder, as the stack's image starts it.
    args = [sys.executable, str(ROOT / "engines" / "systemone" / "serve.py"), "--port", str(port), "--embedders", "e5"]
    with server(args, f"http://127.0.0.1:{port}/health", {"SYSTEM1_SYSTEMONE_API_KEY": KEY}):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture
def keyed(monkeypatch):
    monkeypatch.setenv("SYSTEM1_SYSTEMONE_API_KEY", KEY)


def provider(endpoint: str, **options) -> SystemOneProvider:
    return SystemOneProvider(SystemOneOptions(endpoint=endpoint, **options))


async def test_a_decision_through_the_gateway_is_answered_by_minilm(endpoint, keyed, tmp_path):
    toml = f'[gateway]\nprovider = "systemone"\nmin_confidence = 0\n[providers.systemone]\nendpoint = "{endpoint}"\n'
    gateway = Gateway(config_in(tmp_path, toml))
    try:
        response = await gateway.decide({"question": "Which team should handle this?", "options": TEAMS,
                                         "context": {"message": "I was charged twice for my order"}})
        health = await health_report(gateway)
    finally:
        await gateway.aclose()
    assert response.status == "decided" and response.decision == TEAMS[0]
    assert response.provider == "systemone" and response.attempts[0].outcome == "ok"
    assert response.rationale.startswith("systemone all-MiniLM-L6-v2:")
    assert health["status"] == "ok" and "minilm" in health["providers"][0]["detail"]


async def test_the_private_question_is_decided_by_the_shipped_e5_head_through_the_served_embedder(
        endpoint, keyed, tmp_path):
    from system1.core.heads import Heads
    from system1.router.signals import PRIVATE_QUESTION

    [e5_head] = [h for h in Heads.load(None).candidates("router-private", "systemone", ["yes", "no"])
                 if h.model == "multilingual-e5-small"]
    toml = f'[gateway]\nprovider = "systemone"\nfallback = []\n[providers.systemone]\nendpoint = "{endpoint}"\n'
    gateway = Gateway(config_in(tmp_path, toml))
    prompts = {"yes": "Draft a note to payroll: Ines Duarte's salary drops to 41,200 from May after her demotion.",
               "no": "Write a bash loop that renames every .jpeg file in a folder to .jpg."}
    try:
        decided = {label: await gateway.decide({"question": PRIVATE_QUESTION, "kind": "router-private",
                                                "context": {"prompt": prompt}}) for label, prompt in prompts.items()}
    finally:
        await gateway.aclose()
    for label, decision in decided.items():
        assert decision.head == "router-private" and e5_head.describe() in decision.rationale, decision.rationale
        assert decision.decision == label


async def test_yes_no_goes_as_noul(endpoint, keyed):
    p = provider(endpoint)
    try:
        answer = await p.decide("refund my double charge", Query("Is this message about money?", ["yes", "no"], yes_no=True), 10)
    finally:
        await p.aclose()
    assert answer.decision in ("yes", "no") and answer.probabilities["yes"] + answer.probabilities["no"] == pytest.approx(1)


async def test_several_questions_and_the_batch_endpoint(endpoint, keyed):
    p = provider(endpoint, batch=True)
    team = Query("Which team should handle this?", TEAMS)
    urgent = Query("Is the customer in a hurry?", ["yes", "no"], yes_no=True)
    try:
        many = await p.decide_many("The checkout page crashes with a 500 error, fix it now!", [team, urgent], 10)
        batch = await p.decide_batch(["refund my double charge", "the app crashes on start", "what does the pro plan cost?"], [team], 10)
    finally:
        await p.aclose()
    assert many[0].decision == TEAMS[1] and many[1].decision in ("yes", "no")
    assert [r[0].decision for r in batch] == TEAMS


async def test_the_routers_four_questions_with_two_scores_go_in_one_request(endpoint, keyed):
    await router_questions(provider(endpoint))


async def test_a_wrong_key_is_the_engines_401(endpoint, monkeypatch):
    monkeypatch.setenv("SYSTEM1_SYSTEMONE_API_KEY", "wrong")
    p = provider(endpoint)
    try:
        with pytest.raises(ProviderError, match="HTTP 401: missing or invalid bearer token"):
            await p.decide(None, Query("q?", ["a", "b"]), 10)
        assert not (await p.health(5)).ok
    finally:
        await p.aclose()


async def test_the_engines_own_limits_come_back_as_provider_errors(endpoint, keyed):
    p = provider(endpoint, max_options=256)
    try:
        with pytest.raises(ProviderError, match="HTTP 413: at most 16 questions"):
            await p.decide_many("x", [Query(f"q{i}?", ["a", "b"]) for i in range(17)], 10)
        assert (await p.decide(None, Query("q?", [f"option {i}" for i in range(256)]), 30)).decision.startswith("option")
    finally:
        await p.aclose()
    with pytest.raises(ProviderError, match="at most 255 options"):
        await provider(endpoint).decide(None, Query("q?", [f"o{i}" for i in range(256)]), 10)
