"""A circuit breaker per provider, so a hung or failing engine costs one timeout, not one per
request.

After `failures` consecutive timeouts or errors the circuit opens: the chain skips the provider
(straight to the fallback; the attempt says why) for `cooldown_s`. Then one request is let
through as a probe: success closes the circuit, failure opens it for another cool-down.
Abstentions, malformed answers and a full queue do not count: the engine answered, or never
got the request. Nor does a timeout that the caller's budget cut shorter than the engine's own
timeout (the cascade's budget, say): a judge slower than one caller can wait on a long prompt is
not down, and opening its circuit would shut it out of every decision that follows. A hung engine
behind a budget then costs each of those decisions at most that budget.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

State = Literal["closed", "open", "half-open"]


class Breaker:
    def __init__(self, failures: int, cooldown_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.threshold = failures  # 0: never opens
        self.cooldown_s = cooldown_s
        self.clock = clock
        self.state: State = "closed"
        self.failures = 0
        self._opened_at = 0.0
        self._probing = False

    def allow(self) -> bool:
        """Whether a request may go to the provider now (claiming the probe when half-open)."""
        if self.state == "closed":
            return True
        if self.state == "open" and self.clock() - self._opened_at >= self.cooldown_s:
            self.state = "half-open"
        if self.state == "half-open" and not self._probing:
            self._probing = True
            return True
        return False

    def retry_in_s(self) -> float:
        return max(0.0, self.cooldown_s - (self.clock() - self._opened_at))

    def succeeded(self) -> None:
        self.state, self.failures, self._probing = "closed", 0, False

    def failed(self) -> None:
        self.failures += 1
        if self.state == "half-open" or (self.threshold and self.failures >= self.threshold):
            self.state, self._opened_at, self._probing = "open", self.clock(), False

    def released(self) -> None:
        """A probe that ended without a verdict (turned away by the queue, cancelled) frees
        the half-open slot for the next request."""
        self._probing = False
