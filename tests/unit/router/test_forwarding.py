"""Forwarding to upstreams served for real (the fake hosted chat API): the body and keys each
upstream gets, fall-through before the first byte and not after, streams passed through as they
arrive, usage priced into spend and budgets, and the decision log."""

from __future__ import annotations

import asyncio
import json

import pytest

from system1.core.router_config import RouterSettings
from system1.router.plan import RouterError

from tests.fakes.hosted_chat import hosted_chat, reply_text

from .scripted import Scripted, always_local, plan_with, router_for

pytestmark = pytest.mark.anyio
KEY = "sk-fake-upstream-key"
CHEAP, MID, TOP = "cloud/cheap", "cloud/mid", "cloud/top"


def catalogue(url: str, **changes) -> RouterSettings:
    table = {
        "enabled": True, "retries": 2,
        "upstreams": {"cloud": {"base_url": url, "apis": ["openai", "anthropic"], "api_key_env": "FAKE_CLOUD_KEY",
                                "local": False, "first_byte_timeout_s": 1.0}},
        "models": [
            {"id": CHEAP, "upstream": "cloud", "name": "vendor/cheap-1", "price": {"in": 1, "out": 2}, "default_skill": 0.9},
            {"id": MID, "upstream": "cloud", "price": {"in": 2, "out": 4}, "default_skill": 0.9},
            {"id": TOP, "upstream": "cloud", "price": {"in": 4, "out": 8}, "default_skill": 0.95, "daily_budget_usd": 0.0161},
        ],
    }
    table.update(changes)
    return RouterSettings.model_validate(table)


def chat(stream: bool = False, **extra) -> dict:
    return {"model": "auto", "stream": stream, "messages": [{"role": "user", "content": "Why does this test fail?"}], **extra}


async def collect(reply) -> bytes:
    return b"".join([chunk async for chunk in reply.stream])


@pytest.fixture
def upstream(monkeypatch):
    monkeypatch.setenv("FAKE_CLOUD_KEY", KEY)
    with hosted_chat(key=KEY) as fake:
        yield fake


async def routed(upstream, tmp_path, body, api="openai", headers=None, **changes):
    router = router_for(catalogue(upstream.url, **changes), tmp_path)
    plan = await plan_with(router, api, body, "alice", Scripted(), always_local)
    return router, plan, await router.answer(plan, body, headers or {}, "alice")


async def test_the_chosen_model_answers_with_the_routers_headers(upstream, tmp_path):
    router, plan, reply = await routed(upstream, tmp_path, chat(), headers={"authorization": "Bearer gateway-key"})
    answer = json.loads(reply.body)
    assert reply.status == 200 and answer["choices"][0]["message"]["content"] == reply_text("vendor/cheap-1")
    assert reply.headers["x-router-model"] == CHEAP and reply.headers["x-router-reason"] == plan.reason
    assert (reply.headers["x-router-topic"], reply.headers["x-router-complexity"], reply.headers["x-router-risk"]) == \
        ("debugging", "2", "1")
    assert float(reply.headers["x-router-decision-ms"]) >= 0
    [received] = upstream.received
    assert received.body["model"] == "vendor/cheap-1"  # the upstream's own name for the model
    assert received.body["reasoning_effort"] == "medium"  # complexity 2, and the client set none
    assert received.headers["authorization"] == f"Bearer {KEY}"  # the upstream's key, not the client's
    await router.aclose()


async def test_the_clients_own_effort_is_kept(upstream, tmp_path):
    router, _, _ = await routed(upstream, tmp_path, chat(reasoning_effort="high"))
    assert upstream.received[0].body["reasoning_effort"] == "high"
    await router.aclose()


async def test_a_429_and_a_500_before_the_first_byte_fall_through_and_are_named(upstream, tmp_path):
    upstream.fail("vendor/cheap-1", "429")
    upstream.fail(MID, "500")
    router, _, reply = await routed(upstream, tmp_path, chat())
    assert reply.status == 200 and reply.headers["x-router-model"] == TOP
    assert reply.headers["x-router-failed"] == f"{CHEAP}, {MID}"
    assert upstream.models_asked() == ["vendor/cheap-1", MID, TOP]
    await router.aclose()


