"""Health: probes of the chain's engines, cached and shared, with each lane's and circuit's
state, and the overall status.

A probe is bounded by `HEALTH_TIMEOUT_S` (or the attempt timeout, if shorter) and never raises.
Callers asking at the same moment share one probe; a cached one is reused while it is younger
than the caller's `max_age_s`, so health requests never stampede an engine. An engine serves
only if its probe passed, its circuit is not open and its lane has no problem (a request
waiting past its timeout, passes far slower than usual): the status is `ok` when the primary
serves, `degraded` when only a fallback does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any, Literal

from ..providers.base import Provider
from .breaker import Breaker
from .chain import ms
from .events import Observer
from .lanes import Lane

HEALTH_TIMEOUT_S = 5.0
Status = Literal["ok", "degraded", "down", "paused"]


def overall_status(paused: bool, config_errors: list[str], probes: list[dict[str, Any]]) -> Status:
    """paused; down with config errors or no engine of the chain up; ok when the primary and
    every cascade stage are up; else degraded (a fallback answers, or unsure answers abstain)."""
    if paused:
        return "paused"
    chain = [p for p in probes if p["role"] != "cascade"]
    if config_errors or not chain:
        return "down"
    if serving(chain[0]) and all(serving(p) for p in probes if p["role"] == "cascade"):
        return "ok"
    if any(serving(p) for p in chain):
        return "degraded"
    return "down"


def role(index: int, name: str, chain: list[str]) -> str:
    if name not in chain:
        return "cascade"
    return "primary" if index == 0 else "fallback"


def serving(probe: dict[str, Any]) -> bool:
    return probe["ok"] and probe.get("circuit") != "open" and not probe.get("problem")


class HealthMonitor:
    def __init__(self, chain: list[str], cascade: list[str], providers: Mapping[str, Provider],
                 lanes: Mapping[str, Lane], breakers: Mapping[str, Breaker], timeout_s: float,
                 observer: Observer) -> None:
        self.chain = [name for name in chain if name in providers]
        self.names = list(dict.fromkeys([*self.chain, *(name for name in cascade if name in providers)]))
        self.providers = providers
        self.lanes = lanes
        self.breakers = breakers
        self.request_timeout_s = timeout_s
        self.timeout_s = min(timeout_s, HEALTH_TIMEOUT_S)
        self.observer = observer
        self._probes: dict[str, tuple[float, dict[str, Any]]] = {}
        self._probing: dict[str, asyncio.Task] = {}

    async def _probe(self, name: str) -> dict[str, Any]:
        started = time.perf_counter()
        try:
            result = await asyncio.wait_for(self.providers[name].health(self.timeout_s), self.timeout_s)
            ok, detail = result.ok, result.detail
        except TimeoutError:
            ok, detail = False, f"no health answer within {self.timeout_s:g} s"
        except Exception as exc:
            ok, detail = False, f"health probe failed ({type(exc).__name__})"
        self.observer.engine_up(name, ok)
        result = {"ok": ok, "latency_ms": ms(time.perf_counter() - started), "detail": detail}
        self._probes[name] = (time.monotonic(), result)
        return result

    async def probe(self, name: str, max_age_s: float = 0.0) -> dict[str, Any]:
        """A cached probe no older than `max_age_s`; callers at the same moment share one."""
        cached = self._probes.get(name)
        if cached is not None and max_age_s > 0 and time.monotonic() - cached[0] <= max_age_s:
            return cached[1]
        task = self._probing.get(name)
        if task is None:
            task = asyncio.ensure_future(self._probe(name))
            self._probing[name] = task
            task.add_done_callback(lambda _t, n=name: self._probing.pop(n, None))
        return await asyncio.shield(task)

    async def check(self, max_age_s: float = 0.0) -> list[dict[str, Any]]:
        """Each engine of the chain and the cascade: name, role (primary, fallback, cascade),
        probe (ok, latency, detail), its circuit, its lane's queue and passes in flight, and the
        lane's problem if it has one."""
        probes = await asyncio.gather(*(self.probe(n, max_age_s) for n in self.names))
        return [
            {"name": name, "role": role(i, name, self.chain), **probe,
             "circuit": self.breakers[name].state, "queued": self.lanes[name].queued,
             "in_flight": self.lanes[name].in_flight, "problem": self.lanes[name].problem(self.request_timeout_s)}
            for i, (name, probe) in enumerate(zip(self.names, probes))
        ]
