"""The router's pure scoring over the catalogue: the step rule pinned on the seed article's worked
examples, and expected value on the same catalogue."""

from __future__ import annotations

import pytest

from system1.router.scoring import BELOW_FLOOR, CHEAPEST, ESCALATED, Live, Needs, Signals, route

from .catalogues import seed_catalogue

SONNET, OPUS, QWEN, LUNA, DEEPSEEK, GEMMA = ("anthropic/claude-sonnet-5", "anthropic/claude-opus-5.5",
                                             "qwen/qwen3.7-flash", "openai/gpt-5.6-luna",
                                             "deepseek/deepseek-v4.1-flash", "gemma-3-270m")
# "My Java service throws NullPointerException at OrderService.java:88 only in production…":
# debugging for certain, complexity 2, risk scored 1.3 (1 after the offset of -0.3), 40 tokens.
NPE = Signals(topics={"debugging": 1.0}, confidence=1.0, complexity=2, risk=1.3)
NPE_NEEDS = Needs(input_tokens=40)


def by_id(result):
    return {c.id: c for c in result.candidates}


STEP = {"rule": "step"}


def test_the_null_pointer_prompt_has_floor_076_and_goes_to_sonnet():
    result = route(seed_catalogue(**STEP), NPE, NPE_NEEDS)
    assert (result.complexity, result.risk, result.required_skill) == (2, 1, 0.76)
    assert result.model == SONNET and result.reason == CHEAPEST
    candidates = by_id(result)
    assert [c.id for c in result.candidates if c.eligible] == [SONNET, OPUS]
    assert candidates[SONNET].skill == 0.87 and candidates[OPUS].skill == 0.94
    assert candidates[LUNA].why == candidates[DEEPSEEK].why == candidates[QWEN].why == BELOW_FLOOR


def test_estimated_costs_are_the_articles():
    candidates = by_id(route(seed_catalogue(**STEP), NPE, NPE_NEEDS))
    expected = {SONNET: 0.02008, OPUS: 0.04016, LUNA: 0.002408, DEEPSEEK: 0.00128, QWEN: 0.00078}
    for model_id, cost in expected.items():
        assert candidates[model_id].est_cost_usd == pytest.approx(cost, rel=0.005)  # as rounded there


def test_an_unsure_outage_prompt_is_bumped_a_level_and_escalates_to_opus():
    # "URGENT: checkout API returning 502 for all users since the 14:05 deploy…"
    signals = Signals(topics={"debugging": 0.52, "infra-devops": 0.48}, confidence=0.47, complexity=2, risk=2.3)
    result = route(seed_catalogue(**STEP), signals, Needs(input_tokens=60))
    assert (result.complexity, result.risk, result.required_skill) == (3, 2, 0.94)
    assert result.model == OPUS and result.reason == ESCALATED
    assert by_id(result)[OPUS].skill == pytest.approx(0.52 * 0.94 + 0.48 * 0.92)
    assert not any(c.eligible for c in result.candidates)


def test_a_trivial_chat_goes_to_the_cheapest_model():
    signals = Signals(topics={"chat": 0.95, "writing": 0.05}, confidence=0.89, complexity=0, risk=0.2)
    result = route(seed_catalogue(**STEP), signals, Needs(input_tokens=20))
    assert result.model == QWEN and result.reasoning_effort == "low"


def test_in_flight_requests_make_a_model_dearer_until_the_next_one_wins():
    busy = Live(in_flight={SONNET: 4})  # 0.02008 × (1 + 4 × 0.25) = 0.04016, then by skill
    result = route(seed_catalogue(**STEP), NPE, NPE_NEEDS, busy)
    assert by_id(result)[SONNET].eff_cost_usd == pytest.approx(0.04016)
    assert result.model == OPUS
    assert route(seed_catalogue(**STEP), NPE, NPE_NEEDS, Live(in_flight={SONNET: 3})).model == SONNET


def test_a_spent_daily_budget_takes_a_model_out():
    signals = Signals(topics={"architecture": 1.0}, confidence=0.95, complexity=3, risk=2.3)
    assert route(seed_catalogue(**STEP), signals, NPE_NEEDS).model == OPUS
    spent = route(seed_catalogue(**STEP), signals, NPE_NEEDS, Live(spent_usd={OPUS: 9.99}))
    assert spent.model == SONNET and spent.reason == ESCALATED
    assert by_id(spent)[OPUS].why.startswith("over its daily budget")


