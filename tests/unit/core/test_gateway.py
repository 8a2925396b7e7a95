"""The decision chain: answers, abstention, fallback, timeouts, the paused state, health."""

from __future__ import annotations

import logging

import anyio
import pytest

from system1.core.calibration import Calibrator, Fit, Source, temper
from system1.core.gateway import Gateway
from system1.providers.base import Capabilities, EngineAnswer, HealthProbe, OneQuestionProvider, Query
from system1.service.reports import capabilities_report, health_report

from ..helpers import config_in

pytestmark = pytest.mark.anyio

SEED_REQUEST = {
    "question": "Rerun the flaky pipeline or block the merge?",
    "options": ["rerun the pipeline", "block the merge"],
}
SEED_RESPONSE = {
    "schema_version": "1", "request_id": "demo-1", "status": "decided",
    "decision": "rerun the pipeline", "confidence": 0.9,
    # The seeds' example, but for the rationale's last words: an answer no fit applied to says so.
    "rationale": "mock provider: always picks the first option (confidence uncalibrated: no fit for this engine "
                 "and question)", "provider": "mock",
    "probabilities": {"rerun the pipeline": 0.9, "block the merge": 0.09999999999999998},
    "calibrated": False, "latency_ms": 0,
    "attempts": [{"provider": "mock", "outcome": "ok", "latency_ms": 0, "detail": None}], "error": None,
}


def gateway(tmp_path, toml='[gateway]\nprovider = "mock"\n', **env) -> Gateway:
    return Gateway(config_in(tmp_path, toml, **env))


def without_timings(envelope: dict) -> dict:
    envelope = dict(envelope, latency_ms=0)
    envelope["attempts"] = [dict(a, latency_ms=0) for a in envelope["attempts"]]
    return envelope


async def test_mock_answers_the_seed_example_with_the_seed_response(tmp_path):
    response = await gateway(tmp_path).decide({**SEED_REQUEST, "request_id": "demo-1"})
    assert without_timings(response.envelope_json()) == SEED_RESPONSE


async def test_a_request_id_is_generated_when_omitted(tmp_path):
    response = await gateway(tmp_path).decide(SEED_REQUEST)
    assert len(response.request_id) == 32


async def test_without_options_the_answer_is_yes_or_no(tmp_path):
    response = await gateway(tmp_path).decide({"question": "Is this command destructive?",
                                                "context": {"command": "rm -rf build/"}})
    assert response.status == "decided" and response.decision == "yes"
    assert set(response.probabilities) == {"yes", "no"}


async def test_an_invalid_request_gets_invalid_request_and_no_attempt(tmp_path):
    response = await gateway(tmp_path).decide({"question": "q", "options": ["a"], "request_id": "r1"})
    assert response.status == "error" and response.error.code.value == "invalid_request"
    assert response.error.message.startswith("options:")
    assert response.request_id == "r1" and response.attempts == []


async def test_confidence_below_the_threshold_abstains(tmp_path):
    response = await gateway(tmp_path, '[gateway]\nprovider = "mock"\nmin_confidence = 0.95\n').decide(SEED_REQUEST)
    assert response.status == "abstained" and response.decision is None
    assert response.confidence == 0.9 and "below the threshold 0.95" in response.rationale
    assert response.attempts[0].outcome == "abstained"


async def test_the_request_threshold_overrides_the_configured_one(tmp_path):
    strict = gateway(tmp_path, '[gateway]\nprovider = "mock"\nmin_confidence = 0.95\n')
    assert (await strict.decide({**SEED_REQUEST, "min_confidence": 0.5})).status == "decided"
    lenient = gateway(tmp_path)
    assert (await lenient.decide({**SEED_REQUEST, "min_confidence": 0.91})).status == "abstained"
    assert (await lenient.decide({**SEED_REQUEST, "min_confidence": 0.9})).status == "decided"


class Scripted(OneQuestionProvider):
    """A provider that answers from a script, to drive the chain through each outcome."""

    name = "scripted"

    def __init__(self, behaviour, name: str = "scripted") -> None:
        super().__init__(OneQuestionProvider.Options())
        self.behaviour = behaviour
        self.name = name
        self.calls = 0

    async def decide_one(self, state, query: Query, timeout_s: float) -> EngineAnswer:
        self.calls += 1
        return EngineAnswer.from_mapping(await self.behaviour(query))

    async def health(self, timeout_s: float) -> HealthProbe:
        return HealthProbe(True, "scripted")

    def capabilities(self) -> Capabilities:
        return Capabilities(max_options=None)


