"""Where the gateway keeps its state, without importing the config machinery, so that
`system1 mcp` can find the local service's socket before anything heavy loads."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

DEFAULT_INSTALL_DIR = "~/.system1-gateway"
# Inside the state root: a directory only the service's user may enter, holding the local MCP
# socket (a socket file's own mode is set only after it is bound, so the directory guards it).
PRIVATE_RUN_DIR = "run"
MCP_SOCKET_FILE = "mcp.sock"


def install_dir(env: Mapping[str, str]) -> Path:
    """The state root: pause file, local calibration fits, logs (a volume in the stack)."""
    return Path(env.get("SYSTEM1_INSTALL_DIR") or DEFAULT_INSTALL_DIR).expanduser()


def mcp_socket_path(state_dir: Path) -> Path:
    return state_dir / PRIVATE_RUN_DIR / MCP_SOCKET_FILE
