"""Check-and-escalate against upstreams served for real: a failed check sends the request to the
next stronger model, within the caps on escalations and cost, with headers, spend, metrics and
the decision log saying so; streamed, unmarked and unjudgeable answers stand."""

from __future__ import annotations

import json
import re

import pytest

from system1.core.result import Decision
from system1.core.router_config import RouterSettings
from system1.router.check import CHECK_KIND, Verdict, answer_text, judge

from tests.fakes.hosted_chat import hosted_chat, reply_text

from .scripted import Scripted, always_local, core_of, plan_with, router_for

pytestmark = pytest.mark.anyio
KEY = "sk-fake-upstream-key"
CHEAP, MID, TOP = "cloud/cheap", "cloud/mid", "cloud/top"


def catalogue(url: str, **check) -> RouterSettings:
    return RouterSettings.model_validate({
        "enabled": True, "min_skill": [0.1, 0.2, 0.3, 0.4],
        "check": {"enabled": True, **check},
        "upstreams": {"cloud": {"base_url": url, "apis": ["openai", "anthropic"], "api_key_env": "FAKE_CLOUD_KEY",
                                "local": False}},
        "models": [
            {"id": CHEAP, "upstream": "cloud", "price": {"in": 1, "out": 2}, "default_skill": 0.6},
            {"id": MID, "upstream": "cloud", "price": {"in": 2, "out": 4}, "default_skill": 0.8},
            {"id": TOP, "upstream": "cloud", "price": {"in": 4, "out": 8}, "default_skill": 0.95},
        ],
    })


def chat(stream: bool = False) -> dict:
    return {"model": "auto", "stream": stream, "messages": [{"role": "user", "content": "Write a SQL query for top customers"}]}


class Judged:
    """The check's engine, scripted by the model whose answer it reads (the fake upstream's answer
    names its model): P(the answer satisfies the request), or None for no verdict."""

    def __init__(self, **p_yes: float | None) -> None:
        self.p_yes = {k.replace("_", "/"): v for k, v in p_yes.items()}
        self.asked: list[tuple[str, str, str]] = []

    async def decide_many(self, state, queries, client, priority=0, *, threshold=0.0, only=None) -> list[Decision]:
        model = re.fullmatch(r"answer from (\S+)", state["answer"]).group(1)
        self.asked.append((state["request"], state["answer"], model))
        p = self.p_yes.get(model)
        probabilities = None if p is None else {"yes": p, "no": 1 - p}
        return [Decision("r", "decided", decision="yes", confidence=p or 0.0, probabilities=probabilities,
                         provider="scripted")]


@pytest.fixture
def upstream(monkeypatch):
    monkeypatch.setenv("FAKE_CLOUD_KEY", KEY)
    with hosted_chat(key=KEY) as fake:
        yield fake


async def answered(upstream, tmp_path, judged: Judged, body: dict | None = None, headers: dict | None = None, **check):
    router = router_for(catalogue(upstream.url, **check), tmp_path)
    core_of(router).judged = judged
    body = body or chat()
    plan = await plan_with(router, "openai", body, "alice", Scripted(), always_local)
    reply = await router.answer(plan, body, headers or {}, "alice")
    if reply.stream is not None:
        reply.body = b"".join([chunk async for chunk in reply.stream])
    await router.aclose()
    lines = (tmp_path / "state" / "logs" / "router.jsonl").read_text().splitlines()
    return router, plan, reply, json.loads(lines[-1])


def sample(router, name: str, **labels) -> float:
    return router.observer.registry.get_sample_value(name, labels) or 0.0


async def test_a_failed_check_sends_the_request_to_the_next_stronger_model(upstream, tmp_path):
    judged = Judged(cloud_cheap=0.2, cloud_mid=0.9)
    router, plan, reply, logged = await answered(upstream, tmp_path, judged)
    assert plan.model == CHEAP
    assert json.loads(reply.body)["choices"][0]["message"]["content"] == reply_text(MID)
    assert reply.headers["x-router-model"] == MID and reply.headers["x-router-escalated"] == f"{CHEAP} -> {MID}"
    assert reply.headers["x-router-check"] == "0.900"
    assert [r.body["model"] for r in upstream.received] == [CHEAP, MID]
    assert judged.asked[0] == ("Write a SQL query for top customers", reply_text(CHEAP), CHEAP)
    assert logged["model"] == MID and logged["escalated_from"] == [CHEAP]
    assert [(c["model"], c["passed"]) for c in logged["checks"]] == [(CHEAP, False), (MID, True)]
    assert logged["cost_usd"] > 0 and set(router.spend.today) == {CHEAP, MID}  # both answers were paid for
    assert sample(router, "system1_router_checks_total", model=CHEAP, verdict="fail") == 1
    assert sample(router, "system1_router_escalations_total", model=CHEAP, to=MID) == 1


