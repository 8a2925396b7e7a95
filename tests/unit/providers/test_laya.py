"""The laya adapter against Laya's wire (shapes from laya 0.4 and laya-serve 0.2.1)."""

from __future__ import annotations

import httpx
import pytest

from system1.providers.base import EngineAnswer, MalformedResponse, ProviderError, ProviderTimeout, Query
from system1.providers.laya import LayaOptions, LayaProvider

from ..helpers import FakeWire, json_reply

pytestmark = pytest.mark.anyio

QUERY = Query("Rerun the flaky pipeline or block the merge?", ["rerun the pipeline", "block the merge"])


def laya_reply(choice="block the merge", probabilities=None, routing_model="typed-decisions", answer_confidence=0.52):
    probabilities = probabilities or {"block the merge": 0.52, "rerun the pipeline": 0.48}
    answer = {"type": "choice", "choice": choice, "probabilities": probabilities, "confidence": 0.001,
              "answer_confidence": answer_confidence, "action": {"act_probability": 0.5}, "x_jev_confidence": 0.04}
    reply = {"model": "laya-rl-agent", "answers": {"q0": answer}, "usage": {"input_tokens": 30, "output_tokens": 0}}
    if routing_model is not None:
        reply["routing"] = {"model": routing_model, "repo": "local", "reason": "pinned"}
    return reply


def provider(wire: FakeWire, **options) -> LayaProvider:
    return LayaProvider(LayaOptions(**options), client=wire.client())


async def test_a_choice_maps_to_one_pinned_choice_question():
    wire = FakeWire(json_reply(laya_reply()))
    answer = await provider(wire).decide({"ci": "red"}, QUERY, 5)
    request = wire.requests[0]
    assert request.method == "POST" and request.url.path == "/v1/systemone"
    assert wire.bodies[0] == {
        "model": "typed-decisions",
        "state": {"ci": "red"},
        "questions": {"q0": {"type": "choice", "instructions": QUERY.question,
                             "criteria": {option: None for option in QUERY.choices}}},
    }
    assert answer == EngineAnswer(**{
        "decision": "block the merge",
        "confidence": 0.52,
        "probabilities": {"block the merge": 0.52, "rerun the pipeline": 0.48},
        "rationale": "laya typed-decisions: block the merge=0.52, rerun the pipeline=0.48",
        "model": "typed-decisions",
    })


async def test_without_context_the_question_is_the_state():
    wire = FakeWire(json_reply(laya_reply()))
    await provider(wire).decide(None, QUERY, 5)
    assert wire.bodies[0]["state"] == QUERY.question


async def test_yes_no_goes_as_a_two_option_choice_not_noul():
    wire = FakeWire(json_reply(laya_reply("yes", {"yes": 0.7, "no": 0.3}, answer_confidence=0.7)))
    answer = await provider(wire).decide(None, Query("Is rm -rf destructive?", ["yes", "no"], yes_no=True), 5)
    assert wire.bodies[0]["questions"]["q0"] == {
        "type": "choice", "instructions": "Is rm -rf destructive?", "criteria": {"yes": None, "no": None}}
    assert answer.decision == "yes" and answer.confidence == 0.7


async def test_an_empty_model_lets_laya_route_and_takes_the_checkpoint_it_chose():
    wire = FakeWire(json_reply(laya_reply(routing_model="english")))
    answer = await provider(wire, model="").decide(None, QUERY, 5)
    assert wire.bodies[0]["model"] == "jev-latest"
    assert answer.model == "english"


async def test_an_answer_from_another_checkpoint_is_malformed():
    wire = FakeWire(json_reply(laya_reply(routing_model="english")))
    with pytest.raises(MalformedResponse, match="checkpoint 'english', not the pinned 'typed-decisions'"):
        await provider(wire).decide(None, QUERY, 5)


async def test_the_strict_jev_shape_without_answer_confidence_uses_the_choice_probability():
    reply = {"model": "laya-english", "answers": {"q0": {"type": "choice", "choice": "rerun the pipeline",
             "probabilities": {"rerun the pipeline": 0.5, "block the merge": 0.5}, "confidence": 0.0}},
             "usage": {"input_tokens": 0, "output_tokens": 0}}
    answer = await provider(FakeWire(json_reply(reply))).decide(None, QUERY, 5)
    assert answer.confidence == 0.5 and answer.model == "typed-decisions"


async def test_more_than_20_options_is_a_provider_error_without_a_call():
    wire = FakeWire(json_reply(laya_reply()))
    with pytest.raises(ProviderError, match="at most 20 options; this question has 21"):
        await provider(wire).decide(None, Query("q", [f"o{i}" for i in range(21)]), 5)
    assert wire.requests == []


async def test_20_options_are_sent():
    options = [f"o{i}" for i in range(20)]
    wire = FakeWire(json_reply(laya_reply("o3", {o: 0.05 for o in options}, answer_confidence=0.05)))
    assert (await provider(wire).decide(None, Query("q", options), 5)).decision == "o3"


async def test_mostly_non_latin_text_abstains_on_english_only_checkpoints():
    wire = FakeWire(json_reply(laya_reply()))
    query = Query("Перезапустить конвейер или заблокировать слияние?", ["перезапуск", "блок"])
    answer = await provider(wire).decide(None, query, 5)
    assert answer.abstain is True and "multilingual" in answer.rationale
    assert wire.requests == []


async def test_non_latin_text_is_sent_to_the_multilingual_checkpoint():
    wire = FakeWire(json_reply(laya_reply("блок", {"перезапуск": 0.4, "блок": 0.6}, routing_model="multilingual")))
    answer = await provider(wire, model="multilingual").decide(None, Query("Перезапустить или блок?", ["перезапуск", "блок"]), 5)
    assert answer.decision == "блок"


