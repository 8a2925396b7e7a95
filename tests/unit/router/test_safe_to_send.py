"""Under `local_only` a prompt leaves the machine only when it is known safe to send: the pre-check
found nothing and the decision's calibrated probability that it is private is below
`max_leave_probability`; `prefer_local` reads the same probability with its own threshold."""

from __future__ import annotations

from contextlib import asynccontextmanager

import pytest

from system1.core.gateway import Gateway
from system1.core.router_config import RouterSettings
from system1.providers.base import (Capabilities, EngineAnswer, HealthProbe, OneQuestionProvider, ProviderError,
                                    Query)
from system1.router.router import Router
from system1.service.metrics import Metrics

from ..helpers import config_in

from .catalogues import seed_table
from .scripted import Scripted, always_local, plan_with, router_for

pytestmark = pytest.mark.anyio
SONNET, GEMMA = "anthropic/claude-sonnet-5", "gemma-3-270m"
PROSE = "Can you help me word a note about the quarterly roadmap for the platform team?"


def body(text: str = PROSE) -> dict:
    return {"model": "auto", "messages": [{"role": "user", "content": text}]}


def router(tmp_path, monkeypatch, **changes):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-test")
    return router_for(RouterSettings.model_validate(seed_table(**changes)), tmp_path)


@pytest.mark.parametrize("p_private, leaves", [(0.01, True), (0.049, True), (0.05, False), (0.2, False), (0.9, False)])
async def test_under_local_only_a_prompt_leaves_only_below_the_leave_probability(tmp_path, monkeypatch, p_private,
                                                                                 leaves):
    routed = router(tmp_path, monkeypatch, private="local_only")
    plan = await plan_with(routed, "openai", body(), "alice", Scripted(p_private=p_private, risk=1), always_local)
    report = plan.report()
    assert report["signals"]["p_private"] == pytest.approx(p_private)
    assert report["signals"]["private_by"] == "stage 1: scripted"
    if leaves:
        assert plan.model == SONNET and report["kept_local"] is None and "x-router-kept-local" not in plan.headers(None)
    else:
        assert plan.model == GEMMA and report["kept_local"]["by"] == "decision"
        assert f"{p_private:.3f}" in report["kept_local"]["why"] and plan.headers(None)["x-router-kept-local"] == "decision"
    await routed.aclose()


async def test_under_local_only_a_prompt_with_no_decision_is_not_known_safe_and_stays(tmp_path, monkeypatch):
    routed = router(tmp_path, monkeypatch, private="local_only")
    plan = await plan_with(routed, "openai", body(), "alice", Scripted(fail=True), always_local)
    assert plan.model == GEMMA and plan.report()["kept_local"]["by"] == "no-decision"
    await routed.aclose()


async def test_under_local_only_no_prompt_is_shown_to_a_decision_engine_off_this_machine(tmp_path, monkeypatch):
    routed = router(tmp_path, monkeypatch, private="local_only")
    decider = Scripted(p_private=0.01)
    plan = await plan_with(routed, "openai", body(), "alice", decider, lambda name: False)
    assert decider.asked == [] and plan.model == GEMMA and plan.report()["kept_local"]["by"] == "no-decision"
    await routed.aclose()


async def test_the_private_question_carries_the_leave_bar_as_its_own_threshold_only_under_local_only(
        tmp_path, monkeypatch):
    for mode, bar in (("local_only", 0.95), ("prefer_local", None), ("ignore", None)):
        routed = router(tmp_path / mode, monkeypatch, private=mode, max_leave_probability=0.05)
        decider = Scripted()
        await plan_with(routed, "openai", body(), "alice", decider, always_local)
        [(_, queries, _)] = decider.asked
        assert [q.min_confidence for q in queries] == [None, None, None, pytest.approx(bar) if bar else None], mode
        await routed.aclose()


@pytest.mark.parametrize("p_private, local", [(0.3, False), (0.6, True)])
async def test_prefer_local_prefers_a_local_model_once_the_probability_reaches_its_own_threshold(
        tmp_path, monkeypatch, p_private, local):
    routed = router(tmp_path, monkeypatch, private="prefer_local", prefer_local_probability=0.5)
    plan = await plan_with(routed, "openai", body(), "alice", Scripted(p_private=p_private, risk=1), always_local)
    assert (plan.model == GEMMA) is local
    assert (plan.report()["kept_local"] or {}).get("by") == ("decision" if local else None)
    await routed.aclose()


async def test_a_conversation_kept_with_a_remote_model_moves_here_once_a_turn_is_not_known_safe(tmp_path, monkeypatch):
    routed = router(tmp_path, monkeypatch, private="local_only")
    first = await plan_with(routed, "openai", body(), "alice", Scripted(p_private=0.01, risk=1), always_local)
    assert first.model == SONNET
    again = await plan_with(routed, "openai", body(), "alice", Scripted(p_private=0.01, risk=1), always_local)
    assert again.sticky and again.model == SONNET  # still safe: the conversation keeps its model
    unsure = await plan_with(routed, "openai", body(), "alice", Scripted(p_private=0.3, risk=1), always_local)
    assert not unsure.sticky and unsure.model == GEMMA and unsure.report()["kept_local"]["by"] == "decision"
    await routed.aclose()


@pytest.mark.parametrize("field, value", [("max_leave_probability", 0.6), ("max_leave_probability", -0.1),
                                          ("prefer_local_probability", 1.5)])
