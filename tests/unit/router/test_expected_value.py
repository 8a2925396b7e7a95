"""Routing by expected value: each model's expected quality from the decision's probabilities over
topic, complexity and risk times its chance of success there; the cheapest that clears the floor
answers, and uncertainty enters only through the probabilities."""

from __future__ import annotations

import itertools
import math

import pytest

from system1.router.scoring import BEST_VALUE, CHEAPEST, Needs, Signals, expected_quality, route

from .catalogues import seed_catalogue
from .scripted import Scripted, always_local, plan_with, router_for

SONNET, OPUS, LUNA = "anthropic/claude-sonnet-5", "anthropic/claude-opus-5.5", "openai/gpt-5.6-luna"
NEEDS = Needs(input_tokens=40)
TOPICS = ("debugging", "chat", "architecture", "writing")


def sure(topic: str, complexity: int, risk: int) -> Signals:
    return Signals(topics={topic: 1.0}, confidence=1.0, complexity=complexity, risk=risk)


@pytest.mark.parametrize("topic, complexity, risk", list(itertools.product(TOPICS, range(4), range(3))))
def test_on_a_sure_decision_expected_value_picks_what_the_step_rule_picks(topic, complexity, risk):
    # At certainty a model clears the floor exactly where skill >= min_skill + risk_bonus; the
    # risk is given after the catalogue's offset of -0.3.
    signals = sure(topic, complexity, risk + 0.3)
    ev, step = route(seed_catalogue(), signals, NEEDS), route(seed_catalogue(rule="step"), signals, NEEDS)
    assert ev.model == step.model and ev.reason == step.reason


def test_a_models_chance_of_success_is_even_where_its_skill_meets_the_levels_floor():
    settings = seed_catalogue()
    sonnet = settings.model(SONNET)
    floors = settings.min_skill
    assert sonnet.skill("architecture") < floors[3] and sonnet.skill("architecture") > floors[2]
    assert settings.success(sonnet, "architecture", 3) < 0.5 < settings.success(sonnet, "architecture", 2)
    at_floor = settings.model_copy(update={"min_skill": [0.4, 0.55, sonnet.skill("debugging"), 0.9]})
    assert at_floor.success(sonnet, "debugging", 2) == pytest.approx(0.5)


def test_uncertainty_enters_through_the_probabilities_not_a_rule_on_confidence():
    settings = seed_catalogue()
    split = Signals(topics={"debugging": 1.0}, confidence=0.3, complexity=2.0, risk=1.3,
                    complexity_p=(0.0, 0.5, 0.0, 0.5))
    sonnet = settings.model(SONNET)
    assert expected_quality(settings, sonnet, split) == pytest.approx(
        0.5 * settings.success(sonnet, "debugging", 1) + 0.5 * settings.success(sonnet, "debugging", 3))
    # A low topic confidence alone changes nothing: no level is raised for it.
    unsure = Signals(topics={"debugging": 1.0}, confidence=0.1, complexity=2, risk=1.3)
    assert route(settings, unsure, NEEDS).model == route(settings, sure("debugging", 2, 1.3), NEEDS).model == SONNET


def test_a_decision_leaning_to_expert_work_moves_up_a_tier_by_its_probabilities():
    settings = seed_catalogue()
    mostly_routine = Signals(topics={"architecture": 1.0}, confidence=0.6, complexity=1.2, risk=0.3,
                             complexity_p=(0.1, 0.7, 0.1, 0.1))
    leaning_expert = Signals(topics={"architecture": 1.0}, confidence=0.6, complexity=2.4, risk=0.3,
                             complexity_p=(0.0, 0.2, 0.2, 0.6))
    cheap, dear = route(settings, mostly_routine, NEEDS), route(settings, leaning_expert, NEEDS)
    costs = {c.id: c.est_cost_usd for c in dear.candidates}
    assert costs[dear.model] > costs[cheap.model]


def test_the_floor_is_each_risk_levels_weighed_by_its_probability():
    settings = seed_catalogue()
    signals = Signals(topics={"debugging": 1.0}, confidence=1.0, complexity=2, risk=1.0, risk_p=(0.5, 0.0, 0.5))
    w = settings.skill_width
    expected = 0.5 / (1 + math.exp(-settings.risk_bonus[0] / w)) + 0.5 / (1 + math.exp(-settings.risk_bonus[2] / w))
    assert route(settings, signals, NEEDS).required_skill == pytest.approx(expected, abs=1e-6)


def test_with_a_price_of_quality_the_capable_model_of_best_value_answers():
    signals = sure("debugging", 2, 1.3)
    cheap = route(seed_catalogue(), signals, NEEDS)
    assert cheap.reason == CHEAPEST and cheap.model == SONNET
    lavish = route(seed_catalogue(quality_price_usd=10.0), signals, NEEDS)
    assert lavish.reason == BEST_VALUE and lavish.model == OPUS  # a little more quality is worth its price here
    frugal = route(seed_catalogue(quality_price_usd=1e-6), signals, NEEDS)
    assert frugal.reason == BEST_VALUE and frugal.model not in (SONNET, OPUS)  # quality is worth almost nothing


@pytest.mark.anyio
async def test_the_dry_run_and_headers_show_each_candidates_expected_quality_and_cost(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-test")
    router = router_for(seed_catalogue(), tmp_path)
    plan = await plan_with(router, "openai", {"model": "auto", "messages": [{"role": "user", "content": "why?"}]},
                           "alice", Scripted(risk=1), always_local)
    report = plan.report()
    assert report["rule"] == "expected_value"
    assert all(0 <= c["expected_quality"] <= 1 for c in report["candidates"])
    header = plan.headers(None)["x-router-expected"]
    assert header.startswith(f"{plan.model} q=") and "$" in header
    await router.aclose()
