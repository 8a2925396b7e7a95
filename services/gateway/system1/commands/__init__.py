"""The `system1` subcommands, one module per family; `cli.py` holds the parser."""

from __future__ import annotations

import os

EXIT_OK, EXIT_START, EXIT_HEALTH, EXIT_DECISION = 0, 1, 2, 3


def client_name() -> str:
    return os.environ.get("SYSTEM1_CLIENT") or "local"
