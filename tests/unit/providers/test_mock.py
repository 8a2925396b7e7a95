"""The mock provider's settings."""

from __future__ import annotations

import anyio
import pytest

from system1.providers.base import EngineAnswer, ProviderError, Query
from system1.providers.mock import MockOptions, MockProvider

pytestmark = pytest.mark.anyio


async def test_it_picks_the_first_option_with_the_configured_confidence():
    answer = await MockProvider(MockOptions(confidence=0.4)).decide(None, Query("q", ["a", "b", "c"]), 1)
    assert answer.decision == "a" and answer.confidence == 0.4
    assert answer.probabilities == pytest.approx({"a": 0.4, "b": 0.3, "c": 0.3})


async def test_fail_raises_a_provider_error_and_makes_health_down():
    provider = MockProvider(MockOptions(fail="boom"))
    with pytest.raises(ProviderError, match="boom"):
        await provider.decide(None, Query("q", ["a", "b"]), 1)
    assert not (await provider.health(1)).ok


async def test_response_is_returned_verbatim():
    provider = MockProvider(MockOptions(response={"decision": 1}))
    assert await provider.decide(None, Query("q", ["a", "b"]), 1) == EngineAnswer(decision=1)


async def test_delay_is_awaited_and_cancellable():
    provider = MockProvider(MockOptions(delay_s=60))
    with anyio.move_on_after(0.05) as scope:
        await provider.decide(None, Query("q", ["a", "b"]), 1)
    assert scope.cancelled_caught


async def test_max_options_is_a_limit():
    provider = MockProvider(MockOptions(max_options=2))
    with pytest.raises(ProviderError, match="at most 2"):
        await provider.decide(None, Query("q", ["a", "b", "c"]), 1)
    assert provider.capabilities().max_options == 2


def test_invalid_settings_are_refused():
    with pytest.raises(ValueError):
        MockOptions(confidence=1.2)
    with pytest.raises(ValueError):
        MockOptions(delay_s=-1)
