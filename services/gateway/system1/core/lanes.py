"""One lane per provider: bounded engine passes in flight, a fair queue, micro-batching.

- At most `slots` engine passes run at once; the rest wait in a queue of at most `max_queue`
  requests. A full queue answers at once with `Overloaded` and a retry hint instead of letting
  requests pile up into timeouts.
- The queue is served interactive work first (MCP, the hook), then batch work (calibration,
  benchmarks), and round-robin across clients within each, so one client's flood cannot starve
  another.
- For engines with a batch endpoint, queued requests that ask the same questions are merged
  into one pass (up to `max_batch` states, and never past the work budget of one pass). A
  request that arrives at an idle lane is sent at once, in its own task (no queue entry, no
  task of the lane's): batching only ever collects what is already waiting.
- The caller bounds the whole wait (queue plus engine) with its own timeout; a request that
  gives up leaves the queue, and a pass gets, and is cut off at, the longest remaining deadline
  of what it carries.
- A learned head's vector (`Provider.embed`: an embedding model's, or a judge's reading) takes
  the same slots and queue as answers, in its caller's priority, so a batch job's readings wait
  behind interactive work like its answers do; it is a pass of its own, never merged.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..providers.base import Overloaded, Provider, Query
from .events import Observer

INTERACTIVE, BATCH = 0, 1
#: One engine pass: the results for each state, within the timeout.
Pass = Callable[[list[Any], float], Awaitable[list[Any]]]


@dataclass(eq=False)
class _Job:
    state: Any
    client: str
    priority: int
    deadline: float
    key: tuple
    work: int
    engine: Pass
    future: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    enqueued: float = field(default_factory=time.monotonic)


def batch_key(queries: list[Query]) -> tuple:
    return tuple((q.question, tuple(q.choices), q.yes_no) for q in queries)


class FairQueue:
    """Waiting jobs: interactive before batch, round-robin over clients within a priority."""

    def __init__(self) -> None:
        self._queues: tuple[OrderedDict[str, deque[_Job]], ...] = (OrderedDict(), OrderedDict())
        self.size = 0

    def jobs(self) -> list[_Job]:
        return [job for queues in self._queues for queue in queues.values() for job in queue]

    def put(self, job: _Job) -> None:
        self._queues[job.priority].setdefault(job.client, deque()).append(job)
        self.size += 1

    def drop(self, job: _Job) -> bool:
        """Remove a job that gave up while still queued; whether it was there."""
        queue = self._queues[job.priority].get(job.client)
        if queue is None or job not in queue:
            return False
        self._take(job.priority, job.client, job)
        return True

    def next(self) -> _Job | None:
        for priority, queues in enumerate(self._queues):
            while queues:
                client, queue = next(iter(queues.items()))
                job = queue[0]
                self._take(priority, client, job)
                if client in queues:
                    queues.move_to_end(client)
                if not job.future.done():
                    return job
        return None

    def companions(self, first: _Job, room: int, max_work: int) -> list[_Job]:
        """Queued jobs asking the same questions as `first`, interactive ones first, up to `room`
        and within `max_work` for the whole pass (0: unbounded)."""
        taken: list[_Job] = []
        work = first.work
        for priority, queues in enumerate(self._queues):
            for client in list(queues):
                for job in [j for j in queues[client] if j.key == first.key and not j.future.done()]:
                    if len(taken) >= room:
                        return taken
                    if max_work and work + job.work > max_work:
                        continue
                    work += job.work
                    self._take(priority, client, job)
                    taken.append(job)
        return taken

    def _take(self, priority: int, client: str, job: _Job) -> None:
        queue = self._queues[priority][client]
        queue.remove(job)
        self.size -= 1
        if not queue:
            del self._queues[priority][client]


class Lane:
    def __init__(self, provider: Provider, observer: Observer | None = None, max_work: int = 0) -> None:
        options = provider.options
        self.provider = provider
        self.name = provider.name
        self.slots = options.slots
        self.max_queue = options.max_queue
        self.max_batch = options.max_batch if provider.capabilities().batch else 1
        self.max_work = max_work  # per pass; 0: unbounded
        self.observer = observer or Observer()
        self.in_flight = 0
        self.queue = FairQueue()
        self._pass_seconds = 0.05  # recent mean of a pass: the retry hint
        self._usual_seconds: float | None = None  # slow mean: what "far slower than usual" means
        self._running: dict[object, float] = {}  # passes in flight (by a token) and when they began
        self._tasks: set[asyncio.Task] = set()

    @property
    def queued(self) -> int:
        return self.queue.size

    async def run(
        self, state: Any, queries: list[Query], client: str, priority: int, timeout_s: float, work: int = 0
    ) -> list[Any]:
        """Answer `queries` about `state` (`work` characters) through this lane; the caller bounds
        the wait."""
        async def answers(states: list[Any], timeout_s: float) -> list[Any]:
            if len(states) == 1:
                return [await self.provider.decide_many(states[0], queries, timeout_s)]
            return await self.provider.decide_batch(states, queries, timeout_s)

        return await self._submit(state, client, priority, timeout_s, work, batch_key(queries), answers)

    async def embed(self, state: Any, query: Query, model: str | None, client: str, priority: int,
                    timeout_s: float) -> tuple[str, list[float]]:
        """The engine's model and vector of `state` for `query` (by embedding model `model`, None
        for its own) through this lane; the caller bounds the wait."""
        async def vector(states: list[Any], timeout_s: float) -> list[Any]:
            return [await self.provider.embed(states[0], query, timeout_s, model)]

        # A key of its own: vectors are never merged into another request's pass.
        return await self._submit(state, client, priority, timeout_s, 0, ("embed", object()), vector)

    async def _submit(self, state: Any, client: str, priority: int, timeout_s: float, work: int, key: tuple,
                      engine: Pass) -> Any:
        """One request's pass through the queue and slots: `engine`'s result for `state`; requests
        with the same `key` may share a pass."""
        if self.in_flight >= self.slots and self.queued >= self.max_queue:
            raise Overloaded(f"{self.name} is overloaded: {self.queued} requests waiting", self.retry_after_s(),
                             provider=self.name)
        if self.in_flight < self.slots and not self.queued:
            # A free slot and nobody waiting: the caller's own task makes the pass, bounded by
            # the caller's timeout (which also cancels it when the caller gives up).
            self.in_flight += 1
            return (await self._engine(engine, [state], timeout_s))[0]
        loop = asyncio.get_running_loop()
        job = _Job(state, client, priority, loop.time() + timeout_s, key, work, engine)
        self.queue.put(job)
        self._dispatch()
        try:
            return await job.future
        finally:
            if not job.future.done():
                job.future.cancel()
            if self.queue.drop(job):
                self._report()

    def problem(self, timeout_s: float) -> str | None:
        """Why this lane is not serving as it should, or None: a request waiting longer than
        its timeout, a pass running far longer than usual, or passes far slower than usual."""
        now = time.monotonic()
        waits = [now - job.enqueued for job in self.queue.jobs()]
        if waits and max(waits) > timeout_s:
            return f"{self.name}: a request has waited {max(waits):.1f} s for the engine (timeout {timeout_s:g} s)"
        usual = self._usual_seconds
        if usual is None:
            return None
        limit = max(1.0, 10 * usual)
        running = max((now - began for began in self._running.values()), default=0.0)
        if running > limit:
            return f"{self.name}: an engine pass has run {running:.1f} s; passes usually take {usual * 1000:.0f} ms"
        if self._pass_seconds > limit / 2:
            return (f"{self.name}: engine passes take {self._pass_seconds * 1000:.0f} ms lately; "
                    f"usually {usual * 1000:.0f} ms")
        return None

    def retry_after_s(self) -> int:
        waiting_passes = math.ceil((self.queued + 1) / (self.slots * self.max_batch))
        return max(1, math.ceil(waiting_passes * self._pass_seconds))

    # -- passes ------------------------------------------------------------------------------
    def _dispatch(self) -> None:
        while self.in_flight < self.slots:
            job = self.queue.next()
            if job is None:
                break
            jobs = [job, *self.queue.companions(job, self.max_batch - 1, self.max_work)]
            self.in_flight += 1
            task = asyncio.create_task(self._pass(jobs))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self._report()

    async def _pass(self, jobs: list[_Job]) -> None:
        """A pass for queued jobs, in a task of the lane's: its answers go to their futures."""
        loop = asyncio.get_running_loop()
        timeout_s = max(0.001, max(j.deadline for j in jobs) - loop.time())
        try:
            # The pass itself is bounded too: an adapter that ignores its timeout cannot hold the slot.
            async with asyncio.timeout(timeout_s):
                results = await self._engine(jobs[0].engine, [j.state for j in jobs], timeout_s)
            for job, result in zip(jobs, results):
                if not job.future.done():
                    job.future.set_result(result)
        except Exception as exc:
            for job in jobs:
                if not job.future.done():
                    job.future.set_exception(exc)
                    job.future.exception()  # a waiter that gave up must not leave it unretrieved

    async def _engine(self, engine: Pass, states: list[Any], timeout_s: float) -> list[Any]:
        """One engine pass in a slot its caller took: the results for each state, in order."""
        token = object()
        self._running[token] = time.monotonic()
        started = time.perf_counter()
        try:
            return await engine(states, timeout_s)
        finally:
            seconds = time.perf_counter() - started
            del self._running[token]
            self._pass_seconds = 0.8 * self._pass_seconds + 0.2 * seconds
            self._usual_seconds = seconds if self._usual_seconds is None else 0.98 * self._usual_seconds + 0.02 * seconds
            self.in_flight -= 1
            self.observer.engine_pass(self.name, len(states), seconds)
            self._dispatch()

    def _report(self) -> None:
        self.observer.lane(self.name, self.queued, self.in_flight)

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
