"""A size-rotated JSONL file written off the request path: each entry is queued (never
blocking; a full queue drops the entry and counts it) and a background thread writes it."""

from __future__ import annotations

import json
import logging
import logging.handlers
import queue
from pathlib import Path
from typing import Any

QUEUE_SIZE = 10_000


class RotatingJsonl:
    def __init__(self, path: Path, max_bytes: int, backups: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.dropped = 0
        self._queue: queue.Queue[logging.LogRecord] = queue.Queue(QUEUE_SIZE)
        self._handler = logging.handlers.RotatingFileHandler(path, maxBytes=max_bytes, backupCount=backups,
                                                             encoding="utf-8")
        self._handler.setFormatter(logging.Formatter("%(message)s"))
        self._listener: logging.handlers.QueueListener | None = logging.handlers.QueueListener(
            self._queue, self._handler
        )
        self._listener.start()

    def write(self, entry: dict[str, Any]) -> None:
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