def chain_of(tmp_path, *providers: Scripted) -> Gateway:
    names = [p.name for p in providers]
    toml = '[gateway]\nprovider = "mock"\nfallback = ["mock"]\n'
    config = config_in(tmp_path, toml)
    config.settings.gateway.provider = names[0]
    config.settings.gateway.fallback = names[1:]
    return Gateway(config, providers={p.name: p for p in providers})


async def first_option(query):
    return {"decision": query.choices[0], "confidence": 0.8, "rationale": "first"}


async def test_a_provider_abstention_is_final_and_never_falls_back(tmp_path):
    async def abstain(query):
        return {"abstain": True, "rationale": "not my kind of question"}

    backup = Scripted(first_option, "backup")
    response = await chain_of(tmp_path, Scripted(abstain, "primary"), backup).decide(SEED_REQUEST)
    assert response.status == "abstained" and response.rationale == "not my kind of question"
    assert [a.outcome for a in response.attempts] == ["abstained"]
    assert backup.calls == 0


async def test_a_threshold_abstention_never_falls_back(tmp_path):
    backup = Scripted(first_option, "backup")
    response = await chain_of(tmp_path, Scripted(first_option, "primary"), backup).decide(
        {**SEED_REQUEST, "min_confidence": 0.99}
    )
    assert response.status == "abstained" and backup.calls == 0


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (["rerun the pipeline"], "not an object"),
        ({"decision": "merge it", "confidence": 0.9}, "not one of the options"),
        ({"decision": "block the merge", "confidence": 1.5}, "not a number in [0, 1]"),
        ({"decision": "block the merge", "confidence": -0.1}, "not a number in [0, 1]"),
        ({"decision": "block the merge", "confidence": True}, "not a number in [0, 1]"),
        ({"decision": "block the merge"}, "not a number in [0, 1]"),
        ({"decision": "block the merge", "confidence": 0.7, "probabilities": {"x": 0.7}}, "probabilities"),
    ],
)
async def test_answers_the_gateway_cannot_accept_are_malformed_and_fall_back(tmp_path, raw, why):
    async def bad(query):
        return raw

    response = await chain_of(tmp_path, Scripted(bad, "primary"), Scripted(first_option, "backup")).decide(SEED_REQUEST)
    assert [a.outcome for a in response.attempts] == ["malformed", "ok"]
    assert why in response.attempts[0].detail
    assert response.status == "decided" and response.provider == "backup"


async def test_mock_response_setting_returns_an_answer_verbatim_for_malformed_checks(tmp_path):
    g = gateway(tmp_path, '[gateway]\nprovider = "mock"\n[providers.mock]\nresponse = "just text"\n')
    response = await g.decide(SEED_REQUEST)
    assert response.error.code.value == "malformed_response"
    assert response.attempts[0].outcome == "malformed"


async def test_an_error_falls_back_and_every_attempt_is_recorded(tmp_path):
    g = gateway(
        tmp_path,
        '[gateway]\nprovider = "laya"\nfallback = ["mock"]\n[providers.laya]\nendpoint = "http://127.0.0.1:9"\n',
    )
    response = await g.decide(SEED_REQUEST)
    assert response.status == "decided" and response.provider == "mock"
    assert [(a.provider, a.outcome) for a in response.attempts] == [("laya", "error"), ("mock", "ok")]
    assert "127.0.0.1:9" in response.attempts[0].detail


async def test_when_every_provider_fails_the_error_says_why(tmp_path):
    g = gateway(tmp_path, '[gateway]\nprovider = "mock"\n[providers.mock]\nfail = "engine on fire"\n')
    response = await g.decide(SEED_REQUEST)
    assert response.status == "error" and response.decision is None
    assert response.error.code.value == "provider_error"
    assert "engine on fire" in response.error.message
    assert response.attempts[0].detail == "engine on fire"


async def test_the_timeout_bounds_a_slow_provider_and_the_fallback_answers(tmp_path):
    slow = Scripted(lambda q: anyio.sleep(3600), "slow")
    config_toml = '[gateway]\ntimeout_s = 0.05\n'
    config = config_in(tmp_path, config_toml)
    config.settings.gateway.provider, config.settings.gateway.fallback = "slow", ["backup"]
    g = Gateway(config, providers={"slow": slow, "backup": Scripted(first_option, "backup")})
    with anyio.fail_after(10):
        response = await g.decide(SEED_REQUEST)
    assert [a.outcome for a in response.attempts] == ["timeout", "ok"]
    assert response.status == "decided"


