"""The von, systemone and llama adapters against the `/v1/systemone` wire (Von 1.3, serve.py,
llama-server)."""

from __future__ import annotations

from dataclasses import replace

import httpx
import pytest

from system1.providers.base import MalformedResponse, ProviderError, ProviderTimeout, Query
from system1.providers.llama import LlamaOptions, LlamaProvider
from system1.providers.systemone import SystemOneOptions, SystemOneProvider
from system1.providers.von import VonOptions, VonProvider

from ..helpers import FakeWire, json_reply

pytestmark = pytest.mark.anyio

QUERY = Query("Which team handles a failed payout?", ["billing: charges, refunds", "technical: bugs"])
YES_NO = Query("Is `git push --force` hard to reverse?", ["yes", "no"], yes_no=True)


def choice_reply(model="von-1.3.0", choice="billing: charges, refunds", p=0.8):
    other = [o for o in QUERY.choices if o != choice][0]
    return {"model": model, "answers": {"q0": {"type": "choice", "choice": choice,
            "probabilities": {choice: p, other: round(1 - p, 4)}, "confidence": 0.6}},
            "usage": {"input_tokens": 96, "output_tokens": 1}}


def von(wire) -> VonProvider:
    return VonProvider(VonOptions(), client=wire.client())


def systemone(wire, **options) -> SystemOneProvider:
    return SystemOneProvider(SystemOneOptions(**options), client=wire.client())


async def test_von_sends_each_option_as_its_own_description_and_reports_its_probability():
    wire = FakeWire(json_reply(choice_reply()))
    answer = await von(wire).decide(None, QUERY, 5)
    assert wire.requests[0].url.path == "/v1/systemone" and wire.requests[0].url.port == 8777
    assert wire.bodies[0] == {
        "model": "von-1.3",
        "state": QUERY.question,
        "questions": {"q0": {"type": "choice", "instructions": QUERY.question,
                             "criteria": {o: o for o in QUERY.choices}}},
    }
    assert answer.decision == "billing: charges, refunds"
    assert answer.confidence == 0.8  # the option's probability, not Von's margin (0.6)
    assert answer.model == "von-1.3"


async def test_von_yes_no_is_a_noul_read_from_the_raw_probability():
    wire = FakeWire(json_reply({"model": "von-1.3.0", "answers": {"q0": {"type": "noul", "noul": 0.83, "noul_raw": 0.8}}}))
    answer = await von(wire).decide(None, YES_NO, 5)
    assert wire.bodies[0]["questions"]["q0"] == {"type": "noul", "instructions": YES_NO.question}
    assert answer.decision == "yes"
    assert answer.probabilities == pytest.approx({"yes": 0.8, "no": 0.2})
    assert answer.confidence == pytest.approx(0.8)


URGENCY = Query("How urgent is this?", ["can wait", "this week", "today", "right now"], score=True)


async def test_a_score_goes_as_jevs_score_and_comes_back_as_level_probabilities():
    # Von's observed score shape: probabilities keyed by level index, legend beside them.
    reply = {"model": "von-1.3.0", "answers": {"q0": {
        "type": "score", "score": 2.1, "confidence": 0.4, "legend": dict(enumerate(URGENCY.choices)),
        "probabilities": {"0": 0.05, "1": 0.15, "2": 0.45, "3": 0.35}}}}
    wire = FakeWire(json_reply(reply))
    answer = await von(wire).decide("the checkout is down", URGENCY, 5)
    assert wire.bodies[0]["questions"]["q0"] == {"type": "score", "instructions": URGENCY.question,
                                                 "criteria": URGENCY.choices}
    assert answer.decision == "today" and answer.confidence == 0.45
    assert answer.probabilities == {"can wait": 0.05, "this week": 0.15, "today": 0.45, "right now": 0.35}