async def test_after_a_fall_through_the_conversation_stays_with_the_model_that_answered(upstream, tmp_path):
    upstream.fail("vendor/cheap-1", "503")
    router, _, reply = await routed(upstream, tmp_path, chat(), rule="step")  # the budget figures are the step rule's
    assert reply.headers["x-router-model"] == MID
    again = await plan_with(router, "openai", chat(), "alice", Scripted(), always_local)
    assert again.sticky and [m.id for m, _, _ in again.order] == [MID, CHEAP]  # TOP: over budget at a sticky turn's estimate
    await router.aclose()


async def test_an_upstream_slower_than_its_first_byte_timeout_is_skipped(upstream, tmp_path):
    upstream.fail("vendor/cheap-1", "slow:3")
    router, _, reply = await routed(upstream, tmp_path, chat(stream=True))
    await collect(reply)
    assert reply.headers["x-router-model"] == MID and reply.headers["x-router-failed"] == CHEAP
    await router.aclose()


async def test_a_whole_answer_may_take_longer_than_a_streams_first_byte(upstream, tmp_path):
    upstream.fail("vendor/cheap-1", "slow:1.5")  # past first_byte_timeout_s, within timeout_s
    router, _, reply = await routed(upstream, tmp_path, chat())
    assert reply.status == 200 and reply.headers["x-router-model"] == CHEAP and "x-router-failed" not in reply.headers
    await router.aclose()


async def test_a_stream_reaches_the_client_as_it_arrives(upstream, tmp_path):
    upstream.fail("vendor/cheap-1", "gate")
    router, _, reply = await routed(upstream, tmp_path, chat(stream=True))
    first = await asyncio.wait_for(reply.stream.__anext__(), 10)  # while the upstream still holds the rest
    assert first.startswith(b"data: ") and b"chat.completion.chunk" in first
    upstream.gate.set()
    rest = await collect(reply)
    assert rest.rstrip().endswith(b"data: [DONE]")
    await router.aclose()


async def test_a_stream_that_breaks_after_it_started_is_not_retried(upstream, tmp_path, caplog):
    upstream.fail("vendor/cheap-1", "break")
    router, plan, reply = await routed(upstream, tmp_path, chat(stream=True))
    received = await collect(reply)
    assert received.count(b"chat.completion.chunk") == 1  # the one event sent before the break...
    assert received.rstrip().endswith(b'"type": "api_error", "code": null}}')  # ...then an error event
    assert upstream.models_asked() == ["vendor/cheap-1"]
    assert "was cut short" in caplog.text
    router.ledger.log.close()
    [entry] = [json.loads(line) for line in router.ledger.log.path.read_text().splitlines()]
    assert entry["broken"].startswith("the stream broke after it started")
    await router.aclose()


@pytest.mark.parametrize(("faults", "status", "kind"), [
    (("503", "502", "500"), 502, "api_error"),
    (("429", "429", "429"), 429, "rate_limit_error"),  # rate limits everywhere stay a 429
])
async def test_when_every_candidate_fails_the_client_gets_a_clear_error_naming_them(upstream, tmp_path, faults, status,
                                                                                  kind):
    for model, fault in zip(("vendor/cheap-1", MID, TOP), faults):
        upstream.fail(model, fault)
    router = router_for(catalogue(upstream.url), tmp_path)
    plan = await plan_with(router, "openai", chat(), "alice", Scripted(), always_local)
    with pytest.raises(RouterError) as caught:
        await router.answer(plan, chat(), {}, "alice")
    assert (caught.value.status, caught.value.kind) == (status, kind)
    assert caught.value.failed == [f"{m} (HTTP {f})" for m, f in zip((CHEAP, MID, TOP), faults)]
    assert router.in_flight.counts == {}
    await router.aclose()


async def test_a_client_error_from_the_upstream_comes_back_as_it_is(upstream, tmp_path):
    router = router_for(catalogue(upstream.url), tmp_path)
    upstream.key = "another-key"  # the upstream now refuses ours: a 401 is the client's to see, not a retry
    plan = await plan_with(router, "openai", chat(), "alice", Scripted(), always_local)
    reply = await router.answer(plan, chat(), {}, "alice")
    assert reply.status == 401 and upstream.models_asked() == ["vendor/cheap-1"]
    await router.aclose()