def test_a_leave_or_prefer_probability_out_of_range_is_refused_naming_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        RouterSettings.model_validate(seed_table(**{field: value}))


class Leaning(OneQuestionProvider):
    """Answers every question's last option, and the private question with P(yes) = `p_yes`."""

    def __init__(self, name: str, p_yes: float) -> None:
        super().__init__(OneQuestionProvider.Options())
        self.name, self.p_yes, self.asked = name, p_yes, []

    async def decide_one(self, state, query: Query, timeout_s: float) -> EngineAnswer:
        self.asked.append(query.kind)
        if query.kind == "router-private":
            shares = {"yes": self.p_yes, "no": 1 - self.p_yes}
        else:
            shares = {c: (0.9 if i == len(query.choices) - 1 else 0.1 / (len(query.choices) - 1))
                      for i, c in enumerate(query.choices)}
        choice = max(shares, key=shares.get)
        return EngineAnswer(choice, shares[choice], shares, "leaning", "leaning-model")

    async def health(self, timeout_s: float) -> HealthProbe:
        return HealthProbe(True, "up")

    def capabilities(self) -> Capabilities:
        return Capabilities(max_options=None, model="leaning-model")


def unsure_fast_stage_then(judge: Leaning, tmp_path, monkeypatch, more: str = "") -> Router:
    """A router under `local_only` whose fast stage gives P(private) = 0.2, with `judge` as the
    cascade's second stage (`more`: further `[gateway]` lines)."""
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-test")
    toml = '[gateway]\nprovider = "systemone"\ncascade = ["mock"]\n' + more
    gateway = Gateway(config_in(tmp_path, toml), providers={"systemone": Leaning("systemone", 0.2), "mock": judge})

    @asynccontextmanager
    async def borrow():
        yield gateway

    return Router(RouterSettings.model_validate(seed_table(private="local_only")), tmp_path / "router", Metrics(), borrow)


@pytest.mark.parametrize("judge_p, local, by", [(0.01, False, None), (0.3, True, "decision")])
async def test_where_the_fast_stage_is_unsure_the_local_judge_answers_the_private_question_first(
        tmp_path, monkeypatch, judge_p, local, by):
    judge = Leaning("mock", judge_p)
    routed = unsure_fast_stage_then(judge, tmp_path, monkeypatch)
    plan = await routed.plan("openai", body(), "alice")
    assert judge.asked == ["router-private"]  # the other three questions stay with the fast stage
    report = plan.report()
    assert report["signals"]["private_by"] == "stage 2: mock" and report["signals"]["p_private"] == pytest.approx(judge_p)
    assert (plan.model == GEMMA) is local and (report["kept_local"] or {}).get("by") == by
    await routed.aclose()


async def test_with_the_private_kind_skipped_the_judge_is_not_asked_and_the_unsure_prompt_stays_here(
        tmp_path, monkeypatch):
    judge = Leaning("mock", 0.01)
    routed = unsure_fast_stage_then(judge, tmp_path, monkeypatch, 'cascade_skip_kinds = ["router-private"]\n')
    report = (await routed.plan("openai", body(), "alice")).report()
    assert judge.asked == []
    assert report["signals"]["p_private"] == pytest.approx(0.2) and report["signals"]["private_by"] == "stage 1: systemone"
    assert report["model"] == GEMMA and report["kept_local"]["by"] == "decision"
    await routed.aclose()


class Down(Leaning):
    """A judge whose engine fails every call."""

    async def decide_one(self, state, query: Query, timeout_s: float) -> EngineAnswer:
        self.asked.append(query.kind)
        raise ProviderError("connection refused", provider=self.name)


async def test_a_judge_that_gives_no_answer_keeps_the_prompt_here_and_the_report_names_it(tmp_path, monkeypatch):
    judge = Down("mock", 0.0)
    routed = unsure_fast_stage_then(judge, tmp_path, monkeypatch)
    report = (await routed.plan("openai", body(), "alice")).report()
    assert judge.asked == ["router-private"]
    assert report["signals"]["private_by"] == "stage 1: systemone (mock error after it)"
    assert report["model"] == GEMMA and report["kept_local"]["by"] == "decision"
    await routed.aclose()


async def test_the_routers_other_questions_and_its_check_reach_the_cascade_below_their_own_confidence(
        tmp_path, monkeypatch):
    from system1.core.result import Decision
    from system1.router.check import judge

    routed = router(tmp_path, monkeypatch, decision={"min_confidence": 0.7}, check={"min_confidence": 0.8})
    decider = Scripted()
    await plan_with(routed, "openai", body(), "alice", decider, always_local)
    [(_, queries, _)] = decider.asked
    assert [q.min_confidence for q in queries[:3]] == [0.7, 0.7, 0.7]

    class Verdicts:
        asked: list = []

        async def decide_many(self, state, queries, client, priority=0, *, threshold=0.0, only=None):
            self.asked.extend(queries)
            return [Decision("r", "decided", decision="yes", confidence=0.9, probabilities={"yes": 0.9, "no": 0.1},
                             provider="scripted")]

    verdicts = Verdicts()
    await judge(verdicts, routed.settings, "a request", "an answer", SONNET, "alice", False, always_local)
    assert [q.min_confidence for q in verdicts.asked] == [0.8]
    await routed.aclose()