async def test_escalations_stop_at_their_cap_and_the_last_answer_stands(upstream, tmp_path):
    router, _, reply, logged = await answered(upstream, tmp_path, Judged(cloud_cheap=0.1, cloud_mid=0.1, cloud_top=0.1),
                                              max_escalations=1)
    assert reply.headers["x-router-model"] == MID and len(upstream.received) == 2
    assert [c["model"] for c in logged["checks"]] == [CHEAP, MID]
    router, _, reply, _ = await answered(upstream, tmp_path, Judged(cloud_cheap=0.1, cloud_mid=0.1, cloud_top=0.1),
                                         max_escalations=2)
    assert reply.headers["x-router-escalated"] == f"{CHEAP} -> {MID} -> {TOP}"


async def test_the_cost_cap_keeps_the_first_answer(upstream, tmp_path):
    _, _, reply, logged = await answered(upstream, tmp_path, Judged(cloud_cheap=0.1), max_cost_usd=0.0)
    assert reply.headers["x-router-model"] == CHEAP and "x-router-escalated" not in reply.headers
    assert reply.headers["x-router-check"] == "0.100" and logged["escalated_from"] == []


async def test_a_stronger_model_that_fails_when_escalated_to_is_logged_and_the_answer_stands(upstream, tmp_path):
    upstream.fail(MID, "503")
    router, _, reply, logged = await answered(upstream, tmp_path, Judged(cloud_cheap=0.1), max_escalations=1)
    assert reply.headers["x-router-model"] == CHEAP and "x-router-escalated" not in reply.headers
    assert "x-router-failed" not in reply.headers  # the client's answer came before it
    assert logged["model"] == CHEAP and logged["failed"] == [{"model": MID, "why": "HTTP 503"}]
    assert sample(router, "system1_router_fall_throughs_total", model=MID) == 1


async def test_an_answer_without_a_verdict_stands(upstream, tmp_path):
    _, _, reply, logged = await answered(upstream, tmp_path, Judged())
    assert reply.headers["x-router-model"] == CHEAP and reply.headers["x-router-check"] == "none"
    assert logged["checks"][0]["p_yes"] is None and logged["checks"][0]["passed"] is True


async def test_streamed_unmarked_and_switched_off_requests_are_not_checked(upstream, tmp_path):
    judged = Judged(cloud_cheap=0.1)
    _, _, reply, _ = await answered(upstream, tmp_path, judged, chat(stream=True))
    assert reply.body.endswith(b"data: [DONE]\n\n") and reply.headers["x-router-model"] == CHEAP
    _, _, reply, _ = await answered(upstream, tmp_path, judged, requests="marked")
    _, _, _, _ = await answered(upstream, tmp_path, judged, headers={"x-router-check": "off"})
    assert judged.asked == [] and "x-router-check" not in reply.headers
    _, _, reply, _ = await answered(upstream, tmp_path, judged, headers={"x-router-check": "on"}, requests="marked")
    assert len(judged.asked) == 2 and reply.headers["x-router-model"] == MID


def test_the_answer_text_is_read_from_either_api_and_tool_calls_alone_have_none():
    assert answer_text("openai", json.dumps({"choices": [{"message": {"content": "42"}}]}).encode()) == "42"
    assert answer_text("openai", json.dumps({"choices": [{"message": {"content": None, "tool_calls": [{}]}}]}).encode()) is None
    anthropic = {"content": [{"type": "text", "text": "a"}, {"type": "tool_use", "id": "t"}, {"type": "text", "text": "b"}]}
    assert answer_text("anthropic", json.dumps(anthropic).encode()) == "a\nb"
    assert answer_text("anthropic", b"not json") is None


class OneQuestion:
    def __init__(self, p_yes: float) -> None:
        self.p_yes, self.asked = p_yes, []

    async def decide_many(self, state, queries, client, priority=0, *, threshold=0.0, only=None):
        self.asked.append((state, queries, only))
        return [Decision("r", "decided", decision="yes", confidence=self.p_yes,
                         probabilities={"yes": self.p_yes, "no": 1 - self.p_yes}, provider=only or "chain")]


async def test_the_verdict_is_a_yes_no_decision_about_the_request_and_the_answer(tmp_path):
    settings = RouterSettings.model_validate({"enabled": True, "check": {"enabled": True, "provider": "judge", "chars": 200}})
    decider = OneQuestion(0.7)
    verdict = await judge(decider, settings, "Sum 2 and 2", "4" * 500, CHEAP, "alice", False, always_local)
    assert verdict == Verdict(CHEAP, 0.7, "judge", verdict.ms)
    [(state, [query], only)] = decider.asked
    assert only == "judge" and query.kind == CHECK_KIND and query.yes_no
    assert state["request"] == "Sum 2 and 2" and len(state["answer"]) < 210  # cut to its start and end


async def test_a_private_prompts_answer_never_reaches_a_remote_judge_under_local_only():
    settings = RouterSettings.model_validate({"enabled": True, "private": "local_only",
                                              "check": {"enabled": True, "provider": "remote"}})
    decider = OneQuestion(0.1)
    verdict = await judge(decider, settings, "my SSN is …", "noted", CHEAP, "alice", True, lambda name: name != "remote")
    assert verdict.p_yes is None and "local_only" in verdict.error and decider.asked == []
