"""The router's plan: pre-check, the four-question decision, sticky conversations, pass-through
and privacy, as the dry run reports them."""

from __future__ import annotations

import asyncio

import pytest

from system1.core.router_config import RouterSettings
from system1.router.scoring import CHEAPEST, ESCALATED
from system1.router.plan import RouterError
from system1.router.router import PASSED, STICKY

from .catalogues import seed_table
from .scripted import Scripted, always_local, plan_with, router_for

pytestmark = pytest.mark.anyio
SONNET, OPUS, GEMMA = "anthropic/claude-sonnet-5", "anthropic/claude-opus-5.5", "gemma-3-270m"
NPE = "My Java service throws NullPointerException at OrderService.java:88 only in production, stack trace attached"


def body(text: str = NPE, model: str = "auto", **extra) -> dict:
    return {"model": model, "messages": [{"role": "system", "content": "You are a senior engineer."},
                                         {"role": "user", "content": text}], **extra}


def settings(**changes) -> RouterSettings:
    return RouterSettings.model_validate(seed_table(**changes))


async def test_the_dry_run_answers_the_seed_articles_shape(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-test")
    router = router_for(settings(rule="step"), tmp_path)  # the article's rule and figures
    plan = await plan_with(router, "openai", body(), "alice", Scripted(risk=1), always_local)
    report = plan.report()
    assert report["model"] == SONNET and report["reason"] == CHEAPEST
    assert report["decision_provider"] == "scripted" and report["decision_ms"] >= 0
    assert report["decision_cost_usd"] == 0.0  # a local engine
    assert report["signals"]["primary"] == "debugging" and report["signals"]["topics"] == {"debugging": 1.0}
    assert (report["signals"]["complexity"], report["signals"]["risk"], report["signals"]["private"]) == (2, 1, False)
    assert report["required_skill"] == 0.76
    assert report["needs"] == {"input_tokens": report["needs"]["input_tokens"], "tools": False, "vision": False,
                               "private": False, "api": "openai", "local_only": False}
    first = report["candidates"][0]
    assert first == {"id": SONNET, "skill": 0.87, "est_cost_usd": first["est_cost_usd"],
                     "eff_cost_usd": first["eff_cost_usd"], "eligible": True}
    assert {c["id"]: c.get("why") for c in report["candidates"]}["openai/gpt-5.6-luna"] == "below quality floor"
    await router.aclose()


async def test_the_four_questions_judge_the_latest_user_message_in_one_call(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-test")
    decider = Scripted()
    router = router_for(settings(), tmp_path)
    await plan_with(router, "openai", body(), "alice", decider, always_local)
    [(state, queries, only)] = decider.asked
    assert state == {"prompt": NPE} and only is None
    assert [q.score for q in queries] == [False, True, True, False] and queries[3].yes_no
    assert [q.kind for q in queries] == ["router-topic", "router-complexity", "router-risk", "router-private"]
    await router.aclose()


async def test_without_a_key_for_an_upstream_its_models_are_out(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    router = router_for(settings(), tmp_path)
    plan = await plan_with(router, "openai", body(), "alice", Scripted(), always_local)
    assert plan.model == GEMMA and plan.reason == ESCALATED  # the only model whose upstream needs no key
    assert {c["id"]: c.get("why") for c in plan.report()["candidates"]}[SONNET] == "OPENROUTER_API_KEY is not set"
    await router.aclose()


async def test_a_private_prompt_under_local_only_is_decided_and_answered_on_this_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-test")
    decider = Scripted()
    router = router_for(settings(private="local_only"), tmp_path)
    leaked = body(NPE + "\nexport AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE")
    plan = await plan_with(router, "openai", leaked, "alice", decider, lambda name: False)  # the engine is remote
    assert decider.asked == []  # the prompt never went to the decision engine
    report = plan.report()
    assert report["findings"] == ["secret: AWS Access Key"] and report["needs"]["local_only"]
    assert report["decision_error"].startswith("the prompt may not reach a decision engine off this machine")
    assert report["kept_local"]["by"] == "pre-check"
    assert plan.model == GEMMA and [m.id for m, _, _ in plan.order] == [GEMMA]
    await router.aclose()


async def test_a_private_prompt_is_decided_by_the_private_decision_provider(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-test")
    decider = Scripted()
    router = router_for(settings(decision={"private_provider": "systemone", "provider": "anthropic"}), tmp_path)
    await plan_with(router, "openai", body("call me at +44 20 7946 0958 about the bug"), "alice", decider, always_local)
    await plan_with(router, "openai", body("what is a monad?"), "bob", decider, always_local)
    assert [only for _, _, only in decider.asked] == ["systemone", "anthropic"]
    hosted = await plan_with(router, "openai", body("what is a functor?"), "bob", decider, lambda name: name != "anthropic")
    assert hosted.report()["decision_cost_usd"] is None  # a hosted engine's price is not known here
    await router.aclose()


async def test_a_conversation_keeps_its_model_without_a_new_decision(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-test")
    decider = Scripted()
    router = router_for(settings(), tmp_path)
    first = await plan_with(router, "openai", body(), "alice", decider, always_local)
    later = body()
    later["messages"] += [{"role": "assistant", "content": "Check the null field."}, {"role": "user", "content": "hi"}]
    decider.complexity = 0  # a new decision would pick a cheap model for "hi"
    again = await plan_with(router, "openai", later, "alice", decider, always_local)
    assert again.sticky and again.reason == STICKY and again.model == first.model == SONNET
    assert len(decider.asked) == 1
    other_client = await plan_with(router, "openai", later, "bob", decider, always_local)
    assert not other_client.sticky and len(decider.asked) == 2
    await router.aclose()


async def test_a_sticky_conversation_keeps_its_fall_through(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-test")
    router = router_for(settings(), tmp_path)
    first = await plan_with(router, "openai", body(), "alice", Scripted(), always_local)
    again = await plan_with(router, "openai", body(), "alice", Scripted(), always_local)
    assert again.sticky and [m.id for m, _, _ in again.order] == [m.id for m, _, _ in first.order] == [SONNET, OPUS]
    await router.aclose()


async def test_a_sticky_model_that_can_no_longer_take_the_conversation_is_replaced(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-test")
    decider = Scripted(topics={"chat": 1.0}, complexity=0, risk=0)
    router = router_for(settings(), tmp_path)
    first = await plan_with(router, "openai", body("hello there"), "alice", decider, always_local)
    assert first.model == "qwen/qwen3.7-flash"
    with_tools = body("hello there", tools=[{"type": "function", "function": {"name": "ls", "parameters": {}}}])
    again = await plan_with(router, "openai", with_tools, "alice", decider, always_local)
    assert not again.sticky and again.model == "deepseek/deepseek-v4.1-flash"  # Qwen takes no tools
    await router.aclose()


async def test_a_failed_decision_plays_safe_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-test")
    router = router_for(settings(rule="step"), tmp_path)
    plan = await plan_with(router, "openai", body(), "alice", Scripted(fail=True), always_local)
    report = plan.report()
    assert report["decision_error"] == "scripted: every engine failed"
    assert report["signals"]["complexity"] == 3 and report["signals"]["confidence"] == 0.0  # unsure: one level up
    assert plan.model == OPUS
    await router.aclose()


async def test_a_named_catalogue_model_is_passed_through_without_a_decision(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-test")
    decider = Scripted()
    router = router_for(settings(), tmp_path)
    plan = await plan_with(router, "openai", body(model=OPUS), "alice", decider, always_local)
    assert plan.reason == PASSED and plan.model == OPUS and decider.asked == []
    await router.aclose()


async def test_an_unknown_model_is_a_404_naming_the_known_ones_unless_a_passthrough_upstream_is_set(tmp_path):
    router = router_for(settings(), tmp_path)
    with pytest.raises(RouterError) as caught:
        await plan_with(router, "openai", body(model="gpt-9"), "alice", Scripted(), always_local)
    assert caught.value.status == 404 and "'gpt-9' is not routed or configured; known: auto, qwen" in caught.value.message
    router.configure(settings(passthrough_upstream="openrouter"))
    plan = await plan_with(router, "openai", body(model="gpt-9"), "alice", Scripted(), always_local)
    assert plan.model == "gpt-9" and plan.order == [(None, "openrouter", "")]
    await router.aclose()


async def test_a_private_prompt_may_not_be_passed_through_to_a_remote_upstream_under_local_only(tmp_path):
    router = router_for(settings(private="local_only"), tmp_path)
    with pytest.raises(RouterError) as caught:
        await plan_with(router, "openai", body("my SSN is 123-45-6789", model=OPUS), "alice", Scripted(), always_local)
    assert caught.value.status == 403 and "personal: US social security number" in caught.value.message
    assert "123-45" not in caught.value.message
    await router.aclose()


async def test_a_prompt_over_the_pre_checks_budget_stays_local_under_local_only(tmp_path):
    router = router_for(settings(private="local_only", precheck_max_chars=10_000), tmp_path)
    with pytest.raises(RouterError) as caught:
        await plan_with(router, "openai", body("an ordinary question " * 1_000, model=OPUS), "alice", Scripted(),
                        always_local)
    assert caught.value.status == 403 and "unchecked: " in caught.value.message
    await router.aclose()


async def test_the_router_off_answers_404(tmp_path):
    router = router_for(settings(enabled=False), tmp_path)
    with pytest.raises(RouterError, match="the router is off"):
        await plan_with(router, "openai", body(), "alice", Scripted(), always_local)
    await router.aclose()


async def test_no_model_for_the_request_is_a_clear_400(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-test")
    router = router_for(settings(), tmp_path)
    huge = body("word " * 900_000)  # about 1.5 M tokens: more than any context here
    with pytest.raises(RouterError) as caught:
        await plan_with(router, "openai", huge, "alice", Scripted(), always_local)
    assert caught.value.status == 400 and "context too small" in caught.value.message
    await router.aclose()


async def test_a_dry_run_neither_sets_nor_refreshes_a_conversations_model(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-test")
    decider = Scripted()
    router = router_for(settings(), tmp_path)
    dry = await plan_with(router, "openai", body(), "alice", decider, always_local, remember=False)
    real = await plan_with(router, "openai", body(), "alice", decider, always_local)
    assert not dry.sticky and not real.sticky and len(decider.asked) == 2
    again = await plan_with(router, "openai", body(), "alice", decider, always_local, remember=False)
    assert again.sticky  # the real request's model is what a dry run reports
    await router.aclose()


async def test_a_catalogue_model_named_directly_is_refused_once_over_its_daily_budget(tmp_path):
    table = seed_table()
    for model in table["models"]:
        if model["id"] == OPUS:
            model["daily_budget_usd"] = 1.0
    router = router_for(RouterSettings.model_validate(table), tmp_path)
    assert (await plan_with(router, "openai", body(model=OPUS), "alice", Scripted())).model == OPUS
    router.spend.add(OPUS, 1.5)
    with pytest.raises(RouterError) as caught:
        await plan_with(router, "openai", body(model=OPUS), "alice", Scripted())
    assert caught.value.status == 429 and "over its daily budget ($1.5000 spent of $1.0000" in caught.value.message
    await router.aclose()