def test_tools_images_and_context_decide_which_models_can_take_a_request():
    chat = Signals(topics={"chat": 1.0}, confidence=1.0, complexity=0, risk=0)
    assert route(seed_catalogue(**STEP), chat, Needs(input_tokens=20, tools=True)).model == DEEPSEEK  # qwen has none
    result = route(seed_catalogue(**STEP), chat, Needs(input_tokens=20, vision=True))
    assert result.model == LUNA and by_id(result)[DEEPSEEK].why == "no image input"
    long = route(seed_catalogue(**STEP), chat, Needs(input_tokens=150_000))
    assert long.model == SONNET and by_id(long)[QWEN].why.startswith("context too small")


def test_a_private_prompt_under_local_only_never_gets_a_remote_model():
    result = route(seed_catalogue(**STEP, private="local_only"), NPE, Needs(input_tokens=40, private=True))
    assert result.model == GEMMA and result.local_only and result.order == [GEMMA]
    assert all(c.why == "private prompt: remote upstream" for c in result.candidates if c.id != GEMMA)


def test_a_private_prompt_no_local_model_can_take_is_refused_under_local_only():
    result = route(seed_catalogue(**STEP, private="local_only"), NPE, Needs(input_tokens=20_000, private=True))
    assert result.model is None and result.order == []
    assert "no local model can take this private prompt" in result.reason


def test_prefer_local_uses_a_remote_model_only_when_no_local_one_can_take_it():
    catalogue = seed_catalogue(**STEP)  # private = "prefer_local"
    assert route(catalogue, NPE, Needs(input_tokens=40, private=True)).model == GEMMA
    result = route(catalogue, NPE, Needs(input_tokens=40, private=True, tools=True))
    assert result.model == SONNET and not result.local_only


def test_the_decision_can_flag_a_private_prompt_the_pre_check_missed():
    private = Signals(topics={"debugging": 1.0}, confidence=1.0, complexity=2, risk=1.3, private=True)
    assert route(seed_catalogue(**STEP, private="local_only"), private, NPE_NEEDS).model == GEMMA
    assert route(seed_catalogue(**STEP, private="ignore"), private, NPE_NEEDS).model == SONNET


def test_fall_through_order_is_the_next_best_then_the_fallback_model():
    result = route(seed_catalogue(**STEP), NPE, NPE_NEEDS)
    assert result.order == [SONNET, OPUS]  # over the floor only; the fallback (Sonnet) is first
    with_fallback = route(seed_catalogue(**STEP, fallback_model=LUNA, retries=1), NPE, NPE_NEEDS)
    assert with_fallback.order == [SONNET, LUNA]
    outage = Signals(topics={"debugging": 0.52, "infra-devops": 0.48}, confidence=0.47, complexity=2, risk=2.3)
    escalated = route(seed_catalogue(**STEP, fallback_model=DEEPSEEK, retries=2), outage, NPE_NEEDS)
    assert escalated.order == [OPUS, SONNET, DEEPSEEK]  # by skill, as nobody clears the floor; then the fallback
    assert route(seed_catalogue(**STEP, retries=0), NPE, NPE_NEEDS).order == [SONNET]
    alone = route(seed_catalogue(**STEP, fallback_model=GEMMA), NPE, NPE_NEEDS, Live(unavailable={OPUS: "down"}))
    assert alone.order == [SONNET, GEMMA]  # one model over the floor, then the fallback below it


def test_an_unavailable_upstream_is_skipped_with_its_reason():
    result = route(seed_catalogue(**STEP), NPE, NPE_NEEDS, Live(unavailable={SONNET: "OPENROUTER_API_KEY is not set"}))
    assert result.model == OPUS and by_id(result)[SONNET].why == "OPENROUTER_API_KEY is not set"


def test_no_capable_model_is_a_route_without_a_model_that_says_why():
    result = route(seed_catalogue(**STEP, models=[], fallback_model=""), NPE, NPE_NEEDS)
    assert result.model is None and result.reason == "no models are configured in [router] models"


def test_the_same_inputs_always_give_the_same_route():
    assert route(seed_catalogue(**STEP), NPE, NPE_NEEDS) == route(seed_catalogue(**STEP), NPE, NPE_NEEDS)


def test_only_upstreams_that_speak_the_clients_api_can_answer():
    result = route(seed_catalogue(**STEP), NPE, Needs(input_tokens=40, api="anthropic"))
    assert result.model == GEMMA and result.reason == ESCALATED  # only llama serves /v1/messages here
    assert by_id(result)[SONNET].why == "its upstream does not speak the anthropic API"