async def test_several_questions_about_one_text_go_in_one_pass():
    reply = laya_reply()
    reply["answers"]["q1"] = {"type": "choice", "choice": "no", "probabilities": {"yes": 0.1, "no": 0.9}, "answer_confidence": 0.9}
    wire = FakeWire(json_reply(reply))
    answers = await provider(wire).decide_many(
        "Refactor the parser", [QUERY, Query("Is it read-only?", ["yes", "no"], yes_no=True)], 5
    )
    assert len(wire.requests) == 1
    assert set(wire.bodies[0]["questions"]) == {"q0", "q1"} and wire.bodies[0]["state"] == "Refactor the parser"
    assert [a.decision for a in answers] == ["block the merge", "no"]


async def test_the_api_key_comes_from_the_environment(monkeypatch):
    wire = FakeWire(json_reply(laya_reply()))
    monkeypatch.setenv("SYSTEM1_LAYA_API_KEY", "k-123")
    await provider(wire).decide(None, QUERY, 5)
    assert wire.requests[0].headers["authorization"] == "Bearer k-123"
    monkeypatch.delenv("SYSTEM1_LAYA_API_KEY")
    await provider(wire).decide(None, QUERY, 5)
    assert "authorization" not in wire.requests[1].headers


async def test_engine_error_bodies_become_provider_errors_with_their_message():
    wire = FakeWire(json_reply({"detail": "too many choice options for 'q0' (101 > 100)"}, 413))
    with pytest.raises(ProviderError, match=r"HTTP 413: too many choice options"):
        await provider(wire).decide(None, QUERY, 5)
    wire = FakeWire(json_reply({"error": {"message": "Missing or invalid API key.", "field": None}}, 401))
    with pytest.raises(ProviderError, match="HTTP 401: Missing or invalid API key"):
        await provider(wire).decide(None, QUERY, 5)


async def test_a_transport_failure_is_a_provider_error():
    def refuse(request):
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(ProviderError, match="ConnectError reaching http://127.0.0.1:8765"):
        await provider(FakeWire(refuse)).decide(None, QUERY, 5)


async def test_a_slow_engine_is_a_provider_timeout_and_the_timeout_reaches_the_client():
    seen = {}

    def slow(request):
        seen.update(request.extensions["timeout"])
        raise httpx.ReadTimeout("read timed out", request=request)

    with pytest.raises(ProviderTimeout, match="no answer within 1.5 s"):
        await provider(FakeWire(slow)).decide(None, QUERY, 1.5)
    assert seen["read"] == 1.5


@pytest.mark.parametrize(
    "reply",
    [
        httpx.Response(200, text="<html>"),
        httpx.Response(200, json={"answers": {}}),
        httpx.Response(200, json={"answers": {"q0": {"choice": "block the merge"}}}),
        httpx.Response(200, json={"answers": {"q0": {"choice": "block the merge", "probabilities": {"block the merge": "high"}}}}),
        httpx.Response(200, json={"answers": {"q0": {"choice": "x", "probabilities": {"x": 1.0}}}}),
    ],
)
async def test_bodies_that_are_not_laya_answers_are_malformed(reply):
    with pytest.raises(MalformedResponse):
        await provider(FakeWire(lambda request: reply)).decide(None, QUERY, 5)


def test_invalid_settings_are_refused():
    with pytest.raises(ValueError, match="allow_remote"):
        LayaOptions(endpoint="http://192.168.1.5:8765")
    with pytest.raises(ValueError, match="not an http"):
        LayaOptions(endpoint="ftp://127.0.0.1")
    with pytest.raises(ValueError):
        LayaOptions(model=3)


async def test_health_reports_ok_and_warns_when_the_pinned_checkpoint_is_not_loaded():
    wire = FakeWire(json_reply({"status": "ok", "loaded": ["english"], "device": "cpu"}))
    probe = await provider(wire).health(2)
    assert wire.requests[0].url.path == "/health"
    assert probe.ok and "'typed-decisions' is not preloaded" in probe.detail and "device cpu" in probe.detail
    loaded = await provider(FakeWire(json_reply({"status": "ok", "loaded": ["typed-decisions"]}))).health(2)
    assert loaded.ok and "not preloaded" not in loaded.detail


async def test_health_falls_back_to_healthz_on_laya_serve_0_2():
    def route(request):
        if request.url.path == "/health":
            return httpx.Response(404, json={"error": {"message": "Not Found", "field": None}})
        return httpx.Response(200, json={"status": "ok"})

    wire = FakeWire(route)
    assert (await provider(wire).health(2)).ok
    assert [r.url.path for r in wire.requests] == ["/health", "/healthz"]


async def test_health_of_an_unreachable_engine_is_not_ok():
    def refuse(request):
        raise httpx.ConnectError("refused", request=request)

    probe = await provider(FakeWire(refuse)).health(2)
    assert not probe.ok and "ConnectError" in probe.detail


def test_capabilities_declare_the_option_limit_and_batching():
    caps = LayaProvider(LayaOptions()).capabilities()
    assert (caps.max_options, caps.multi_question, caps.batch, caps.model) == (20, True, True, "typed-decisions")


async def test_a_batch_abstains_on_non_latin_states_and_sends_the_rest():
    reply = {"results": [laya_reply()], "total_usage": {"input_tokens": 1, "output_tokens": 0}}
    wire = FakeWire(json_reply(reply))
    answers = await provider(wire).decide_batch(["Перезапустить конвейер сейчас же", "CI is red again"], [QUERY], 5)
    assert wire.requests[0].url.path == "/v1/systemone/batch"
    assert wire.bodies[0]["states"] == ["CI is red again"]
    assert answers[0][0].abstain is True and answers[1][0].decision == "block the merge"
