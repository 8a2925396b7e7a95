"""Helpers the benchmarks share."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank percentile `q` (0-100) of `values`."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def wait_http(url: str, timeout_s: float = 30) -> None:
    """Until `url` answers below 500, or raise after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


@contextmanager
def process(args: list[str], env: dict[str, str] | None = None, ready_url: str | None = None,
            ready_timeout_s: float = 30) -> Iterator[subprocess.Popen]:
    """A process started quietly, waited on until `ready_url` answers, stopped at the end."""
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if ready_url:
            wait_http(ready_url, ready_timeout_s)
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def served_gateway(config: str, extra_env: Mapping[str, str] | None = None,
                   state: Path | None = None) -> Iterator[tuple[str, subprocess.Popen, dict[str, str]]]:
    """`system1 serve` on a free port with `config`, its state in `state` (by default a
    temporary folder, removed afterwards): its URL, process and environment once it is ready."""
    port = free_port()
    owned = state is None
    state = Path(tempfile.mkdtemp(prefix="system1-bench-")) if state is None else state
    state.mkdir(parents=True, exist_ok=True)
    (state / "config.toml").write_text(config)
    # Bytecode is cached as it is for an installed package, so spawn figures do not include
    # compiling every module (some shells set PYTHONDONTWRITEBYTECODE).
    inherited = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env = {**inherited, **(extra_env or {}), "SYSTEM1_CONFIG": str(state / "config.toml"),
           "SYSTEM1_INSTALL_DIR": str(state), "SYSTEM1_LOG_LEVEL": "WARNING",
           "SYSTEM1_GATEWAY_URL": f"http://127.0.0.1:{port}"}
    args = [sys.executable, "-m", "system1", "serve", "--port", str(port)]
    try:
        with process(args, env, ready_url=f"http://127.0.0.1:{port}/readyz", ready_timeout_s=60) as proc:
            yield f"http://127.0.0.1:{port}", proc, env
    finally:
        if owned:
            shutil.rmtree(state, ignore_errors=True)
