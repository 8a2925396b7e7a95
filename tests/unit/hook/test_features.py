"""The four routing features by REST (`POST /v1/features`), from the chain or a named provider:
what `system1 evaluate [--provider]` asks."""

from __future__ import annotations

import json

import pytest

from system1.cli import EXIT_START, main
from system1.core.gateway import Gateway
from system1.providers.mock import MockOptions, MockProvider
from system1.providers.systemone import SystemOneOptions, SystemOneProvider
from system1.hook.features import FEATURES
from system1.hook.answer import RoutingHook
from system1.hook.log import RoutingLog

from ..helpers import FakeWire, config_in, json_reply
from ..service_harness import app_transport, in_process

MOCK = '[gateway]\nprovider = "mock"\n'
# Laya configured beside the chain, whose engine is not running.
WITH_LAYA = MOCK + '[providers.laya]\nendpoint = "http://127.0.0.1:9"\n'


@pytest.mark.anyio
async def test_a_provider_outside_the_chain_is_asked_by_name_in_one_pass(tmp_path):
    reply = {"model": "m", "answers": {f"q{i}": {"type": "noul", "noul": 0.2} for i in range(len(FEATURES))}}
    wire = FakeWire(json_reply(reply))
    providers = {"mock": MockProvider(MockOptions()),
                 "systemone": SystemOneProvider(SystemOneOptions(), client=wire.client())}
    gateway = Gateway(config_in(tmp_path, MOCK), providers=providers, calibrator=None)
    hook = RoutingHook(gateway, RoutingLog(tmp_path / "routing.jsonl"))
    decisions = await hook.feature_decisions("Rename a variable", "t", None, only="systemone")
    passes = [body for request, body in zip(wire.requests, wire.bodies) if request.url.path == "/v1/systemone"]
    assert len(passes) == 1 and len(passes[0]["questions"]) == len(FEATURES)
    assert {d.provider for d in decisions} == {"systemone"}
    chain = await hook.feature_decisions("Rename a variable", "t", None)
    assert {d.provider for d in chain} == {"mock"}
    assert [r.url.path for r in wire.requests].count("/v1/systemone") == 1  # the chain did not ask it
    await gateway.aclose()


@pytest.mark.anyio
async def test_features_come_with_their_probabilities_and_nothing_is_logged(tmp_path):
    async with in_process(tmp_path, MOCK) as svc:
        response = await svc.http.post("/v1/features", json={"prompt": "Review the auth module", "provider": "mock"})
    body = response.json()
    assert response.status_code == 200 and body["error"] is None and set(body["features"]) == set(FEATURES)
    assert all(f["provider"] == "mock" and f["probabilities"]["yes"] == pytest.approx(0.9)
               for f in body["features"].values())
    assert not (svc.state_dir / "routing.jsonl").exists()


@pytest.mark.anyio
@pytest.mark.parametrize(("body", "message"), [
    ({}, "prompt: must be a non-empty string"),
    ({"prompt": "  "}, "prompt: must be a non-empty string"),
    ({"prompt": "x", "provider": 3}, "provider: must be the name of a configured provider"),
    ({"prompt": "x", "provider": None}, "provider: must be the name of a configured provider"),
    ({"prompt": "x", "extra": 1}, "extra: unknown field"),
    (["x"], "request: the body must be a JSON object"),
    ({"prompt": "x", "provider": "von"}, "provider: 'von' cannot be asked: no [providers.von] in the config"),
    ({"prompt": "x", "provider": "gpt"}, "provider: 'gpt' cannot be asked: unknown provider"),
])
async def test_a_bad_features_request_is_refused_naming_the_field(tmp_path, body, message):
    async with in_process(tmp_path, WITH_LAYA) as svc:
        response = await svc.http.post("/v1/features", json=body)
        health = (await svc.http.get("/v1/health")).json()
        down = (await svc.http.post("/v1/features", json={"prompt": "x", "provider": "laya"})).json()
    assert down["features"] is None and down["error"]["code"] == "provider_error"
    assert response.status_code == 400 and message in response.json()["error"]["message"]
    assert health["status"] == "ok"  # laya, configured beside the chain, is not probed


def test_evaluate_asks_the_named_provider_and_says_which(tmp_path, monkeypatch, capsys):
    log = tmp_path / "routing.jsonl"
    log.write_text(json.dumps({"prompt": "Design the cache", "labels": {name: "yes" for name in FEATURES}}) + "\n")
    transport, _ = app_transport(tmp_path, WITH_LAYA)
    monkeypatch.setenv("SYSTEM1_INSTALL_DIR", str(tmp_path / "state"))
    main(["evaluate", "--log", str(log), "--provider", "mock"], transport=transport)
    printed = capsys.readouterr().out
    assert "Routing readiness of provider mock" in printed and "100%" in printed
    code = main(["evaluate", "--log", str(log), "--provider", "von"], transport=transport)
    assert code == EXIT_START and "'von' cannot be asked: no [providers.von]" in capsys.readouterr().err
