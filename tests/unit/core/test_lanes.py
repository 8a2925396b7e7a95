"""Lanes: slot limit, fair order, interactive first, batching, overload and timeouts."""

from __future__ import annotations

import asyncio
import time

import anyio
import pytest

from system1.core.events import Observer
from system1.core.lanes import BATCH, INTERACTIVE, Lane
from system1.providers.base import Capabilities, HealthProbe, Overloaded, Provider, ProviderOptions, Query

pytestmark = pytest.mark.anyio

Q = Query("Is it urgent?", ["yes", "no"], yes_no=True)
OTHER_Q = Query("Is it billing?", ["yes", "no"], yes_no=True)


class Gated(Provider):
    """Every engine pass waits for the test to release it, and is recorded."""

    name = "gated"

    def __init__(self, batch: bool = True, **options) -> None:
        super().__init__(ProviderOptions(**options))
        self.batch = batch
        self.passes: list[list[object]] = []  # the states of each pass, in start order
        self.release = asyncio.Event()
        self.started = asyncio.Event()
        self.concurrent = 0
        self.max_concurrent = 0

    async def _engine(self, states):
        self.passes.append(list(states))
        self.concurrent += 1
        self.max_concurrent = max(self.max_concurrent, self.concurrent)
        self.started.set()
        try:
            await self.release.wait()
        finally:
            self.concurrent -= 1
        return [[{"decision": "yes", "confidence": 0.9, "state": s, "q": q.question} for q in self.current] for s in states]

    async def decide(self, query, timeout_s):
        raise AssertionError("lanes call decide_many")

    async def decide_many(self, state, queries, timeout_s):
        self.current = queries
        return (await self._engine([state]))[0]

    async def decide_batch(self, states, queries, timeout_s):
        self.current = queries
        return await self._engine(states)

    async def embed(self, state, query, timeout_s, model=None):
        self.current = [query]
        await self._engine([("vector", state)])
        return model or "own", [1.0, 0.0]

    async def health(self, timeout_s):
        return HealthProbe(True, "")

    def capabilities(self):
        return Capabilities(max_options=None, batch=self.batch)


async def settle():
    """Let every ready task run until nothing changes (no wall-clock wait)."""
    for _ in range(20):
        await asyncio.sleep(0)


async def test_an_idle_lane_sends_a_request_at_once():
    provider = Gated()
    lane = Lane(provider)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lane.run, "s1", [Q], "alice", INTERACTIVE, 5)
        with anyio.fail_after(5):
            await provider.started.wait()
        assert provider.passes == [["s1"]] and lane.queued == 0
        provider.release.set()


async def test_the_slot_limit_is_honoured():
    provider = Gated(batch=False, slots=2)
    lane = Lane(provider)
    async with anyio.create_task_group() as tg:
        for i in range(5):
            tg.start_soon(lane.run, f"s{i}", [Q], "alice", INTERACTIVE, 5)
        await settle()
        assert lane.in_flight == 2 and lane.queued == 3
        provider.release.set()
    assert provider.max_concurrent == 2 and len(provider.passes) == 5


async def test_a_finished_pass_starts_only_as_many_queued_passes_as_slots_are_free():
    provider = Gated(batch=False, slots=1)
    lane = Lane(provider)
    async with anyio.create_task_group() as tg:
        for i in range(3):
            tg.start_soon(lane.run, f"s{i}", [Q], "alice", INTERACTIVE, 5)
        await settle()
        provider.release.set()  # lets the one running pass end, and no later one
        provider.release.clear()
        await settle()
        assert lane.in_flight == 1 and lane.queued == 1 and provider.max_concurrent == 1
        provider.release.set()
    assert provider.passes == [["s0"], ["s1"], ["s2"]]


async def test_clients_are_served_round_robin():
    provider = Gated(batch=False)
    lane = Lane(provider)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lane.run, "first", [Q], "alice", INTERACTIVE, 5)
        await settle()  # occupies the only slot
        for state, client in [("a1", "alice"), ("a2", "alice"), ("a3", "alice"), ("b1", "bob"), ("c1", "carol"), ("b2", "bob")]:
            tg.start_soon(lane.run, state, [Q], client, INTERACTIVE, 5)
            await settle()
        provider.release.set()
    assert [p[0] for p in provider.passes] == ["first", "a1", "b1", "c1", "a2", "b2", "a3"]


