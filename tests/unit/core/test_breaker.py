"""The circuit breaker: a failing engine is skipped for a cool-down, then probed once."""

from __future__ import annotations

import anyio
import pytest

from system1.core.breaker import Breaker
from system1.core.gateway import Gateway
from system1.service.reports import health_report

from ..helpers import config_in
from .test_gateway import SEED_REQUEST, Scripted, first_option

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_it_opens_after_the_consecutive_failures_and_lets_one_probe_through_after_the_cool_down():
    clock = Clock()
    breaker = Breaker(3, 30.0, clock)
    for _ in range(2):
        assert breaker.allow()
        breaker.failed()
    breaker.succeeded()  # a success in between resets the count
    for _ in range(3):
        assert breaker.allow()
        breaker.failed()
    assert breaker.state == "open" and not breaker.allow()
    clock.now += 29.0
    assert not breaker.allow() and breaker.retry_in_s() == pytest.approx(1.0)
    clock.now += 1.0
    assert breaker.allow() and breaker.state == "half-open"
    assert not breaker.allow()  # one probe at a time
    breaker.failed()
    assert breaker.state == "open" and not breaker.allow()  # a failed probe: another cool-down
    clock.now += 30.0
    assert breaker.allow()
    breaker.succeeded()
    assert breaker.state == "closed" and breaker.allow() and breaker.allow()


def test_a_probe_without_a_verdict_frees_the_half_open_slot():
    clock = Clock()
    breaker = Breaker(1, 5.0, clock)
    breaker.failed()
    clock.now += 5.0
    assert breaker.allow()
    breaker.released()
    assert breaker.allow() and breaker.state == "half-open"


def test_zero_failures_never_opens():
    breaker = Breaker(0, 5.0)
    for _ in range(100):
        breaker.failed()
    assert breaker.state == "closed" and breaker.allow()


async def test_a_hung_primary_is_skipped_once_its_circuit_opens_and_health_says_so(tmp_path):
    hung = Scripted(lambda query: anyio.sleep(3600), "hung")
    backup = Scripted(first_option, "backup")
    config = config_in(tmp_path, '[gateway]\ntimeout_s = 0.05\n')
    config.settings.gateway.provider, config.settings.gateway.fallback = "hung", ["backup"]
    g = Gateway(config, providers={"hung": hung, "backup": backup})
    with anyio.fail_after(10):
        first = [await g.decide(SEED_REQUEST) for _ in range(3)]
        skipped = await g.decide(SEED_REQUEST)
        health = await health_report(g)
    assert all([a.outcome for a in r.attempts] == ["timeout", "ok"] for r in first)
    assert [(a.outcome, a.latency_ms) for a in skipped.attempts] == [("error", 0), ("ok", skipped.attempts[1].latency_ms)]
    assert "circuit is open after 3 consecutive failures" in skipped.attempts[0].detail
    assert skipped.status == "decided" and hung.calls == 3
    assert health["status"] == "degraded" and health["providers"][0]["circuit"] == "open"
