"""The hooks the core calls as decisions flow; metrics subclass `Observer`, tests may too.

Kept separate from `metrics.py` so the core (and the standalone MCP server) never needs
prometheus-client.
"""

from __future__ import annotations

from .result import Decision


class Observer:
    """Does nothing; override what you want to see."""

    def decision(self, decision: Decision, client: str, seconds: float) -> None:
        """One finished decision."""

    def attempt(self, provider: str, outcome: str) -> None:
        """One try of one provider."""

    def engine_pass(self, provider: str, size: int, seconds: float) -> None:
        """One engine call carrying `size` queued requests."""

    def lane(self, provider: str, queued: int, in_flight: int) -> None:
        """A lane's queue depth and passes in flight, after every change."""

    def circuit(self, provider: str, state: str) -> None:
        """A provider's circuit changed state: closed, open or half-open."""

    def engine_up(self, provider: str, ok: bool) -> None:
        """A health probe's verdict."""