async def test_interactive_work_goes_before_batch_work():
    provider = Gated(batch=False)
    lane = Lane(provider)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lane.run, "first", [Q], "bench", BATCH, 5)
        await settle()
        for i in range(3):
            tg.start_soon(lane.run, f"batch{i}", [Q], "bench", BATCH, 5)
        await settle()
        tg.start_soon(lane.run, "hook", [Q], "alice", INTERACTIVE, 5)
        await settle()
        provider.release.set()
    assert [p[0] for p in provider.passes] == ["first", "hook", "batch0", "batch1", "batch2"]


async def test_a_batch_jobs_vector_waits_behind_interactive_work_in_the_same_slots():
    provider = Gated(slots=1)
    lane = Lane(provider)
    vectors = []

    async def embed(state, priority):
        vectors.append(await lane.embed(state, Q, "e5", "bench", priority, 5))

    async with anyio.create_task_group() as tg:
        tg.start_soon(embed, "first", BATCH)
        await settle()
        assert lane.in_flight == 1 and provider.max_concurrent == 1
        tg.start_soon(embed, "reading", BATCH)
        await settle()
        tg.start_soon(lane.run, "hook", [Q], "alice", INTERACTIVE, 5)
        await settle()
        assert lane.queued == 2
        provider.release.set()
    assert [p[0] for p in provider.passes] == [("vector", "first"), "hook", ("vector", "reading")]
    assert vectors == [("e5", [1.0, 0.0])] * 2


async def test_vectors_are_never_merged_into_a_pass_of_answers():
    provider = Gated(max_batch=4)
    lane = Lane(provider)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lane.run, "first", [Q], "c", INTERACTIVE, 5)
        await settle()
        tg.start_soon(lane.embed, "v1", Q, None, "c", INTERACTIVE, 5)
        tg.start_soon(lane.embed, "v2", Q, None, "c", INTERACTIVE, 5)
        tg.start_soon(lane.run, "s1", [Q], "c", INTERACTIVE, 5)
        await settle()
        provider.release.set()
    assert provider.passes == [["first"], [("vector", "v1")], [("vector", "v2")], ["s1"]]


async def test_queued_requests_with_the_same_questions_share_one_pass_and_get_their_own_answers():
    provider = Gated(max_batch=3)
    lane = Lane(provider)
    results = {}

    async def ask(state, query=Q):
        results[state] = await lane.run(state, [query], "c", INTERACTIVE, 5)

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask, "first")
        await settle()
        for state in ["s1", "s2", "s3", "s4"]:
            tg.start_soon(ask, state)
        tg.start_soon(ask, "different", OTHER_Q)
        await settle()
        provider.release.set()
    assert provider.passes == [["first"], ["s1", "s2", "s3"], ["s4"], ["different"]]
    assert all(results[s][0]["state"] == s for s in results)
    assert results["different"][0]["q"] == "Is it billing?"


async def test_a_batch_pass_never_carries_more_than_the_work_budget():
    provider = Gated(max_batch=8)
    lane = Lane(provider, max_work=100)

    async def ask(state, work):
        await lane.run(state, [Q], "c", INTERACTIVE, 5, work)

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask, "first", 10)
        await settle()
        for state, work in [("a", 60), ("b", 30), ("big", 50), ("c", 10)]:
            tg.start_soon(ask, state, work)
        await settle()
        provider.release.set()
    # a + b + c = 100 fit one pass; big (50) would have passed the budget, so it waits its turn.
    assert provider.passes == [["first"], ["a", "b", "c"], ["big"]]


async def test_engines_without_a_batch_endpoint_get_one_request_per_pass():
    provider = Gated(batch=False)
    lane = Lane(provider)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lane.run, "first", [Q], "c", INTERACTIVE, 5)
        await settle()
        for state in ["s1", "s2"]:
            tg.start_soon(lane.run, state, [Q], "c", INTERACTIVE, 5)
        await settle()
        provider.release.set()
    assert provider.passes == [["first"], ["s1"], ["s2"]]


