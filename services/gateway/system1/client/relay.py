"""`system1 mcp` beside a running service: a byte relay between stdio and the service's local
MCP socket.

The service serves MCP sessions on `<state>/run/mcp.sock` with the SDK's own server, the one
that serves `/mcp`. This process only copies bytes both ways, after one hello line naming the
caller, so it needs nothing beyond the standard library and answers `initialize` as soon as
the service does. Reaching the socket is the authorisation: its directory is open only to the
service's user, the same rule as the bridge token (in the stack, `docker exec` runs as that user).

When no service listens there, `relay` returns None and the caller serves the tools itself
through the HTTP bridge (`bridge.py`), which also reports a service that is down.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from pathlib import Path

CONNECT_TIMEOUT_S = 5.0
CHUNK = 65_536


def hello(client: str) -> bytes:
    """The first line on the socket: who is calling (the service checks the name)."""
    return (json.dumps({"system1_client": client}) + "\n").encode()


def connect(path: Path) -> socket.socket | None:
    """A connection to the service's socket, or None when no service listens there (no file, a
    stale file left by a service that died, a path too long for a socket address)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(CONNECT_TIMEOUT_S)
    try:
        sock.connect(os.fspath(path))
    except OSError:
        sock.close()
        return None
    sock.settimeout(None)  # a session waits on its client as long as the client keeps it open
    return sock


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _stdin_to_socket(sock: socket.socket, stdin_done: threading.Event) -> None:
    try:
        while chunk := os.read(0, CHUNK):
            sock.sendall(chunk)
        stdin_done.set()
        sock.shutdown(socket.SHUT_WR)  # the service answers what is in flight, then closes
    except OSError:  # the service closed the session; the other direction reports it
        pass


def relay(path: Path, client: str) -> int | None:
    """Relay stdin and stdout through the socket at `path` until the service closes the session:
    0 after stdin closed and every answer arrived, 1 when the service ended the session first.
    None (nothing relayed) when no service listens there."""
    sock = connect(path)
    if sock is None:
        return None
    stdin_done = threading.Event()
    try:
        sock.sendall(hello(client))
        threading.Thread(target=_stdin_to_socket, args=(sock, stdin_done), daemon=True).start()
        while chunk := sock.recv(CHUNK):
            _write_all(1, chunk)
    except BrokenPipeError:  # the client stopped reading: nothing is left to deliver
        return 0
    except OSError as exc:
        print(f"system1 mcp: the session with the gateway service broke ({exc})", file=sys.stderr)
        return 1
    finally:
        sock.close()
    if not stdin_done.is_set():
        print("system1 mcp: the gateway service closed the session before stdin closed (it stopped, "
              "restarted or refused the session; its log says which); start the MCP server again", file=sys.stderr)
        return 1
    return 0