@pytest.mark.parametrize("probabilities", [{"4": 1.0}, {"high": 1.0}, {}])
async def test_a_score_answer_for_levels_that_were_not_asked_is_malformed(probabilities):
    reply = {"model": "m", "answers": {"q0": {"type": "score", "score": 1, "probabilities": probabilities}}}
    with pytest.raises(MalformedResponse, match="level|probabilities"):
        await systemone(FakeWire(json_reply(reply))).decide("s", URGENCY, 5)


async def test_a_score_with_more_levels_than_jevs_contract_is_refused_before_the_call():
    wire = FakeWire(json_reply({}))
    with pytest.raises(ProviderError, match="scores of 2 to 10 levels; this one has 11"):
        await von(wire).decide("s", Query("How big?", [str(i) for i in range(11)], score=True), 5)
    assert wire.requests == []


async def test_a_noul_without_raw_value_uses_noul_and_picks_no_below_one_half():
    wire = FakeWire(json_reply({"model": "openjev", "answers": {"q0": {"type": "noul", "noul": 0.25}}}))
    answer = await systemone(wire).decide(None, YES_NO, 5)
    assert answer.decision == "no" and answer.confidence == 0.75


async def test_a_yes_no_answer_serve_py_marks_as_relevance_alone_is_read_as_such():
    marked = {"model": "all-MiniLM-L6-v2", "answers": {"q0": {"type": "noul", "noul": 0.9, "relevance": True}}}
    assert (await systemone(FakeWire(json_reply(marked))).decide(None, YES_NO, 5)).relevance
    plain = {"model": "anyjev", "answers": {"q0": {"type": "noul", "noul": 0.9}}}
    assert not (await systemone(FakeWire(json_reply(plain))).decide(None, YES_NO, 5)).relevance


async def test_systemone_sends_model_only_when_set_and_keys_calibration_by_the_answered_model():
    wire = FakeWire(json_reply(choice_reply(model="lfm2-d1")))
    answer = await systemone(wire).decide(None, QUERY, 5)
    assert "model" not in wire.bodies[0] and wire.requests[0].url.port == 8790
    assert answer.model == "lfm2-d1"
    await systemone(wire, model="minilm").decide(None, QUERY, 5)
    assert wire.bodies[1]["model"] == "minilm"


async def test_systemone_honours_the_servers_option_limit():
    wire = FakeWire(json_reply(choice_reply()))
    with pytest.raises(ProviderError, match="at most 3 options"):
        await systemone(wire, max_options=3).decide(None, Query("q", ["a", "b", "c", "d"]), 5)
    assert wire.requests == [] and systemone(wire).capabilities().max_options == 255


async def test_several_questions_share_one_pass_and_come_back_in_order():
    reply = {"model": "m", "answers": {
        "q1": {"type": "noul", "noul": 0.9},
        "q0": {"type": "choice", "choice": "technical: bugs", "probabilities": {"technical: bugs": 0.7, "billing: charges, refunds": 0.3}},
    }}
    wire = FakeWire(json_reply(reply))
    answers = await systemone(wire).decide_many("payout failed with a 500", [QUERY, YES_NO], 5)
    assert len(wire.requests) == 1 and wire.bodies[0]["state"] == "payout failed with a 500"
    assert [a.decision for a in answers] == ["technical: bugs", "yes"]


async def test_a_missing_answer_is_malformed():
    wire = FakeWire(json_reply({"model": "m", "answers": {"q0": {"type": "noul", "noul": 0.9}}}))
    with pytest.raises(MalformedResponse, match="no answer for question q1"):
        await systemone(wire).decide_many("s", [YES_NO, YES_NO], 5)


@pytest.mark.parametrize("noul", [1.5, -0.2, "yes", None])
async def test_a_noul_outside_the_unit_interval_is_malformed(noul):
    wire = FakeWire(json_reply({"model": "m", "answers": {"q0": {"type": "noul", "noul": noul}}}))
    with pytest.raises(MalformedResponse):
        await systemone(wire).decide(None, YES_NO, 5)


async def test_von_engine_exceptions_arrive_as_422_and_become_provider_errors():
    wire = FakeWire(json_reply({"detail": "Failed to load Option-Marker decision weights"}, 422))
    with pytest.raises(ProviderError, match="HTTP 422: Failed to load Option-Marker"):
        await von(wire).decide(None, QUERY, 5)


