"""What the router remembers between requests: each conversation's model (for `sticky_ttl_s`),
the requests in flight on each model, and each model's spend today, read from the usage the
upstreams report and kept in the state volume so a restart does not reset a budget.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import date, datetime, timezone
from pathlib import Path

from ..core.files import write_whole

logger = logging.getLogger(__name__)
#: Conversations remembered at most (the oldest is forgotten first).
MAX_CONVERSATIONS = 100_000
#: How long a change of spend waits before it is saved (changes in between are saved together).
SAVE_DELAY_S = 1.0


def today() -> date:
    return datetime.now(timezone.utc).date()


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


class Spend:
    """US dollars spent per model today (UTC), in `<state>/router/spend.json`. A change is saved
    at most `SAVE_DELAY_S` later, off the event loop and whole (atomically), and at `close`; a
    new day starts from nothing."""

    def __init__(self, path: Path, day: Callable[[], date] = today) -> None:
        self.path = path
        self._day = day
        #: Why the saved spend could not be read (today's then starts at 0), for health to say.
        self.error: str | None = None
        self._date, self._spent = self._load()
        self._pending: asyncio.TimerHandle | None = None
        #: What the answers in flight may cost at most, per model, until their usage is known.
        self.reserved: dict[str, float] = {}

    def _load(self) -> tuple[date, dict[str, float]]:
        try:
            saved = json.loads(self.path.read_text(encoding="utf-8"))
            spent = {str(k): float(v) for k, v in saved["spent_usd"].items()}
            if not all(math.isfinite(v) and v >= 0 for v in spent.values()):
                raise ValueError("a spend that is not a finite amount of 0 or more")
            return date.fromisoformat(saved["date"]), spent
        except FileNotFoundError:
            pass
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            self.error = f"{self.path} is unreadable ({type(exc).__name__}: {exc}); today's spend started at 0"
            logger.error("router spend: %s", self.error)
        return self._day(), {}

    @property
    def today(self) -> dict[str, float]:
        if self._date != self._day():
            self._date, self._spent = self._day(), {}
        return self._spent

    def committed(self) -> dict[str, float]:
        """Today's spend with what the answers in flight may still cost: what a budget is held to."""
        spent = dict(self.today)
        for model, usd in self.reserved.items():
            spent[model] = spent.get(model, 0.0) + usd
        return spent

    def reserve(self, model: str, usd: float) -> None:
        self.reserved[model] = self.reserved.get(model, 0.0) + usd

    def release(self, model: str, usd: float) -> None:
        if usd <= 0:
            return
        left = self.reserved.get(model, 0.0) - usd
        if left > 1e-12:
            self.reserved[model] = left
        else:
            self.reserved.pop(model, None)

    def add(self, model: str, usd: float) -> None:
        if usd <= 0:
            return
        spent = self.today
        spent[model] = spent.get(model, 0.0) + usd
        if self._pending is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a script, a test): save now
            self._write(self._date, dict(spent))
            return
        self._pending = loop.call_later(SAVE_DELAY_S, self._save_soon, loop)

    def _save_soon(self, loop: asyncio.AbstractEventLoop) -> None:
        self._pending = None
        loop.run_in_executor(None, self._write, self._date, dict(self._spent))

    def close(self) -> None:
        """Save what is not saved yet (the service is stopping)."""
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
            self._write(self._date, dict(self._spent))

    def _write(self, day: date, spent: dict[str, float]) -> None:
        try:
            write_whole(self.path, json.dumps({"date": day.isoformat(), "spent_usd": spent}))
        except OSError as exc:  # the request was answered; only the record is lost
            logger.error("router spend could not be saved to %s: %s", self.path, exc)
