"""The hooks the core calls as decisions flow; metrics subclass `Observer`, tests may too.

Kept separate from `metrics.py` so the core (and the standalone MCP server) never needs
prometheus-client.
"""

from __future__ import annotations

from typing import Any


class Observer:
    """Does nothing; override what you want to see."""

    def decision(self, response: Any, client: str, seconds: float, reason: str | None) -> None:
        """One finished decision; `reason` says why it abstained (engine, threshold, paused)."""

    def attempt(self, provider: str, outcome: str) -> None:
        """One try of one provider."""

    def engine_pass(self, provider: str, size: int, seconds: float) -> None:
        """One engine call carrying `size` queued requests."""

    def lane(self, provider: str, queued: int, in_flight: int) -> None:
        """A lane's queue depth and passes in flight, after every change."""

    def engine_up(self, provider: str, ok: bool) -> None:
        """A health probe's verdict."""
