"""The REST API of the service, in process through its ASGI app: endpoints, status mapping, the
envelope on every error, metrics, API keys, the Host allow-list, body limits, reload and the
request log; and over a real socket, a client that hangs up."""

from __future__ import annotations

import functools
import json
import logging
import threading

import anyio
import httpx
import pytest

from system1.core.schema import SCHEMA_DIR
from system1.service.auth import hash_key

from ..service_harness import in_process, running_service

SEED = {"question": "Rerun the flaky pipeline or block the merge?", "options": ["rerun the pipeline", "block the merge"]}
MOCK = '[gateway]\nprovider = "mock"\n'


def is_envelope(body: dict, code: str) -> bool:
    return body["schema_version"] == "1" and body["status"] == "error" and body["error"]["code"] == code


@pytest.fixture
async def svc(tmp_path):
    async with in_process(tmp_path, MOCK + '[service]\nclients = ["alice"]\n') as running:
        yield running


@pytest.mark.anyio
async def test_decide_answers_200_with_the_envelope_and_the_model(svc):
    response = await svc.http.post("/v1/decide", json={**SEED, "request_id": "r-1"})
    body = response.json()
    assert response.status_code == 200 and response.headers["x-system1-model"] == "mock"
    assert (body["status"], body["decision"], body["request_id"]) == ("decided", "rerun the pipeline", "r-1")


