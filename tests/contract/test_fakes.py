"""The `von` and `systemone` adapters against faithful fakes of Von and llama-server, which
cannot run here (no weights, no llama.cpp build)."""

from __future__ import annotations

import httpx
import pytest

from system1.core.gateway import Gateway
from system1.service.reports import health_report
from system1.providers.base import ProviderError, Query
from system1.providers.systemone import SystemOneOptions, SystemOneProvider
from system1.providers.von import VonOptions, VonProvider

from ..unit.helpers import config_in
from .fakes import llama_server_app, von_app

pytestmark = [pytest.mark.contract, pytest.mark.anyio]
OPTIONS = ["billing", "technical", "sales"]


def asgi(app, endpoint: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=endpoint)


async def test_von_through_the_gateway(tmp_path):
    endpoint = "http://127.0.0.1:8777"
    provider = VonProvider(VonOptions(), client=asgi(von_app(), endpoint))
    config = config_in(tmp_path, '[gateway]\nprovider = "von"\nmin_confidence = 0\n')
    gateway = Gateway(config, providers={"von": provider})
    choice = await gateway.decide({"question": "Which team?", "options": OPTIONS})
    yes_no = await gateway.decide({"question": "Is the customer angry?"})
    health = await health_report(gateway)
    await gateway.aclose()
    assert (choice.decision, choice.confidence) == ("billing", pytest.approx(0.3333, abs=1e-4))
    assert (yes_no.decision, yes_no.confidence) == ("yes", pytest.approx(0.7))  # noul_raw, not the band
    assert health["status"] == "ok"


async def test_von_errors_are_provider_errors_with_the_detail(monkeypatch):
    monkeypatch.setenv("SYSTEM1_VON_API_KEY", "wrong")
    provider = VonProvider(VonOptions(), client=asgi(von_app(api_key="right"), "http://127.0.0.1:8777"))
    with pytest.raises(ProviderError, match="HTTP 401: Missing or invalid Bearer token"):
        await provider.decide(None, Query("q?", ["a", "b"]), 5)


async def test_llama_server_names_its_loaded_model_and_caps_options(tmp_path):
    provider = SystemOneProvider(SystemOneOptions(max_options=256), client=asgi(llama_server_app(), "http://127.0.0.1:8790"))
    answer = await provider.decide(None, Query("Which team?", OPTIONS), 5)
    assert answer.model == "lfm2-d1"  # calibration fits key on the model the server loaded
    yes_no = await provider.decide(None, Query("Angry?", ["yes", "no"], yes_no=True), 5)
    assert yes_no.decision == "yes" and yes_no.confidence == pytest.approx(0.6328)
    with pytest.raises(ProviderError, match="HTTP 422: question 'q0' has 256 options, at most 255 are supported"):
        await provider.decide(None, Query("q?", [f"o{i}" for i in range(256)]), 5)


async def test_llama_server_has_no_batch_endpoint_so_the_lane_sends_singles():
    provider = SystemOneProvider(SystemOneOptions(), client=asgi(llama_server_app(), "http://127.0.0.1:8790"))
    assert provider.capabilities().batch is False
    with pytest.raises(ProviderError, match="no batch endpoint"):
        await provider.decide_batch(["a", "b"], [Query("q?", ["x", "y"])], 5)
