"""Real engine servers, started locally as their users start them, on free loopback ports."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENVS = ROOT / ".venvs"


def venv_tool(venv: str, tool: str) -> Path:
    path = VENVS / venv / "bin" / tool
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make contract-envs` first")
    return path