@pytest.mark.anyio
async def test_an_abstention_is_200(svc):
    response = await svc.http.post("/v1/decide", json={**SEED, "min_confidence": 0.95})
    assert response.status_code == 200 and response.json()["status"] == "abstained"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("content", "needle"),
    [(json.dumps({"question": "q", "colour": "red"}), "colour: unknown field"), ("{not json", "not valid JSON"), ("[1, 2]", "JSON object")],
)
async def test_an_invalid_request_is_400_with_the_envelope(svc, content, needle):
    response = await svc.http.post("/v1/decide", content=content, headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert is_envelope(response.json(), "invalid_request") and needle in response.json()["error"]["message"]


@pytest.mark.anyio
async def test_a_provider_error_is_200_and_the_envelope_says_which(tmp_path):
    async with in_process(tmp_path, MOCK + '[providers.mock]\nfail = "engine on fire"\n') as svc:
        response = await svc.http.post("/v1/decide", json=SEED)
    assert response.status_code == 200 and is_envelope(response.json(), "provider_error")


@pytest.mark.anyio
async def test_a_broken_config_is_503_config_error_and_not_ready(tmp_path):
    async with in_process(tmp_path, '[gateway]\ntimeout_s = 0\n') as svc:
        decide = await svc.http.post("/v1/decide", json=SEED)
        ready = await svc.http.get("/readyz")
        alive = await svc.http.get("/healthz")
        health = (await svc.http.get("/v1/health")).json()
    assert decide.status_code == 503 and is_envelope(decide.json(), "config_error")
    assert ready.status_code == 503 and ready.json()["config_errors"]
    assert alive.status_code == 200 and health["status"] == "down"


@pytest.mark.anyio
async def test_overload_is_429_with_retry_after(tmp_path):
    async with in_process(tmp_path, MOCK + '[providers.mock]\ndelay_s = 60\nmax_queue = 0\n') as svc:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(functools.partial(svc.http.post, "/v1/decide", json=SEED))
            await anyio.wait_all_tasks_blocked()  # the slow request holds the only slot
            assert svc.service.gateway.lanes["mock"].in_flight == 1
            response = await svc.http.post("/v1/decide", json=SEED)
            tasks.cancel_scope.cancel()
    assert response.status_code == 429 and int(response.headers["retry-after"]) >= 1
    assert is_envelope(response.json(), "provider_error") and "overloaded" in response.json()["error"]["message"]


@pytest.mark.anyio
async def test_health_capabilities_and_schemas(svc):
    health = (await svc.http.get("/v1/health")).json()
    assert health["status"] == "ok" and health["providers"][0]["name"] == "mock"
    caps = (await svc.http.get("/v1/capabilities")).json()
    assert caps["tools"] == ["system1_decide", "system1_health", "system1_capabilities"]
    for name in ("request.json", "response.json"):
        served = (await svc.http.get(f"/v1/schema/{name}")).json()
        assert served == json.loads((SCHEMA_DIR / name).read_text())
    missing = await svc.http.get("/v1/schema/other.json")
    assert missing.status_code == 404 and is_envelope(missing.json(), "invalid_request")


@pytest.mark.anyio
async def test_framework_errors_are_envelopes_too(svc):
    unknown = await svc.http.get("/v2/nothing")
    wrong_method = await svc.http.get("/v1/decide")
    assert unknown.status_code == 404 and is_envelope(unknown.json(), "invalid_request")
    assert wrong_method.status_code == 405 and is_envelope(wrong_method.json(), "invalid_request")


@pytest.mark.anyio
async def test_liveness_readiness_and_openapi(svc):
    assert (await svc.http.get("/healthz")).json() == {"status": "alive"}
    assert (await svc.http.get("/readyz")).json() == {"ready": True, "config_errors": []}
    paths = (await svc.http.get("/openapi.json")).json()["paths"]
    assert {"/v1/decide", "/v1/health", "/v1/capabilities", "/readyz", "/metrics"} <= set(paths)


@pytest.mark.anyio
async def test_metrics_count_decisions_with_bounded_labels(svc):
    for client in ("alice", "mallory-1", "mallory-2"):
        await svc.http.post("/v1/decide", json={**SEED, "request_id": f"secret-{client}"}, headers={"X-System1-Client": client})
    await svc.http.post("/v1/decide", json={**SEED, "min_confidence": 0.99})
    text = (await svc.http.get("/metrics")).text
    assert 'system1_decisions_total{provider="mock",status="decided"} 3.0' in text
    assert 'system1_client_decisions_total{client="alice"} 1.0' in text
    assert 'system1_client_decisions_total{client="other"} 3.0' in text
    assert 'system1_attempts_total{outcome="ok",provider="mock"} 3.0' in text
    assert 'system1_attempts_total{outcome="abstained",provider="mock"} 1.0' in text
    assert 'system1_abstentions_total{reason="threshold"} 1.0' in text
    assert 'system1_stage_decisions_total{stage="1",status="decided"} 3.0' in text
    assert "system1_engine_batch_size_bucket" in text and "system1_lane_queue_depth" in text
    assert 'system1_build_info{version="' in text and "system1_mcp_sessions" in text
    assert "mallory" not in text and "secret-" not in text


@pytest.mark.anyio
async def test_the_host_allow_list(tmp_path):
    async with in_process(tmp_path, MOCK + '[service]\nallowed_hosts = ["gw.internal"]\n') as svc:
        async def status(host):
            return (await svc.http.get("/v1/health", headers={"Host": host})).status_code

        assert await status("attacker.example") == 403 and await status("attacker.example:8080") == 403
        assert await status("localhost:8080") == 200 and await status("gateway:8080") == 200
        assert await status("[::1]:8080") == 200 and await status("gw.internal") == 200
        rebinding = await svc.http.post("/v1/decide", json=SEED, headers={"Host": "evil.test"})
        assert is_envelope(rebinding.json(), "invalid_request") and "not allowed" in rebinding.json()["error"]["message"]


@pytest.mark.anyio
async def test_an_oversized_body_is_413(tmp_path):
    big = json.dumps({"question": "x" * 3000}).encode()

    async def chunks():
        yield big

    async with in_process(tmp_path, MOCK + '[service]\nmax_body_bytes = 2048\n') as svc:
        typed = {"content-type": "application/json"}
        declared = await svc.http.post("/v1/decide", content=big, headers=typed)
        streamed = await svc.http.post("/v1/decide", content=chunks(), headers=typed)
        fine = await svc.http.post("/v1/decide", json={"question": "x" * 1000})
    assert declared.status_code == 413 and is_envelope(declared.json(), "invalid_request")
    assert "content-length" not in streamed.request.headers
    assert streamed.status_code == 413 and "2048 bytes" in streamed.json()["error"]["message"]
    assert fine.status_code == 200


@pytest.mark.anyio
async def test_api_keys_are_required_and_name_the_client(tmp_path):
    keys = tmp_path / "keys"
    keys.write_text(f"# team keys\nalice {hash_key('alice-key-0123456789')}\n")
    toml = MOCK + f'[service]\napi_keys_file = "{keys}"\nrequest_log = "{tmp_path / "requests.jsonl"}"\n'
    async with in_process(tmp_path, toml, SYSTEM1_API_KEYS="bob:bob-key-0123456789abc") as svc:
        http = svc.http
        missing = await http.post("/v1/decide", json=SEED)
        wrong = await http.post("/v1/decide", json=SEED, headers={"Authorization": "Bearer nope"})
        alice = await http.post("/v1/decide", json=SEED,
                                headers={"Authorization": "Bearer alice-key-0123456789", "X-System1-Client": "carol"})
        bob = await http.get("/v1/health", headers={"Authorization": "Bearer bob-key-0123456789abc"})
        open_paths = [(await http.get(p)).status_code for p in ("/healthz", "/readyz", "/metrics")]
        mcp = await http.post("/mcp", json={}, headers={"Accept": "application/json, text/event-stream"})
        svc.service.request_log.close()
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    assert is_envelope(missing.json(), "invalid_request") and "API key" in missing.json()["error"]["message"]
    assert wrong.status_code == 401 and alice.status_code == 200 and bob.status_code == 200
    assert open_paths == [200, 200, 200] and mcp.status_code == 401
    logged = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert [entry["client"] for entry in logged] == ["alice"]  # named by the key, not the header
    assert "alice-key" not in keys.read_text()


@pytest.mark.anyio
async def test_reload_swaps_the_config_and_a_broken_one_keeps_the_old(tmp_path):
    async with in_process(tmp_path, MOCK) as svc:
        http = svc.http
        assert (await http.post("/v1/decide", json=SEED)).json()["confidence"] == 0.9
        svc.config_path.write_text(MOCK + "[providers.mock]\nconfidence = 0.7\n")
        reloaded = await http.post("/v1/reload", json={})
        assert reloaded.status_code == 200 and reloaded.json() == {"reloaded": True, "errors": [], "skipped": []}
        assert (await http.post("/v1/decide", json=SEED)).json()["confidence"] == 0.7

        svc.config_path.write_text("[gateway]\ntimeout_s = -5\n")
        refused = await http.post("/v1/reload", json={})
        assert refused.status_code == 409 and "timeout_s" in refused.json()["errors"][0]
        assert (await http.post("/v1/decide", json=SEED)).json()["confidence"] == 0.7
        health = (await http.get("/v1/health")).json()
        assert health["status"] == "ok" and "timeout_s" in health["reload_errors"][0]


@pytest.mark.anyio
async def test_requests_in_flight_finish_on_the_settings_they_started_with(tmp_path):
    async with in_process(tmp_path, MOCK + "[providers.mock]\ndelay_s = 0.5\n") as svc:
        http, result = svc.http, {}

        async def slow() -> None:
            result["r"] = await http.post("/v1/decide", json=SEED)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(slow)
            await anyio.wait_all_tasks_blocked()
            assert svc.service.gateway.lanes["mock"].in_flight == 1
            old_gateway = svc.service.gateway
            svc.config_path.write_text(MOCK + "[providers.mock]\nconfidence = 0.65\n")
            assert (await http.post("/v1/reload", json={})).json()["reloaded"]
        assert result["r"].json()["confidence"] == 0.9
        assert svc.service.gateway is not old_gateway and old_gateway.lanes["mock"].in_flight == 0
        assert (await http.post("/v1/decide", json=SEED)).json()["confidence"] == 0.65


@pytest.mark.anyio
async def test_the_request_log_records_decisions_and_questions_only_when_asked(tmp_path):
    log = tmp_path / "requests.jsonl"
    toml = MOCK + f'[service]\nrequest_log = "{log}"\nrequest_log_max_bytes = 1024\nrequest_log_backups = 2\n'
    async with in_process(tmp_path, toml) as svc:
        for i in range(20):
            await svc.http.post("/v1/decide", json={**SEED, "request_id": f"id-{i}"}, headers={"X-System1-Client": "alice"})
        svc.service.request_log.close()
    entries = [json.loads(line) for path in sorted(tmp_path.glob("requests.jsonl*")) for line in path.read_text().splitlines()]
    assert (tmp_path / "requests.jsonl.1").exists()  # rotated by size
    assert {e["client"] for e in entries} == {"alice"} and all(e["status"] == "decided" for e in entries)
    assert {"id", "provider", "confidence", "latency_ms"} <= set(entries[0]) and "question" not in entries[0]

    async with in_process(tmp_path, MOCK + f'[service]\nrequest_log = "{tmp_path / "q.jsonl"}"\nrequest_log_questions = true\n') as svc:
        await svc.http.post("/v1/decide", json=SEED)
        svc.service.request_log.close()
    assert json.loads((tmp_path / "q.jsonl").read_text())["question"] == SEED["question"]


@pytest.mark.anyio
async def test_broken_key_settings_close_everything_but_liveness_and_never_show_a_key(tmp_path):
    keys = tmp_path / "keys"
    keys.write_text("alice not-a-hash\n")
    toml = MOCK + f'[service]\napi_keys_file = "{keys}"\n'
    async with in_process(tmp_path, toml, SYSTEM1_API_KEYS="bob:bob-key-0123456789abc,s3cret-without-a-name") as svc:
        refused = {path: await svc.http.get(path) for path in ("/v1/health", "/readyz", "/metrics", "/v1/capabilities")}
        decide = await svc.http.post("/v1/decide", json=SEED, headers={"Authorization": "Bearer bob-key-0123456789abc"})
        alive = await svc.http.get("/healthz")
    assert alive.status_code == 200
    assert all(r.status_code == 503 and is_envelope(r.json(), "config_error") for r in [*refused.values(), decide])
    message = decide.json()["error"]["message"]
    assert f"{keys}:1" in message and "SYSTEM1_API_KEYS: entry 2" in message and "s3cret" not in message


def test_a_client_that_hangs_up_leaves_the_queue(tmp_path, caplog):
    """Only a socket shows a client going away."""
    caplog.set_level(logging.INFO, logger="system1")
    with running_service(tmp_path, MOCK + "[providers.mock]\ndelay_s = 3\n") as svc:
        lane = svc.service.gateway.lanes["mock"]
        holder = threading.Thread(target=lambda: httpx.post(f"{svc.url}/v1/decide", json=SEED, timeout=30))
        holder.start()
        for _ in range(300):
            if lane.in_flight:
                break
            holder.join(0.01)
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{svc.url}/v1/decide", json=SEED, timeout=0.3)  # queued behind, then gives up
        for _ in range(300):
            if lane.queued == 0:
                break
            holder.join(0.01)
        assert lane.queued == 0 and lane.in_flight == 1  # gone before the slot came free
        holder.join()
    hang_ups = [r for r in caplog.records if "hung up" in r.getMessage()]
    assert len(hang_ups) == 1 and "(499)" in hang_ups[0].getMessage()
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


@pytest.mark.anyio
async def test_a_service_started_again_after_a_stop_has_open_engines(tmp_path):
    from system1.service.service import Service

    from ..helpers import config_in

    service = Service(config_in(tmp_path, '[gateway]\nprovider = "systemone"\n'))
    await service.start()
    first = service.gateway
    await service.stop()
    assert first.providers["systemone"]._client.is_closed
    await service.start()
    try:
        assert service.gateway is not first and not service.gateway.providers["systemone"]._client.is_closed
    finally:
        await service.stop()


@pytest.mark.anyio
async def test_learned_files_too_deep_to_read_are_skipped_by_name_and_the_service_runs_without_them(tmp_path):
    deep = "[" * 200_000 + "]" * 200_000
    state = tmp_path / "state"
    (state / "router").mkdir(parents=True)
    for name in ("calibration.json", "heads.json", "router/skills.json", "router/spend.json"):
        (state / name).write_text(deep)
    async with in_process(tmp_path, MOCK + "[router]\nenabled = true\n") as svc:
        health = (await svc.http.get("/v1/health")).json()
        assert (await svc.http.post("/v1/decide", json=SEED)).json()["status"] == "decided"
        reloaded = (await svc.http.post("/v1/reload", json={})).json()
    assert health["status"] == "ok"
    named = [*health["calibration_errors"], *health["heads_errors"], *health["router_skills_errors"]]
    assert reloaded["reloaded"] and reloaded["skipped"] == named and len(named) == 3
    assert health["router_spend_errors"][0].startswith(f"{state / 'router' / 'spend.json'} is unreadable")
    for name, message in zip(("calibration.json", "heads.json", "skills.json"), named):
        assert message.startswith(str(state)) and name in message and "nested too deeply to read" in message