def llama(wire, **options) -> LlamaProvider:
    return LlamaProvider(LlamaOptions(**options), client=wire.client())


async def test_llama_server_validation_errors_become_provider_errors():
    # As llama-server 11434 answers (seen in test_llama_server.py against the real binary).
    body = {"error": {"code": 400, "type": "invalid_request_error",
                      "message": "questions.q0: too many options (53), this model supports at most 52"}}
    with pytest.raises(ProviderError, match="HTTP 400: .*at most 52"):
        await llama(FakeWire(json_reply(body, 400))).decide(None, QUERY, 5)


async def test_llama_keys_calibration_on_the_model_files_name_and_sends_only_the_wire_fields():
    wire = FakeWire(json_reply(choice_reply(model="/models/gguf/d1-3B-Q8_0.gguf")))
    answer = await llama(wire).decide(None, replace(QUERY, embed=True), 5)
    assert answer.model == "d1-3B-Q8_0.gguf"
    assert set(wire.bodies[0]) == {"state", "questions"}  # no serve.py `embed` field
    assert wire.requests[0].url.port == 8080


def both_orders_reply(p_yes_first: float, p_yes_second: float | None, model: str = "qwen.gguf", index: int = 0) -> dict:
    second = {"no": 1 - (p_yes_second or 0.0)} | ({} if p_yes_second is None else {"yes": p_yes_second})
    return {"model": model, "answers": {
        f"q{index}": {"type": "noul", "noul": p_yes_first},
        f"q{index}_other_order": {"type": "choice", "choice": max(second, key=second.__getitem__),
                                  "probabilities": second, "confidence": 0.1}}}


async def test_llama_asks_yes_no_in_both_orders_and_answers_the_mean_log_odds():
    wire = FakeWire(json_reply(both_orders_reply(0.8, 0.5)))
    answer = await llama(wire).decide("git push --force", YES_NO, 5)
    assert wire.bodies[0]["questions"] == {
        "q0": {"type": "noul", "instructions": YES_NO.question},
        "q0_other_order": {"type": "choice", "instructions": YES_NO.question, "criteria": {"no": "no", "yes": "yes"}},
    }
    assert list(wire.bodies[0]["questions"]["q0_other_order"]["criteria"]) == ["no", "yes"]  # no is option A
    # Odds 4 and 1: their geometric mean 2, so P(yes) = 2/3.
    assert answer.probabilities == pytest.approx({"yes": 2 / 3, "no": 1 / 3})
    assert (answer.decision, answer.confidence) == ("yes", pytest.approx(2 / 3))
    assert "yes first 0.80, no first 0.50, both" in answer.rationale


async def test_llama_orders_that_disagree_leave_the_answer_with_the_surer_one():
    answer = await llama(FakeWire(json_reply(both_orders_reply(0.6, 0.1)))).decide("rm -i notes.txt", YES_NO, 5)
    # Odds 1.5 and 1/9: geometric mean √(1/6), P(yes) ≈ 0.290.
    assert answer.decision == "no" and answer.probabilities["yes"] == pytest.approx(0.290, abs=1e-3)


async def test_llama_orders_sure_both_ways_round_cancel_out():
    answer = await llama(FakeWire(json_reply(both_orders_reply(1.0, 0.0)))).decide("rm -i notes.txt", YES_NO, 5)
    assert answer.probabilities["yes"] == 0.5


async def test_llama_asks_only_the_yes_no_questions_of_a_request_twice():
    reply = both_orders_reply(0.9, 0.7, index=1)
    reply["answers"]["q0"] = choice_reply()["answers"]["q0"]
    wire = FakeWire(json_reply(reply))
    choice, yes_no = await llama(wire).decide_many("a ticket", [QUERY, YES_NO], 5)
    assert sorted(wire.bodies[0]["questions"]) == ["q0", "q1", "q1_other_order"]
    assert choice.decision == "billing: charges, refunds" and yes_no.decision == "yes"


