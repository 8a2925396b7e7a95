"""The outcomes the router's decision log does not already hold, written to the outcome log:

- a retry: the same turn of a conversation (the same client, conversation, number of messages
  and last user message) sent again within `[router.outcomes] retry_window_s` of its answer.
  The earlier answer counts as bad;
- feedback: `POST /v1/router/feedback {"request_id", "verdict": "good" | "bad"}`.

Fall-throughs (`failed`) and checks (`checks`) are in the decision log itself. `system1 router
refit` reads both logs (`offline/refit.py`).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

from ..core.jsonl import RotatingJsonl
from ..core.schema import RequestError
from ..core.router_config import RouterSettings
from .conversation import Conversation

VERDICTS = ("good", "bad")
#: Answered turns remembered for retry detection, and answered request ids for feedback, at most.
REMEMBERED = 10_000
REQUEST_ID = re.compile(r"[0-9a-f]{32}")


def turn_key(client: str, conversation: Conversation) -> str:
    return hashlib.sha256(json.dumps([client, conversation.key, len(conversation.turns),
                                      conversation.last_user]).encode()).hexdigest()


def outcome_log_path(settings: RouterSettings, install_dir: Path) -> Path:
    configured = settings.outcomes.log_file
    return Path(configured).expanduser() if configured else install_dir / "logs" / "router-outcomes.jsonl"


class Outcomes:
    def __init__(self) -> None:
        self.settings: RouterSettings | None = None
        self.log: RotatingJsonl | None = None
        self._turns: OrderedDict[str, tuple[float, str, str]] = OrderedDict()  # turn → (answered, request id, model)
        self._answered: OrderedDict[str, None] = OrderedDict()

    def configure(self, settings: RouterSettings, install_dir: Path) -> None:
        self.settings = settings
        path = outcome_log_path(settings, install_dir)
        if self.log is not None and (self.log.path != path or not settings.enabled):
            self.log.close()
            self.log = None
        if settings.enabled and self.log is None:
            self.log = RotatingJsonl(path, settings.log_max_bytes, settings.log_backups)

    def close(self) -> None:
        if self.log is not None:
            self.log.close()
            self.log = None

    def arrived(self, client: str, conversation: Conversation, now: float | None = None) -> str | None:
        """A routed turn arrives: when it repeats one answered within the window, that answer is
        recorded as bad (once); the earlier request's id then, else None."""
        window = self.settings.outcomes.retry_window_s if self.settings else 0.0
        earlier = self._turns.pop(turn_key(client, conversation), None)
        now = time.time() if now is None else now
        if earlier is None or not window or now - earlier[0] > window:
            return None
        self._write({"id": earlier[1], "model": earlier[2], "outcome": "bad", "source": "retry", "client": client})
        return earlier[1]

    def answered(self, client: str, conversation: Conversation, request_id: str, model: str,
                 now: float | None = None) -> None:
        self._turns[turn_key(client, conversation)] = (time.time() if now is None else now, request_id, model)
        self._answered[request_id] = None
        for remembered in (self._turns, self._answered):
            while len(remembered) > REMEMBERED:
                remembered.popitem(last=False)

    def feedback(self, payload: Any, client: str) -> dict[str, Any]:
        """Record a client's verdict on a routed answer; `RequestError` naming the field."""
        if not isinstance(payload, dict) or set(payload) - {"request_id", "verdict"}:
            raise RequestError('feedback: the body must be {"request_id", "verdict"}')
        request_id, verdict = payload.get("request_id"), payload.get("verdict")
        if not isinstance(request_id, str) or not REQUEST_ID.fullmatch(request_id):
            raise RequestError("request_id: must be the 32 hex digits of an X-Router-Request-Id")
        if verdict not in VERDICTS:
            raise RequestError(f"verdict: must be one of {', '.join(VERDICTS)}, not {verdict!r:.40}")
        self._write({"id": request_id, "outcome": verdict, "source": "feedback", "client": client})
        # Ids answered before a restart (or long ago) are recorded all the same; refit joins them
        # with the decision log.
        return {"recorded": True, "request_id": request_id, "known": request_id in self._answered}

    def _write(self, entry: dict[str, Any]) -> None:
        if self.log is not None:
            self.log.write({"ts": round(time.time(), 3), **entry})
