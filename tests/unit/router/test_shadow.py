"""The shadow engine: asked after the plan, off the request's path, with its agreement counted
per signal and on the routed model, a bounded queue, privacy kept, and a log `learn` reads."""

from __future__ import annotations

import asyncio
import json

import pytest

from system1.offline.calibrate import load
from system1.router.signals import ask

from .scripted import Scripted, always_local, plan_with, router_for
from .test_plan import NPE, body, settings

pytestmark = pytest.mark.anyio


def shadowed(decision: dict | None = None, **changes):
    return settings(decision={"shadow": "teacher", **(decision or {})}, **changes)


def start(router, teacher: Scripted, calls: list | None = None, gate: asyncio.Event | None = None):
    async def asker(job):
        if calls is not None:
            calls.append(job)
        if gate is not None:
            await gate.wait()
        return await ask(teacher, router.settings, job.text, "router-shadow", job.private, job.may_ask,
                         only=router.settings.decision.shadow)

    router.shadow.start(asker)


def sample(router, name: str, **labels) -> float:
    return router.observer.registry.get_sample_value(name, labels) or 0.0


def shadow_lines(tmp_path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "state" / "logs" / "router-shadow.jsonl").read_text().splitlines()]


async def test_the_shadow_counts_agreement_per_signal_and_on_the_routed_model(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-test")
    router = router_for(shadowed(), tmp_path)
    start(router, Scripted(topics={"code-gen": 1.0}, complexity=2, risk=1, provider="teacher"))
    plan = await plan_with(router, "openai", body(), "alice", Scripted(complexity=2, risk=1), always_local)
    await router.shadow.drain()
    await router.aclose()
    [line] = shadow_lines(tmp_path)
    assert line["id"] == plan.request_id and line["primary"]["model"] == plan.model
    assert line["primary"]["topic"] == "debugging" and line["shadow"]["topic"] == "code-gen"
    assert line["agree"]["topic"] is False and line["agree"]["complexity"] is True and line["agree"]["risk"] is True
    assert line["agree"]["model"] == (line["shadow"]["model"] == plan.model)
    assert sample(router, "system1_router_shadow_agreement_total", signal="topic", model=plan.model, agreed="false") == 1
    assert sample(router, "system1_router_shadow_agreement_total", signal="risk", model=plan.model, agreed="true") == 1
    assert "prompt" not in line and "rows" not in line  # log_prompts is off


async def test_a_full_shadow_queue_drops_new_jobs_and_never_holds_up_a_request(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-test")
    router = router_for(shadowed(decision={"shadow_queue": 1}), tmp_path)
    gate, calls = asyncio.Event(), []
    start(router, Scripted(provider="teacher"), calls, gate)
    for i in range(4):  # the worker holds the first; one waits; two are dropped
        await asyncio.wait_for(plan_with(router, "openai", body(f"{NPE} #{i}"), f"c{i}", Scripted(), always_local), 5)
    await asyncio.sleep(0)
    assert sample(router, "system1_router_shadow_skipped_total", why="queue_full") == 2
    gate.set()
    await router.shadow.drain()
    assert len(calls) == 2
    await router.aclose()


async def test_a_private_prompt_never_reaches_a_remote_shadow_under_local_only(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-test")
    router = router_for(shadowed(private="local_only"), tmp_path)
    calls: list = []
    start(router, Scripted(provider="teacher"), calls)
    await plan_with(router, "openai", body("my key is AKIAIOSFODNN7EXAMPLE, why is S3 denying me?"), "alice", Scripted(),
                      lambda name: name != "teacher")
    await router.shadow.drain()
    assert calls == [] and sample(router, "system1_router_shadow_skipped_total", why="private") == 1
    await router.aclose()


async def test_the_shadow_log_is_a_training_set_that_learn_reads_without_private_prompts(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-test")
    router = router_for(shadowed(log_prompts=True), tmp_path)
    start(router, Scripted(topics={"code-gen": 1.0}, complexity=1, risk=0, p_private=0.01, provider="teacher"))
    await plan_with(router, "openai", body(), "alice", Scripted(), always_local)
    await plan_with(router, "openai", body("call me at +44 20 7946 0958 about the invoice"), "bob", Scripted(), always_local)
    await router.shadow.drain()
    await router.aclose()
    public, private = shadow_lines(tmp_path)
    assert public["prompt"] == NPE and "prompt" not in private and "rows" not in private
    rows = load(tmp_path / "state" / "logs" / "router-shadow.jsonl")
    by_kind = {row.kind: row for row in rows}
    assert set(by_kind) == {"router-topic", "router-complexity", "router-risk", "router-private"}
    assert by_kind["router-topic"].label.startswith("code-gen:") and by_kind["router-private"].label == "no"
    assert by_kind["router-complexity"].label.startswith("routine") and by_kind["router-risk"].label.startswith("harmless")
    assert all(row.context == {"prompt": NPE} for row in rows)  # the state the decision itself was asked about


async def test_a_dry_run_and_a_sticky_turn_ask_no_shadow(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-test")
    router = router_for(shadowed(), tmp_path)
    calls: list = []
    start(router, Scripted(provider="teacher"), calls)
    await plan_with(router, "openai", body(), "alice", Scripted(), always_local, remember=False)
    await plan_with(router, "openai", body(), "alice", Scripted(), always_local)
    await plan_with(router, "openai", body(), "alice", Scripted(), always_local)  # the same conversation: sticky
    await router.shadow.drain()
    assert len(calls) == 1
    await router.aclose()