@pytest.mark.parametrize("second", [{"no": 1.0}, {"no": -0.5, "yes": 1.5}], ids=["no P(yes)", "P(yes) above 1"])
async def test_llama_an_other_order_answer_without_a_probability_of_yes_is_malformed(second):
    reply = both_orders_reply(0.7, 0.5)
    reply["answers"]["q0_other_order"]["probabilities"] = second
    with pytest.raises(MalformedResponse, match="q0_other_order"):
        await llama(FakeWire(json_reply(reply))).decide("ls", YES_NO, 5)


async def test_llama_without_the_other_orders_answer_is_malformed():
    wire = FakeWire(json_reply({"model": "m", "answers": {"q0": {"type": "noul", "noul": 0.7}}}))
    with pytest.raises(MalformedResponse, match="q0_other_order"):
        await llama(wire).decide("ls", YES_NO, 5)


async def test_llama_asks_once_when_both_orders_is_off_and_never_for_choices():
    wire = FakeWire(json_reply({"model": "m", "answers": {"q0": {"type": "noul", "noul": 0.7}}}))
    answer = await llama(wire, both_orders=False).decide("ls", YES_NO, 5)
    assert list(wire.bodies[0]["questions"]) == ["q0"] and answer.probabilities["yes"] == pytest.approx(0.7)
    wire = FakeWire(json_reply(choice_reply()))
    await llama(wire).decide(None, QUERY, 5)
    assert list(wire.bodies[0]["questions"]) == ["q0"]


async def test_llama_has_no_batch_endpoint():
    with pytest.raises(ValueError, match="batch"):
        LlamaOptions(batch=True)
    assert llama(FakeWire(json_reply({}))).capabilities().batch is False


def reading_wire(vector_reply) -> FakeWire:
    """llama-server with `--embeddings --pooling last`: /v1/models names the alias."""
    def reply(request):
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"object": "list", "data": [{"id": "qwen-judge", "object": "model"}]})
        return httpx.Response(200, json=vector_reply)
    return FakeWire(reply)


async def test_llama_reads_the_question_and_the_cut_text_as_a_chat_turn_and_returns_the_pooled_state():
    wire = reading_wire([{"index": 0, "embedding": [[0.6, 0.8]]}])
    text = "a" * 600 + "MIDDLE" + "z" * 600
    provider = llama(wire, max_text_chars=200)
    model, vector = await provider.embed({"prompt": text}, YES_NO, 5)
    assert (model, vector) == ("qwen-judge", [0.6, 0.8])
    assert [r.url.path for r in wire.requests] == ["/v1/models", "/embedding"]
    turn = wire.bodies[1]["content"]
    assert turn.startswith(f"<|im_start|>user\n{YES_NO.question}\n\nText:\naaa")
    assert turn.endswith("zzz\n\nAnswer yes or no.<|im_end|>\n<|im_start|>assistant\n")
    assert "MIDDLE" not in turn and len(turn) < 400  # the same cut as an answer's
    await provider.embed({"prompt": "ls"}, YES_NO, 5)
    assert [r.url.path for r in wire.requests][2:] == ["/embedding"]  # the model is asked once


async def test_llama_reads_a_context_of_several_fields_as_key_value_lines_and_names_a_choices_options():
    wire = reading_wire([{"index": 0, "embedding": [[1.0]]}])
    await llama(wire).embed({"tool": "Bash", "command": "rm -rf build/"}, QUERY, 5)
    turn = wire.bodies[1]["content"]
    assert "Text:\ntool: Bash\ncommand: rm -rf build/\n" in turn
    assert "Answer with one of: billing: charges, refunds, technical: bugs." in turn


@pytest.mark.parametrize("reply", [
    [{"index": 0, "embedding": [[0.1, 0.2], [0.3, 0.4]]}],  # --pooling none: one vector per token
    {"error": "x"},
    [{"index": 0, "embedding": []}],
])
async def test_llama_a_reading_that_is_not_one_pooled_vector_is_malformed_and_says_how_to_run_the_server(reply):
    with pytest.raises(MalformedResponse, match="--embeddings --pooling last"):
        await llama(reading_wire(reply)).embed("text", YES_NO, 5)


