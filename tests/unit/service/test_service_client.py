"""The one client of a running service, and the commands built on it: which gateway, and why
it gave no answer."""

from __future__ import annotations

import json

import pytest

from system1.cli import EXIT_OK, EXIT_START, main
from system1.client.service_client import GatewayError, ServiceClient

from ..helpers import closed_port_url
from ..service_harness import app_transport, in_process

MOCK = '[gateway]\nprovider = "mock"\n'
SEED = {"question": "Rerun the flaky pipeline or block the merge?", "options": ["rerun the pipeline", "block the merge"]}


@pytest.mark.anyio
async def test_the_client_asks_the_service_with_the_callers_name_priority_and_calibration(tmp_path):
    async with in_process(tmp_path, MOCK + '[service]\nclients = ["cal"]\n') as svc:
        async with ServiceClient(transport=svc.transport) as client:
            reply = await client.decide(SEED, client="cal", batch=True, calibrate=False)
            invalid = await client.decide({"question": ""})
            health = await client.health()
            caps = await client.capabilities()
            metrics = (await svc.http.get("/metrics")).text
    assert reply.status == 200 and reply.model == "mock" and reply.envelope["decision"] == "rerun the pipeline"
    assert invalid.status == 400 and invalid.envelope["error"]["code"] == "invalid_request"
    assert health["status"] == "ok" and caps["provider"] == "mock"
    assert 'system1_client_decisions_total{client="cal"} 1.0' in metrics


@pytest.mark.anyio
async def test_an_unreachable_gateway_is_one_error_naming_its_url_and_why():
    url = closed_port_url()
    async with ServiceClient(url) as client:
        with pytest.raises(GatewayError) as caught:
            await client.health()
    assert caught.value.url == url and str(caught.value).startswith(f"the gateway service at {url} is unreachable")
    assert not caught.value.timeout


@pytest.mark.anyio
async def test_a_refusal_names_the_gateway_and_the_reason(tmp_path):
    async with in_process(tmp_path, MOCK, SYSTEM1_API_KEYS="bob:bob-key-0123456789abc") as svc:
        async with ServiceClient(token="wrong-key", transport=svc.transport) as client:
            with pytest.raises(GatewayError) as caught:
                await client.capabilities()
    assert caught.value.status == 401 and "refused the request: unauthorized" in str(caught.value)


@pytest.mark.anyio
async def test_a_refused_reload_is_an_answer_not_an_error(tmp_path):
    async with in_process(tmp_path, MOCK) as svc:
        svc.config_path.write_text("[gateway]\nnonsense = 1\n")
        async with ServiceClient(transport=svc.transport) as client:
            refused = await client.reload()
    assert refused["reloaded"] is False and "nonsense" in refused["errors"][0]


def test_commands_take_url_and_say_which_gateway_did_not_answer(capsys):
    url = closed_port_url()
    assert main(["reload", "--url", url]) == EXIT_START
    err = capsys.readouterr().err
    assert err.startswith(f"system1 reload: the gateway service at {url} is unreachable")


def test_commands_name_the_gateway_that_answered(tmp_path, monkeypatch, capsys):
    transport, _ = app_transport(tmp_path, MOCK + '[routing]\nenabled = true\n')
    monkeypatch.setenv("SYSTEM1_GATEWAY_URL", "http://127.0.0.1:8123")
    prompt = "Please design the storage layer for the new audit trail and compare both options"
    assert main(["hook", "route", "--prompt", prompt], transport=transport) == EXIT_OK
    out, err = capsys.readouterr()
    assert json.loads(out)["tier"] == "opus" and "gateway: http://127.0.0.1:8123" in err
    assert main(["reload", "--url", "http://127.0.0.1:8124"], transport=transport) == EXIT_OK
    assert "gateway: http://127.0.0.1:8124" in capsys.readouterr().err


def test_keys_add_reloads_the_service_so_the_key_works_at_once(tmp_path, monkeypatch, capsys):
    keys = tmp_path / "keys"
    keys.write_text("")
    transport, service = app_transport(tmp_path, MOCK + f'[service]\napi_keys_file = "{keys}"\n')
    monkeypatch.setenv("SYSTEM1_CONFIG", str(tmp_path / "config.toml"))
    assert main(["keys", "add", "dana"], transport=transport) == EXIT_OK
    out = capsys.readouterr().out.splitlines()
    key = out[1]
    assert out[2] == "reloaded the config, calibration fits and learned heads" and service.keys.identify(key) == "dana"
    assert key not in keys.read_text()  # only its hash
