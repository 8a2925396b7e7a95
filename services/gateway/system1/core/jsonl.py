"""A size-rotated JSONL file written off the request path.

Entries are gathered for up to `FLUSH_S` and written together by a worker thread: one thread
wake-up per batch, not per line, since a writer thread woken for every line takes the GIL from
the event loop at every request. Outside an event loop an entry is written at once. At most
`MAX_PENDING` entries wait; beyond that an entry is dropped and counted. `flush` and `close`
write what waits.
"""

from __future__ import annotations

import asyncio
import json
import logging
import logging.handlers
import threading
from collections import deque
from pathlib import Path
from typing import Any

MAX_PENDING = 10_000
FLUSH_S = 0.2


class RotatingJsonl:
    def __init__(self, path: Path, max_bytes: int, backups: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.dropped = 0
        self._pending: list[str] = []
        self._flush: asyncio.TimerHandle | None = None
        self._batches: deque[list[str]] = deque()  # handed to a worker, not yet written
        self._lock = threading.Lock()  # one writer at a time reaches the file
        self._handler: logging.handlers.RotatingFileHandler | None = logging.handlers.RotatingFileHandler(
            path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8")
        self._handler.setFormatter(logging.Formatter("%(message)s"))

    def write(self, entry: dict[str, Any]) -> None:
        if len(self._pending) >= MAX_PENDING:
            self.dropped += 1
            return
        self._pending.append(json.dumps(entry, ensure_ascii=False))
        if self._flush is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._hand_over()
            self._drain()
            return
        self._flush = loop.call_later(FLUSH_S, self._flush_later, loop)

    def _hand_over(self) -> None:
        if self._pending:
            self._batches.append(self._pending)
            self._pending = []

    def _flush_later(self, loop: asyncio.AbstractEventLoop) -> None:
        self._flush = None
        self._hand_over()
        loop.run_in_executor(None, self._drain)

    def _drain(self) -> None:
        """Write every batch handed over (on a worker thread, or from `close`)."""
        with self._lock:
            while self._batches and self._handler is not None:
                # One record a batch: the handler rotates first when the file would grow past its limit.
                lines = self._batches.popleft()
                self._handler.emit(logging.makeLogRecord({"msg": "\n".join(lines), "levelno": logging.INFO}))

    def flush(self) -> None:
        """Write what waits now (from the event loop's thread, like `write`)."""
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        self._hand_over()
        self._drain()

    def close(self) -> None:
        """Write what waits and close the file; safe to call twice."""
        self.flush()
        with self._lock:
            if self._handler is not None:
                self._handler.close()
                self._handler = None
