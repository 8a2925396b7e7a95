"""The fuzz tier: bounded property-based runs against the gateway's own contract, on the mock
engine and on MiniLM (serve.py with the packaged weights)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.processes import free_port, server

ENGINE = Path(__file__).parents[2] / "engines" / "systemone" / "serve.py"


@dataclass
class Tally:
    """What the fuzzers sent and what came back, for the closing summary."""

    requests: int = 0
    server_errors: list[str] = field(default_factory=list)


TALLY = Tally()


def pytest_terminal_summary(terminalreporter) -> None:
    if TALLY.requests:
        terminalreporter.write_line(f"fuzz: {TALLY.requests} requests sent, {len(TALLY.server_errors)} server errors")


MINILM_PORT = free_port()  # chosen at import: the app under test is built at import too


@pytest.fixture(scope="session")
def minilm_engine() -> Iterator[str]:
    """serve.py with the packaged MiniLM, on `MINILM_PORT`."""
    url = f"http://127.0.0.1:{MINILM_PORT}"
    with server([sys.executable, str(ENGINE), "--port", str(MINILM_PORT)], f"{url}/health", {"SYSTEMONE_THREADS": "1"}):
        yield url
