"""Logging: the one line per decision, and the set-up for the entry points (stderr always,
since stdout may carry a protocol, an optional file, and the request id on every line through
a context variable)."""

from __future__ import annotations

import contextvars
import logging
import sys
import time
from collections.abc import Callable

from .result import Decision

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"
# Decision lines are the core's own, so they carry its logger name wherever they are written.
decisions = logging.getLogger("system1.core.gateway")


class _RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id_var.get()
        return True


# Control characters (and Unicode line breaks) in any logged value are written as escapes, so
# text from a request can never start a forged log line.
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(32), 127, 0x85)} | {0x2028: "\\u2028", 0x2029: "\\u2029"}


def escape_controls(text: str) -> str:
    return text.translate(_CONTROLS)


class SafeFormatter(logging.Formatter):
    """The message and request id with control characters escaped; a traceback stays as is."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - the stdlib's name
        record.message = escape_controls(record.message)
        record.request_id = escape_controls(str(getattr(record, "request_id", "-")))
        return super().formatMessage(record)


def configure_logging(level: str = "INFO", log_file: str = "") -> None:
    """Configure the root logger once per process; call only from an entry point. A log file
    that cannot be opened is reported and skipped: logging never stops the gateway."""
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    problem = None
    if log_file:
        try:
            handlers.append(logging.FileHandler(log_file, encoding="utf-8"))
        except OSError as exc:
            problem = f"log_file {log_file!r} cannot be opened ({exc.strerror or exc}); logging to stderr only"
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        handler.setFormatter(SafeFormatter(FORMAT))
        handler.addFilter(_RequestIdFilter())
        root.addHandler(handler)
    root.setLevel(level)
    # Third-party request logs would repeat every engine call at INFO.
    for noisy in ("httpx", "httpcore", "mcp"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
    if problem:
        logging.getLogger(__name__).error("%s", problem)


def log_decision(decision: Decision, client: str) -> None:
    """One INFO line per decision, under its request id; never the question text."""
    token = request_id_var.set(decision.request_id)
    try:
        decisions.info(
            "decision client=%s provider=%s status=%s confidence=%s latency_ms=%d attempts=%s%s",
            client,
            decision.provider or "-",
            decision.status,
            "-" if decision.confidence is None else f"{decision.confidence:.3f}",
            decision.latency_ms,
            ",".join(f"{a.provider}:{a.outcome}" for a in decision.attempts) or "-",
            f" error={decision.error.code.value}" if decision.error else "",
        )
    finally:
        request_id_var.reset(token)


class Repeated:
    """A warning about a condition that repeats (an engine down on every request): the first,
    then at most one every `every_s` seconds, saying how many were held back since."""

    def __init__(self, logger: logging.Logger, every_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger, self.every_s, self.clock = logger, every_s, clock
        self._next = -float("inf")
        self._held = 0

    def warning(self, message: str, *args: object) -> None:
        now = self.clock()
        if now < self._next:
            self._held += 1
            return
        if self._held:
            message += f" (and {self._held} more like it in the last {self.every_s:g} s)"
        self.logger.warning(message, *args)
        self._next, self._held = now + self.every_s, 0
