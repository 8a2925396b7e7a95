"""The bridge token: a random secret the service writes into its state folder at each start.

Whoever can read it (the stdio bridge started by `docker exec`, as the service's own user) is
trusted to name its user in `X-System1-Client`; the service writes it, local clients read it.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

#: The client name the bridge token authenticates as, when the caller names no user.
BRIDGE = "bridge"
BRIDGE_TOKEN_FILE = "bridge.token"


def write_bridge_token(state_dir: Path) -> str:
    """A fresh token for this service run, readable only by the service's own user."""
    token = secrets.token_urlsafe(32)
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / BRIDGE_TOKEN_FILE
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(token)
    return token


def read_bridge_token(state_dir: Path) -> str | None:
    try:
        return (state_dir / BRIDGE_TOKEN_FILE).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None