async def test_usage_is_priced_into_todays_spend_and_a_spent_budget_takes_the_model_out(upstream, tmp_path):
    top_only = Scripted()
    router = router_for(catalogue(upstream.url, retries=0, min_skill=[0.92, 0.92, 0.92, 0.92], rule="step"),
                        tmp_path)  # only TOP clears the step rule's floor
    plan = await plan_with(router, "openai", chat(), "alice", top_only, always_local)
    assert plan.model == TOP
    await router.answer(plan, chat(), {}, "alice")
    spent = 11 * 4 / 1e6 + 7 * 8 / 1e6  # the fake's usage at TOP's prices
    assert router.spend.today[TOP] == pytest.approx(spent)
    again = await plan_with(router, "openai", chat(messages=[{"role": "user", "content": "another question"}]), "bob",
                              top_only, always_local)
    assert again.model != TOP
    assert {c["id"]: c.get("why", "") for c in again.report()["candidates"]}[TOP].startswith("over its daily budget")
    await router.aclose()  # saves what is pending
    saved = json.loads((tmp_path / "state" / "router" / "spend.json").read_text())
    assert saved["spent_usd"][TOP] == pytest.approx(spent)
    restarted = router_for(catalogue(upstream.url), tmp_path)
    assert restarted.spend.today[TOP] == pytest.approx(spent)  # a restart keeps today's spend
    await restarted.aclose()


async def test_a_streams_usage_is_read_as_it_passes(upstream, tmp_path):
    router, _, reply = await routed(upstream, tmp_path, chat(stream=True))
    await collect(reply)
    assert upstream.received[0].body["stream_options"] == {"include_usage": True}
    assert router.spend.today[CHEAP] == pytest.approx((11 * 1 + 7 * 2) / 1e6)
    await router.aclose()


async def test_anthropic_requests_go_to_v1_messages_with_the_key_as_x_api_key(upstream, tmp_path):
    body = {"model": "auto", "max_tokens": 64, "stream": True, "messages": [{"role": "user", "content": "hello"}]}
    router, _, reply = await routed(upstream, tmp_path, body, api="anthropic",
                                    headers={"anthropic-version": "2023-06-01", "x-api-key": "gateway-key"})
    events = await collect(reply)
    assert b"event: message_start" in events and b"event: message_stop" in events
    [received] = upstream.received
    assert received.path == "/v1/messages" and received.headers["x-api-key"] == KEY
    assert received.headers["anthropic-version"] == "2023-06-01" and "reasoning_effort" not in received.body
    assert router.spend.today[CHEAP] == pytest.approx((11 * 1 + 7 * 2) / 1e6)  # message_start and message_delta
    await router.aclose()


async def test_the_decision_log_has_the_route_and_usage_but_no_prompt_unless_asked(upstream, tmp_path):
    router, plan, reply = await routed(upstream, tmp_path, chat())
    router.ledger.log.close()
    [entry] = [json.loads(line) for line in router.ledger.log.path.read_text().splitlines()]
    assert entry["model"] == CHEAP and entry["reason"] == plan.reason and entry["usage"] == {"input_tokens": 11,
                                                                                             "output_tokens": 7,
                                                                                             "estimated": False}
    assert entry["cost_usd"] > 0 and entry["signals"]["primary"] == "debugging" and "prompt" not in entry
    assert "Why does this test fail" not in router.ledger.log.path.read_text()
    await router.aclose()
    router, _, _ = await routed(upstream, tmp_path, chat(), log_prompts=True, log_file=str(tmp_path / "with.jsonl"))
    router.ledger.log.close()
    assert json.loads((tmp_path / "with.jsonl").read_text())["prompt"] == "Why does this test fail?"
    await router.aclose()


async def test_an_upstream_refusal_that_echoes_its_key_reaches_the_client_with_the_key_blanked(upstream, tmp_path):
    upstream.fail("vendor/cheap-1", "echo")  # the fake queues faults by the model name it is sent
    router, plan, reply = await routed(upstream, tmp_path, chat(), retries=0)
    assert plan.model == CHEAP and reply.status == 400
    assert KEY.encode() not in reply.body and b"bad request for key ***" in reply.body
    await router.aclose()


