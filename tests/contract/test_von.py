"""The gateway's `von` adapter against the real `von serve` (von-sdk 1.3.7, torch on the CPU),
loading a tiny random checkpoint built here (make_tiny_von.py): real code paths and wire,
meaningless answers. So these tests check shapes, the banded yes/no, keys and refusals."""

from __future__ import annotations

import subprocess

import httpx
import pytest

from system1.providers.base import ProviderError, Query
from system1.providers.von import VonOptions, VonProvider
from tests.processes import free_port, server

from .conftest import ROOT, TEAMS, choice_and_yes_no, router_questions, venv_tool

pytestmark = [pytest.mark.contract, pytest.mark.anyio]
KEY = "von-contract-key-0123456789"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny-von")
    subprocess.run([str(venv_tool("von", "python")), str(ROOT / "tests" / "contract" / "make_tiny_von.py"), str(out)],
                   check=True, timeout=300, capture_output=True)
    return out


def von_serve(checkpoint, tmp_path, **env: str):
    """`von serve` on a free loopback port, offline, its checkpoint named as its users name it."""
    port = free_port()
    environment = {"HF_HUB_OFFLINE": "1", "VON_DEVICE": "cpu", "XDG_CACHE_HOME": str(tmp_path / "cache"), **env}
    if checkpoint is not None:
        environment["VON_CHECKPOINT_DIR"] = str(checkpoint)
    args = [str(venv_tool("von", "von")), "serve", "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"]
    # cwd: Von also looks for checkpoints/ relative to it, which must find nothing here.
    return server(args, f"http://127.0.0.1:{port}/health", environment, timeout_s=180, cwd=tmp_path), \
        f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def endpoint(checkpoint, tmp_path_factory):
    context, url = von_serve(checkpoint, tmp_path_factory.mktemp("von-run"), VON_API_KEY=KEY)
    with context:
        yield url


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("SYSTEM1_VON_API_KEY", KEY)


def von(endpoint: str) -> VonProvider:
    return VonProvider(VonOptions(endpoint=endpoint))


async def test_a_choice_and_a_yes_no_question_through_the_gateway(endpoint, tmp_path):
    choice, _, health = await choice_and_yes_no(tmp_path, "von", endpoint)
    assert choice.model == "von-1.3"  # Von answers "von-1.3.0" whatever is asked; the configured name keys fits
    assert health["status"] == "ok" and health["providers"][0]["ok"]


async def test_yes_no_is_read_from_the_raw_probability_not_vons_band(endpoint):
    question = "Is the customer angry?"
    body = {"model": "von-1.3", "state": question, "questions": {"q0": {"type": "noul", "instructions": question}}}
    raw = httpx.post(f"{endpoint}/v1/systemone", json=body, headers={"Authorization": f"Bearer {KEY}"}, timeout=60)
    answer = raw.json()["answers"]["q0"]
    p_yes = answer["noul_raw"]
    band = 0.8 + 0.1 * (p_yes - 0.5) if p_yes >= 0.5 else 0.2 - 0.1 * (0.5 - p_yes)
    assert answer["noul"] == pytest.approx(band, abs=1e-3)  # Von's documented band, on the real server
    provider = von(endpoint)
    try:
        read = await provider.decide(None, Query(question, ["yes", "no"], yes_no=True), 60)
    finally:
        await provider.aclose()
    assert read.probabilities["yes"] == pytest.approx(p_yes, abs=1e-4)
    assert read.decision == ("yes" if p_yes >= 0.5 else "no")


async def test_several_questions_share_one_request(endpoint):
    provider = von(endpoint)
    try:
        answers = await provider.decide_many({"ticket": "The app crashes on start"},
                                             [Query("Which team?", TEAMS), Query("Is it urgent?", ["yes", "no"], yes_no=True)],
                                             60)
    finally:
        await provider.aclose()
    assert answers[0].decision in TEAMS and answers[1].decision in ("yes", "no")


async def test_the_routers_four_questions_with_two_scores_go_in_one_request(endpoint):
    await router_questions(von(endpoint))


async def test_a_wrong_key_is_refused_with_vons_detail_and_never_echoed(endpoint, monkeypatch):
    monkeypatch.setenv("SYSTEM1_VON_API_KEY", "not-the-key")
    provider = von(endpoint)
    try:
        with pytest.raises(ProviderError, match="HTTP 401: .*(Missing or invalid Bearer token|invalid API key)") as refused:
            await provider.decide(None, Query("Which team?", TEAMS), 60)
    finally:
        await provider.aclose()
    assert "not-the-key" not in str(refused.value)


async def test_without_weights_von_refuses_to_guess_and_the_gateway_says_why(tmp_path):
    context, url = von_serve(None, tmp_path)  # no checkpoint, and the Hub is out of reach
    with context:
        provider = VonProvider(VonOptions(endpoint=url))
        try:
            with pytest.raises(ProviderError, match="HTTP 422: Failed to load Option-Marker decision weights"):
                await provider.decide(None, Query("Which team?", TEAMS), 120)
        finally:
            await provider.aclose()
