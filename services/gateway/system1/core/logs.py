"""Logging: the one line per decision, and the set-up for the entry points (stderr always,
since stdout may carry a protocol, an optional file, and the request id on every line through
a context variable)."""

from __future__ import annotations

import contextvars
import logging
import sys

from .result import Decision

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"
# Decision lines are the core's own, so they carry its logger name wherever they are written.
decisions = logging.getLogger("system1.core.gateway")


class _RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id_var.get()
        return True


def configure_logging(level: str = "INFO", log_file: str = "") -> None:
    """Configure the root logger once per process; call only from an entry point."""
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file:
        handlers.append(logging.FileHandler(log_file, encoding="utf-8"))
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        handler.setFormatter(logging.Formatter(FORMAT))
        handler.addFilter(_RequestIdFilter())
        root.addHandler(handler)
    root.setLevel(level)
    # Third-party request logs would repeat every engine call at INFO.
    for noisy in ("httpx", "httpcore", "mcp"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))


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