async def test_a_success_that_is_not_json_falls_through_to_the_next_candidate(upstream, tmp_path):
    upstream.fail("vendor/cheap-1", "notjson")
    router, plan, reply = await routed(upstream, tmp_path, chat())
    assert plan.model == CHEAP and reply.status == 200 and reply.headers["x-router-model"] != CHEAP
    assert reply.headers["x-router-failed"] == CHEAP and json.loads(reply.body)["choices"]
    await router.aclose()


async def test_an_answer_over_the_size_bound_falls_through_and_a_stream_event_over_it_ends_the_stream(upstream, tmp_path):
    upstream.fail("vendor/cheap-1", "big:100000")
    router, _, reply = await routed(upstream, tmp_path, chat(), max_answer_bytes=65_536)
    assert reply.headers["x-router-failed"] == CHEAP and len(reply.body) < 65_536
    await router.aclose()
    upstream.fail("vendor/cheap-1", "big:100000")
    router, _, reply = await routed(upstream, tmp_path, chat(stream=True), max_answer_bytes=65_536)
    body = await collect(reply)
    assert b"an event of its stream is over 65536 bytes" in body and b"x" * 100_000 not in body
    await router.aclose()


async def test_a_stream_whose_client_set_its_own_stream_options_is_charged_by_what_it_sent(upstream, tmp_path):
    router, plan, reply = await routed(upstream, tmp_path, chat(stream=True, stream_options={}))
    body = await collect(reply)
    assert b'"usage"' not in body  # the upstream was not asked for usage, and reported none
    router.ledger.log.close()
    [entry] = [json.loads(line) for line in router.ledger.log.path.read_text().splitlines()]
    assert entry["usage"]["estimated"] and entry["usage"]["input_tokens"] == plan.check.needs.input_tokens
    assert entry["usage"]["output_tokens"] >= len(body) // 3 and router.spend.today[CHEAP] == entry["cost_usd"] > 0
    await router.aclose()


async def test_requests_at_the_same_time_cannot_overshoot_a_budget_together(upstream, tmp_path):
    # TOP's budget ($0.0161) holds two answers of up to 900 tokens (about $0.0073 each at most).
    router = router_for(catalogue(upstream.url), tmp_path)
    body = {**chat(max_tokens=900), "model": TOP}

    async def one() -> int:
        try:
            plan = await plan_with(router, "openai", body, "alice", Scripted())
            return (await router.answer(plan, body, {}, "alice")).status
        except RouterError as exc:
            assert "over its daily budget" in exc.message
            return exc.status

    statuses = await asyncio.gather(*(one() for _ in range(50)))
    assert statuses.count(200) == 2 and statuses.count(429) == 48
    assert router.spend.today[TOP] <= 0.0161 and router.spend.reserved == {}
    await router.aclose()


async def test_an_upstream_at_its_connection_limit_is_a_503_charged_to_no_model(upstream, tmp_path):
    upstream.fail("vendor/cheap-1", "gate", "gate")
    cloud = {"base_url": upstream.url, "apis": ["openai"], "api_key_env": "FAKE_CLOUD_KEY", "local": False,
             "max_connections": 2}
    router = router_for(catalogue(upstream.url, upstreams={"cloud": cloud}), tmp_path)
    held = []
    for _ in range(2):  # two streams hold the upstream's two connections
        plan = await plan_with(router, "openai", chat(stream=True), "alice", Scripted())
        held.append(await router.answer(plan, chat(stream=True), {}, "alice"))
    plan = await plan_with(router, "openai", chat(), "bob", Scripted())
    with pytest.raises(RouterError) as caught:
        await router.answer(plan, chat(), {}, "bob")
    assert caught.value.status == 503 and "cloud: 2 requests in flight" in caught.value.message
    upstream.gate.set()
    for reply in held:
        await collect(reply)
    assert router.slots.counts == {} and (await router.answer(plan, chat(), {}, "bob")).status == 200
    router.ledger.log.close()
    logged = [json.loads(line) for line in router.ledger.log.path.read_text().splitlines()]
    [refused] = [entry for entry in logged if entry["client"] == "bob" and entry["status"] is None]
    assert refused["model"] is None and refused["failed"] == [] and len(logged) == 4
    await router.aclose()