@pytest.mark.parametrize("template", ["{question} {text} {answr}", "{question} {0}", "{question"])
def test_llama_a_reading_prompt_with_another_field_is_refused_at_load_naming_it(template):
    with pytest.raises(ValueError, match="reading_prompt takes"):
        LlamaOptions(reading_prompt=template)


async def test_llama_a_server_without_embeddings_is_a_provider_error():
    def reply(request):
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        return httpx.Response(501, json={"error": {"code": 501, "message": "This server does not support "
                                                   "embeddings. Start it with `--embeddings`"}})
    with pytest.raises(ProviderError, match="HTTP 501: .*--embeddings"):
        await llama(FakeWire(reply)).embed("text", YES_NO, 5)


async def test_transport_failures_and_timeouts_are_typed():
    def refuse(request):
        raise httpx.ConnectError("refused", request=request)

    def stall(request):
        raise httpx.ConnectTimeout("timed out", request=request)

    with pytest.raises(ProviderError):
        await von(FakeWire(refuse)).decide(None, QUERY, 5)
    with pytest.raises(ProviderTimeout):
        await systemone(FakeWire(stall)).decide(None, QUERY, 0.2)


async def test_the_bearer_token_is_sent_when_the_environment_has_one(monkeypatch):
    monkeypatch.setenv("SYSTEM1_SYSTEMONE_API_KEY", "tok")
    wire = FakeWire(json_reply(choice_reply()))
    await systemone(wire).decide(None, QUERY, 5)
    assert wire.requests[0].headers["authorization"] == "Bearer tok"


async def test_health_reads_the_engine_model_and_device():
    wire = FakeWire(json_reply({"status": "ok", "engine": "minilm", "model": "all-MiniLM-L6-v2", "device": "cpu"}))
    probe = await systemone(wire).health(2)
    assert probe.ok and "minilm" in probe.detail and "cpu" in probe.detail
    assert wire.requests[0].url.path == "/health"
    down = await von(FakeWire(json_reply({"detail": "x"}, 503))).health(2)
    assert not down.ok and "HTTP 503" in down.detail


def test_settings_are_validated():
    with pytest.raises(ValueError):
        SystemOneOptions(max_options=1)
    with pytest.raises(ValueError, match="allow_remote"):
        VonOptions(endpoint="http://von:8777")
    assert VonOptions(endpoint="http://von:8777", allow_remote=True).endpoint == "http://von:8777"


async def test_a_batch_goes_to_the_batch_endpoint_with_one_state_per_request():
    def reply(request):
        import json as _json

        body = _json.loads(request.content)
        results = [{"model": "minilm", "answers": {"q0": {"type": "noul", "noul": 0.9 if "rm" in s else 0.1}}}
                   for s in body["states"]]
        return httpx.Response(200, json={"results": results, "total_usage": {"input_tokens": 1, "output_tokens": 0}})

    wire = FakeWire(reply)
    answers = await systemone(wire, batch=True).decide_batch(["rm -rf /", "ls -la", None], [YES_NO], 5)
    assert wire.requests[0].url.path == "/v1/systemone/batch"
    assert wire.bodies[0]["states"] == ["rm -rf /", "ls -la", YES_NO.question]
    assert [a[0].decision for a in answers] == ["yes", "no", "no"]


async def test_a_batch_reply_with_the_wrong_number_of_results_is_malformed():
    wire = FakeWire(json_reply({"results": []}))
    with pytest.raises(MalformedResponse, match="each of 2 states"):
        await systemone(wire, batch=True).decide_batch(["a", "b"], [YES_NO], 5)


async def test_without_a_batch_endpoint_batching_is_refused():
    with pytest.raises(ProviderError, match="no batch endpoint"):
        await von(FakeWire(json_reply({}))).decide_batch(["a", "b"], [YES_NO], 5)
