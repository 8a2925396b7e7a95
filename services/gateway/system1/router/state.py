"""What the router remembers between requests: each conversation's model (for `sticky_ttl_s`)
and the requests in flight on each model and upstream. Spend is `spend.py`'s.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

#: Conversations remembered at most (the oldest is forgotten first).
MAX_CONVERSATIONS = 100_000


class Sticky:
    """Conversation key → (its models: the one that answers, then those to fall through to;
    when it expires), refreshed on every use."""

    def __init__(self, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._models: OrderedDict[str, tuple[tuple[str, ...], float]] = OrderedDict()

    def get(self, key: str) -> tuple[str, ...] | None:
        found = self._models.get(key)
        if found is None:
            return None
        if found[1] <= self._clock():
            del self._models[key]
            return None
        return found[0]

    def put(self, key: str, models: tuple[str, ...]) -> None:
        if self.ttl_s <= 0:
            return
        self._models[key] = (models, self._clock() + self.ttl_s)
        self._models.move_to_end(key)
        while len(self._models) > MAX_CONVERSATIONS:
            self._models.popitem(last=False)


class InFlight:
    """Requests being answered, per model (the load penalty reads it): each `acquire` is
    matched by one `release` when its answer has ended, streamed or not."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def acquire(self, model: str) -> None:
        self.counts[model] = self.counts.get(model, 0) + 1

    def release(self, model: str) -> None:
        self.counts[model] -= 1
        if not self.counts[model]:
            del self.counts[model]


class UpstreamSlots(InFlight):
    """Requests in flight per upstream, each upstream held to its own limit."""

    def take(self, upstream: str, limit: int) -> bool:
        if self.counts.get(upstream, 0) >= limit:
            return False
        self.acquire(upstream)
        return True
