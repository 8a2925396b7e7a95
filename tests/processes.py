"""Starting local servers for tests: free loopback ports, and processes waited on until they
answer (bounded), stopped afterwards."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def server(args: list[str], ready_url: str, env: dict[str, str] | None = None, timeout_s: float = 120,
           cwd: str | os.PathLike | None = None) -> Iterator[subprocess.Popen]:
    """Start a server process and wait (bounded) until `ready_url` answers; stop it afterwards."""
    log = open(os.devnull, "w") if os.environ.get("CONTRACT_QUIET") else None
    process = subprocess.Popen(args, env={**os.environ, **(env or {})}, stdout=log, stderr=subprocess.STDOUT if log else None,
                               cwd=cwd)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{args[0]} exited with {process.returncode} before it was ready")
            try:
                if httpx.get(ready_url, timeout=2).status_code < 500:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{ready_url} not ready after {timeout_s} s")
            time.sleep(0.2)  # allow-sleep: polling a process we do not control, bounded above
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if log:
            log.close()
