"""The `von` adapter against a faithful fake of Von's server (llama-server runs for real:
test_llama_server.py)."""

from __future__ import annotations

import httpx
import pytest

from system1.core.gateway import Gateway
from system1.service.reports import health_report
from system1.providers.base import ProviderError, Query
from system1.providers.von import VonOptions, VonProvider

from ..unit.helpers import config_in
from .fakes import von_app

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