async def test_a_timeout_on_the_last_provider_is_provider_timeout(tmp_path):
    g = gateway(tmp_path, '[gateway]\nprovider = "mock"\ntimeout_s = 0.05\n[providers.mock]\ndelay_s = 60\n')
    with anyio.fail_after(10):
        response = await g.decide(SEED_REQUEST)
    assert response.error.code.value == "provider_timeout"
    assert response.attempts[0].outcome == "timeout"


async def test_an_adapter_bug_is_an_error_attempt_not_a_crash(tmp_path):
    async def broken(query):
        raise KeyError("oops")

    response = await chain_of(tmp_path, Scripted(broken, "primary"), Scripted(first_option, "backup")).decide(SEED_REQUEST)
    assert [a.outcome for a in response.attempts] == ["error", "ok"]
    assert "internal error" in response.attempts[0].detail


async def test_a_broken_config_answers_config_error(tmp_path):
    response = await gateway(tmp_path, '[gateway]\ntimeout_s = 0\n').decide(SEED_REQUEST)
    assert response.error.code.value == "config_error"
    assert "[gateway] timeout_s" in response.error.message


async def test_the_paused_state_abstains_and_says_so(tmp_path):
    g = gateway(tmp_path)
    g.pause_file.parent.mkdir(parents=True)
    g.pause_file.write_text("now")
    response = await g.decide(SEED_REQUEST)
    assert response.status == "abstained" and "paused" in response.rationale
    assert response.attempts == []
    assert (await health_report(g))["status"] == "paused"


async def test_a_matching_fit_calibrates_without_changing_the_winner(tmp_path):
    fit = Fit(provider="mock", model="mock", question=SEED_REQUEST["question"], temperature=2.0)
    g = Gateway(config_in(tmp_path, '[gateway]\nprovider = "mock"\nmin_confidence = 0\n'),
                calibrator=Calibrator([Source("local", tmp_path, (fit,))]))
    response = await g.decide(SEED_REQUEST)
    assert response.calibrated is True and response.decision == "rerun the pipeline"
    assert response.confidence == pytest.approx(0.75)  # sqrt(.9) / (sqrt(.9) + sqrt(.1))
    assert sum(response.probabilities.values()) == pytest.approx(1.0)


async def test_a_fit_for_another_model_is_ignored(tmp_path):
    fit = Fit(provider="mock", model="mock-2", n_options=2, temperature=2.0)
    g = Gateway(config_in(tmp_path, '[gateway]\nprovider = "mock"\n'),
                calibrator=Calibrator([Source("local", tmp_path, (fit,))]))
    response = await g.decide(SEED_REQUEST)
    assert response.calibrated is False and response.confidence == 0.9


async def test_health_is_ok_degraded_or_down_by_the_chain(tmp_path):
    base = '[providers.laya]\nendpoint = "http://127.0.0.1:9"\n'
    ok = await health_report(gateway(tmp_path, '[gateway]\nprovider = "mock"\nfallback = ["laya"]\n' + base))
    assert ok["status"] == "ok"
    assert [(p["name"], p["role"], p["ok"]) for p in ok["providers"]] == [("mock", "primary", True), ("laya", "fallback", False)]
    degraded = await health_report(gateway(tmp_path, '[gateway]\nprovider = "laya"\nfallback = ["mock"]\n' + base))
    assert degraded["status"] == "degraded"
    down = await health_report(gateway(tmp_path, '[gateway]\nprovider = "laya"\n' + base))
    assert down["status"] == "down" and "127.0.0.1:9" in down["providers"][0]["detail"]


async def test_health_of_a_broken_config_is_down_with_the_errors(tmp_path):
    health = await health_report(gateway(tmp_path, '[gateway]\nbogus = 1\n'))
    assert health["status"] == "down"
    assert health["config_errors"] == [f"{tmp_path / 'config.toml'}: [gateway] bogus: unknown key"]
    assert health["schema_version"] == "1" and health["gateway_version"]


async def test_capabilities_describe_the_chain_limits_and_schemas(tmp_path):
    caps = capabilities_report(gateway(tmp_path, '[gateway]\nprovider = "mock"\n[providers.mock]\nmax_options = 4\n'))
    assert caps["tools"] == ["system1_decide", "system1_health", "system1_capabilities"]
    assert caps["provider"] == "mock" and caps["fallback"] == []
    assert caps["providers"]["mock"]["max_options"] == 4
    assert caps["available_providers"] == ["laya", "von", "systemone", "llama", "ollama", "anthropic", "mock"]
    assert caps["request_schema"]["additionalProperties"] is False
    assert "attempts" in caps["response_schema"]["properties"]


