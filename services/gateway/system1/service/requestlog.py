"""An optional JSONL log of decisions, size-rotated, written off the request path.

Each decision is queued (never blocking: a full queue drops the entry and counts it) and a
background thread writes it. Question text is recorded only when asked for.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import queue
import time
from pathlib import Path
from typing import Any

QUEUE_SIZE = 10_000


class RequestLog:
    def __init__(self, path: Path, questions: bool, max_bytes: int, backups: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.questions = questions
        self.dropped = 0
        self._queue: queue.Queue[logging.LogRecord] = queue.Queue(QUEUE_SIZE)
        self._handler = logging.handlers.RotatingFileHandler(
            path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8"
        )
        self._handler.setFormatter(logging.Formatter("%(message)s"))
        self._listener: logging.handlers.QueueListener | None = logging.handlers.QueueListener(
            self._queue, self._handler
        )
        self._listener.start()

    def record(self, response: Any, client: str, payload: Any) -> None:
        entry = {
            "ts": round(time.time(), 3),
            "id": response.request_id,
            "client": client,
            "provider": response.provider,
            "status": response.status,
            "error": response.error.code.value if response.error else None,
            "decision": response.decision,
            "confidence": response.confidence,
            "calibrated": response.calibrated,
            "latency_ms": response.latency_ms,
        }
        if self.questions and isinstance(payload, dict) and isinstance(payload.get("question"), str):
            entry["question"] = payload["question"]
        record = logging.makeLogRecord({"msg": json.dumps(entry, ensure_ascii=False), "levelno": logging.INFO})
        try:
            self._queue.put_nowait(record)
        except queue.Full:
            self.dropped += 1

    def close(self) -> None:
        """Write what is queued and close the file; safe to call twice."""
        if self._listener is not None:
            self._listener.stop()
            self._listener = None
            self._handler.close()