async def test_a_full_queue_answers_at_once_with_a_retry_hint_for_answers_and_vectors_alike():
    provider = Gated(max_queue=1)
    lane = Lane(provider)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lane.run, "running", [Q], "c", INTERACTIVE, 5)
        await settle()
        tg.start_soon(lane.run, "waiting", [OTHER_Q], "c", INTERACTIVE, 5)
        await settle()
        with pytest.raises(Overloaded) as caught:
            await lane.run("turned away", [Q], "c", INTERACTIVE, 5)
        assert caught.value.retry_after_s >= 1
        with pytest.raises(Overloaded):
            await lane.embed("vector turned away", Q, None, "c", BATCH, 5)
        provider.release.set()
    assert ["turned away"] not in provider.passes and [("vector", "vector turned away")] not in provider.passes


async def test_the_callers_timeout_covers_the_queue_wait_and_the_request_leaves_the_queue():
    provider = Gated(batch=False)
    lane = Lane(provider)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lane.run, "running", [Q], "c", INTERACTIVE, 5)
        await settle()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(lane.run("late", [Q], "c", INTERACTIVE, 5), 0.01)
        assert lane.queued == 0
        provider.release.set()
    assert provider.passes == [["running"]]


async def test_an_engine_failure_reaches_every_request_in_the_pass():
    class Failing(Gated):
        async def _engine(self, states):
            self.passes.append(list(states))
            await self.release.wait()
            raise RuntimeError("engine down")

    provider = Failing()
    lane = Lane(provider)
    errors = []

    async def ask(state):
        try:
            await lane.run(state, [Q], "c", INTERACTIVE, 5)
        except RuntimeError as exc:
            errors.append(str(exc))

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask, "first")
        await settle()
        tg.start_soon(ask, "s1")
        tg.start_soon(ask, "s2")
        await settle()
        provider.release.set()
    assert errors == ["engine down"] * 3 and lane.in_flight == 0


async def test_the_lane_reports_depth_passes_and_batch_sizes():
    class Recorder(Observer):
        def __init__(self):
            self.lanes, self.passes = [], []

        def lane(self, provider, queued, in_flight):
            self.lanes.append((queued, in_flight))

        def engine_pass(self, provider, size, seconds):
            self.passes.append(size)

    provider, recorder = Gated(), Recorder()
    lane = Lane(provider, recorder)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lane.run, "first", [Q], "c", INTERACTIVE, 5)
        await settle()
        tg.start_soon(lane.run, "s1", [Q], "c", INTERACTIVE, 5)
        tg.start_soon(lane.run, "s2", [Q], "c", INTERACTIVE, 5)
        await settle()
        assert recorder.lanes[-1] == (2, 1)
        provider.release.set()
    assert recorder.passes == [1, 2] and recorder.lanes[-1] == (0, 0)


async def test_a_request_waiting_past_its_timeout_is_a_problem_health_reports(monkeypatch):
    provider = Gated()
    lane = Lane(provider)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: lane.run("held", [Q], "c", INTERACTIVE, 5))
        await settle()
        tg.start_soon(lambda: lane.run("waiting", [Q], "c", INTERACTIVE, 5))
        await settle()
        assert lane.problem(timeout_s=5) is None
        later = time.monotonic() + 6
        monkeypatch.setattr("system1.core.lanes.time.monotonic", lambda: later)
        assert "a request has waited 6.0 s for the engine (timeout 5 s)" in lane.problem(timeout_s=5)
        provider.release.set()


async def test_a_pass_running_far_longer_than_usual_is_a_problem(monkeypatch):
    provider = Gated()
    lane = Lane(provider)
    provider.release.set()
    await lane.run("quick", [Q], "c", INTERACTIVE, 5)  # sets what is usual
    provider.release = asyncio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: lane.run("slow", [Q], "c", INTERACTIVE, 60))
        await settle()
        later = time.monotonic() + 2
        monkeypatch.setattr("system1.core.lanes.time.monotonic", lambda: later)
        assert "an engine pass has run 2.0 s; passes usually take" in lane.problem(timeout_s=60)
        provider.release.set()