async def test_one_log_line_per_decision_with_the_request_id_and_question_only_at_debug(tmp_path, caplog):
    from system1.core.logs import _RequestIdFilter

    caplog.handler.addFilter(_RequestIdFilter())
    g = gateway(tmp_path)
    with caplog.at_level(logging.INFO, logger="system1"):
        await g.decide({**SEED_REQUEST, "request_id": "rid-7"})
    lines = [r for r in caplog.records if r.name == "system1.core.gateway"]
    assert len(lines) == 1 and lines[0].request_id == "rid-7"
    assert "status=decided" in lines[0].getMessage()
    assert SEED_REQUEST["question"] not in caplog.text
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="system1"):
        await g.decide({**SEED_REQUEST, "request_id": "rid-8"})
    assert SEED_REQUEST["question"] in caplog.text
    assert all(r.request_id == "rid-8" for r in caplog.records if r.name == "system1.core.gateway")


async def test_a_request_over_the_work_budget_is_refused_before_any_engine_is_asked(tmp_path):
    options = [f"option {i}: " + "x" * 480 for i in range(256)]  # 256 distinct 500-character options
    response = await gateway(tmp_path).decide({"question": "Which one?", "options": options})
    assert response.error.code.value == "invalid_request" and response.attempts == []
    assert "over the budget of 100,000 ([gateway] max_work)" in response.error.message
    small = gateway(tmp_path, '[gateway]\nprovider = "mock"\nmax_work = 1000\n')
    assert (await small.decide({"question": "q?", "options": ["a", "b"], "context": {"log": "y" * 2000}})).status == "error"
    assert (await small.decide({"question": "q?", "options": ["a", "b"]})).status == "decided"


QUESTION_FIT = Fit(provider="mock", model="mock", question=SEED_REQUEST["question"], temperature=2.0)
COUNT_FIT = Fit(provider="mock", model="mock", n_options=2, temperature=3.0)
UNSEEN_FIT = Fit(provider="mock", model="mock", unseen=True, temperature=4.0)


@pytest.mark.parametrize(
    ("fits", "kind", "temperature", "note"),
    [
        ((QUESTION_FIT, COUNT_FIT, UNSEEN_FIT), "question", 2.0, "calibrated by this question's fit"),
        ((COUNT_FIT, UNSEEN_FIT), "options", 3.0, "calibrated by the fit for this many options"),
        ((UNSEEN_FIT,), "unseen", 4.0, "the engine's fit for questions it has no fit for"),
        ((), "none", None, "uncalibrated: no fit for this engine and question"),
    ],
)
async def test_the_question_fit_wins_then_the_option_count_then_the_unseen_question_fit_then_none(
    tmp_path, fits, kind, temperature, note
):
    g = Gateway(config_in(tmp_path, '[gateway]\nprovider = "mock"\nmin_confidence = 0\n'),
                calibrator=Calibrator([Source("local", tmp_path, fits)]))
    response = await g.decide(SEED_REQUEST)
    assert response.calibration == kind and response.calibrated is (temperature is not None)
    expected = 0.9 if temperature is None else temper({"a": 0.9, "b": 0.1}, temperature)["a"]
    assert response.confidence == pytest.approx(expected) and note in response.rationale


async def test_uncalibrated_abstain_abstains_where_no_fit_applies_and_answers_where_one_does(tmp_path):
    toml = '[gateway]\nprovider = "mock"\nmin_confidence = 0\nuncalibrated = "abstain"\n'
    bare = await gateway(tmp_path, toml).decide(SEED_REQUEST)
    assert bare.status == "abstained" and bare.abstain_reason == "uncalibrated"
    assert 'uncalibrated = "abstain"' in bare.rationale and bare.confidence == 0.9
    fitted = Gateway(config_in(tmp_path, toml), calibrator=Calibrator([Source("local", tmp_path, (UNSEEN_FIT,))]))
    assert (await fitted.decide(SEED_REQUEST)).status == "decided"


async def test_health_and_capabilities_say_what_is_calibrated_for_the_primary_engine(tmp_path):
    g = Gateway(config_in(tmp_path, '[gateway]\nprovider = "mock"\n'),
                calibrator=Calibrator([Source("local", tmp_path, (QUESTION_FIT, COUNT_FIT, UNSEEN_FIT))]))
    caps, health = capabilities_report(g), await health_report(g)
    assert caps["calibrated_for"] == {"mock": {"questions": [SEED_REQUEST["question"]], "option_counts": [[2, 2]],
                                               "unseen_questions": True, "content_free_correction": False}}
    assert caps["uncalibrated"] == "pass"
    assert health["calibrated_for"] == {"mock": {"questions": 1, "option_counts": [[2, 2]], "unseen_questions": True,
                                                 "content_free_correction": False}}
